import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { loadConfig, type Config } from '../config'
import type { Server } from '../server'
import { println, UsageError } from './io'
import { explainTmp } from './startup-errors'
import { EPHEMERAL_PREFIX, OWNER_FILE, ownerLine, removeStaleEphemeralDirs } from './ephemeral-owner'
import { createBuckets, createEphemeralTenant, fixtureSettings, type FixtureSettings } from './fixture'
import { checkWritable, clientEnv, envLines, removeStale, writeAtomic } from './fixture-files'

/** A throwaway instance's settings and the temporary data dir it owns. */
export interface Ephemeral {
  config: Config
  adminApiKey: string
  /** Removes the data dir; safe to call more than once, and from a process 'exit' handler. */
  remove(): void
  /** Data dirs of earlier instances whose process is gone (killed with SIGKILL), removed at this start. */
  staleRemoved: string[]
  /** Fixed keys and seeded buckets (#28). */
  fixture: FixtureSettings
  /** Where the JSON line and the environment go too (absolute paths), once ready. */
  jsonFile?: string
  envFile?: string
  /** `--in-memory`: the data dir is on a tmpfs and holds at most this many bytes (blobs/memory-budget.ts). */
  memoryBudgetBytes?: number
}

/** What serve's flags add to an ephemeral instance beyond the configuration (#28). */
export interface EphemeralOutputs {
  buckets?: string[] | undefined
  jsonFile?: string | undefined
  envFile?: string | undefined
  /** `--in-memory` (#28): everything in RAM, on a tmpfs, within COFFER_IN_MEMORY_MAX_BYTES. */
  inMemory?: boolean | undefined
}

/** statfs(2) f_type of the file systems whose files are memory: tmpfs and ramfs (linux/magic.h). */
const MEMORY_FILE_SYSTEMS = new Set([0x01021994, 0x858458f6])

/**
 * Where an in-memory instance makes its data dir, and the most it may hold: the setting, or a
 * quarter of the memory (the container's limit when it has one), and never more than the tmpfs
 * has free, so a write is refused with a clear 507 before the OOM killer or a full tmpfs is met.
 */
function inMemoryPlace(config: Config): { root: string; maxBytes: number } {
  const root = path.resolve(config.inMemoryDir)
  let fsInfo: fs.StatsFs
  try {
    fsInfo = fs.statfsSync(root)
  } catch (err) {
    throw new UsageError(`--in-memory: cannot use ${root} (COFFER_IN_MEMORY_DIR): ${(err as Error).message}`)
  }
  if (!MEMORY_FILE_SYSTEMS.has(fsInfo.type)) {
    throw new UsageError(`--in-memory: ${root} is not a tmpfs, so its files would be written to disk: set COFFER_IN_MEMORY_DIR to a tmpfs directory`)
  }
  if (config.inMemoryMaxBytes !== undefined) return { root, maxBytes: config.inMemoryMaxBytes }
  const limit = process.constrainedMemory()
  const memory = limit > 0 && limit < os.totalmem() ? limit : os.totalmem()
  const free = fsInfo.bavail * fsInfo.bsize
  return { root, maxBytes: Math.max(0, Math.floor(Math.min(memory / 4, free * 0.9))) }
}

/**
 * `coffer serve --ephemeral` (contract: Operations): a fresh data dir under TMPDIR, a generated
 * admin key, free ports unless given, and webhooks to loopback/private addresses allowed, since the
 * receivers of a CI job run beside it. Everything else (host, log level, …) comes from flags and
 * env as usual.
 */
export function prepareEphemeral(
  env: Record<string, string | undefined>,
  flags: Record<string, string | undefined>,
  outputs: EphemeralOutputs = {},
): Ephemeral {
  if (flags['data-dir'] !== undefined) throw new UsageError('--ephemeral makes its own temporary data dir: drop --data-dir')
  // Validated before the directory exists, so a bad flag, bucket or path leaves nothing behind.
  const given = loadConfig(env, flags)
  // A fixed admin key (COFFER_ADMIN_API_KEY or --admin-api-key) is used as given (#28).
  const adminApiKey = given.adminApiKey ?? randomBytes(32).toString('base64url')
  const fixture = fixtureSettings(given, outputs.buckets)
  const jsonFile = outputs.jsonFile === undefined ? undefined : checkWritable('--json-file', outputs.jsonFile)
  const envFile = outputs.envFile === undefined ? undefined : checkWritable('--write-env', outputs.envFile)
  if (jsonFile !== undefined && jsonFile === envFile) throw new UsageError('--json-file and --write-env name the same file')
  // What an earlier run left there must not be read as this run's (`coffer wait` reads that file).
  for (const f of [jsonFile, envFile]) if (f !== undefined) removeStale(f)
  // In memory, TMPDIR is not touched at all: the data dir goes on the tmpfs (#28).
  const memory = outputs.inMemory ? inMemoryPlace(given) : undefined
  const root = memory?.root ?? os.tmpdir()
  const staleRemoved = removeStaleEphemeralDirs(root)
  let dir: string
  try {
    dir = fs.mkdtempSync(path.join(root, EPHEMERAL_PREFIX))
    // Written at once: a dir without an owner is never removed by another start, so the window
    // in which a concurrent start sees this one ownerless only makes it keep the dir.
    fs.writeFileSync(path.join(dir, OWNER_FILE), ownerLine())
  } catch (err) {
    throw explainTmp(err, root)
  }
  const config = loadConfig(
    {
      ...env,
      COFFER_DATA_DIR: undefined,
      COFFER_ADMIN_API_KEY: adminApiKey,
      COFFER_WEBHOOK_ALLOW_PRIVATE: 'true',
      // Free ports unless one is asked for (--port, COFFER_PORT; --s3-port, COFFER_S3_PORT), so
      // that parallel CI jobs, or a job beside a server on 8080 or 9000, never clash (#28). The
      // API port used to keep the default 8080.
      COFFER_PORT: env.COFFER_PORT || '0',
      COFFER_S3_PORT: env.COFFER_S3_PORT || '0',
      // No disk reserve in memory: the budget refuses writes long before the tmpfs is full.
      ...(memory ? { COFFER_DISK_RESERVE_BYTES: '0' } : {}),
    },
    { ...flags, 'data-dir': dir },
  )
  return {
    config,
    adminApiKey,
    staleRemoved,
    fixture,
    ...(jsonFile !== undefined ? { jsonFile } : {}),
    ...(envFile !== undefined ? { envFile } : {}),
    ...(memory ? { memoryBudgetBytes: memory.maxBytes } : {}),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  }
}

/** What a ready ephemeral instance announces: its JSON line, and the variables of --write-env. */
export interface Announcement {
  json: string
  env: Record<string, string | number | undefined>
}

/**
 * Creates the instance's tenant and buckets, then writes the JSON line (and the files asked for)
 * a CI script waits for. They are written only now, once the server listens and everything they
 * name exists, so whoever reads one can use it at once: "ready" means ready.
 */
export async function announceEphemeral(server: Server, eph: Ephemeral, stdout: NodeJS.WritableStream, extra: { pid?: number } = {}): Promise<void> {
  publishAnnouncement(await prepareAnnouncement(server, eph, process.pid, extra), eph, stdout)
}

/**
 * The tenant and buckets made, and what announces them. `pid` is the process to signal (COFFER_PID):
 * with --workers N the primary, which publishes the announcement once every worker is ready (#29).
 * `extra.pid`: the server's process in the JSON line, when --detach started it in the background.
 */
export async function prepareAnnouncement(
  server: Server,
  eph: Pick<Ephemeral, 'adminApiKey' | 'fixture'>,
  pid: number,
  extra: { pid?: number } = {},
): Promise<Announcement> {
  const { tenant, apiKey, s3 } = createEphemeralTenant(server.core, eph.fixture, server.s3 !== undefined)
  await createBuckets(server.core, tenant, eph.fixture.buckets)
  const region = server.core.config.s3Region
  const client = server.s3 && s3 ? { s3: { endpoint: server.s3.url, region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } } : {}
  const line = {
    url: server.url,
    adminApiKey: eph.adminApiKey,
    tenant: { id: tenant.id, apiKey },
    ...client,
    // The server's process, when --detach started it in the background (src/cli/detach.ts).
    ...extra,
  }
  return { json: JSON.stringify(line), env: clientEnv({ url: server.url, apiKey, ...client, pid }) }
}

/** Writes the files asked for, then the JSON line on stdout. */
export function publishAnnouncement(a: Announcement, eph: Pick<Ephemeral, 'jsonFile' | 'envFile'>, stdout: NodeJS.WritableStream): void {
  if (eph.jsonFile !== undefined) writeAtomic('--json-file', eph.jsonFile, `${a.json}\n`)
  if (eph.envFile !== undefined) writeAtomic('--write-env', eph.envFile, envLines(a.env))
  println(stdout, a.json)
}
