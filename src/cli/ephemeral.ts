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
import { checkWritable, envLines, removeStale, writeAtomic } from './fixture-files'

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
}

/** What serve's flags add to an ephemeral instance beyond the configuration (#28). */
export interface EphemeralOutputs {
  buckets?: string[] | undefined
  jsonFile?: string | undefined
  envFile?: string | undefined
}

/**
 * `coffer serve --ephemeral` (contract: Operations): a fresh data dir under TMPDIR, a generated
 * admin key, and webhooks to loopback/private addresses allowed, since the receivers of a CI job
 * run beside it. Everything else (port, host, log level, …) comes from flags and env as usual.
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
  const staleRemoved = removeStaleEphemeralDirs(os.tmpdir())
  let dir: string
  try {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), EPHEMERAL_PREFIX))
    // Written at once: a dir without an owner is never removed by another start, so the window
    // in which a concurrent start sees this one ownerless only makes it keep the dir.
    fs.writeFileSync(path.join(dir, OWNER_FILE), ownerLine())
  } catch (err) {
    throw explainTmp(err, os.tmpdir())
  }
  const config = loadConfig(
    // A free S3 port unless one is asked for, so parallel CI jobs never clash on 9000.
    { ...env, COFFER_DATA_DIR: undefined, COFFER_ADMIN_API_KEY: adminApiKey, COFFER_WEBHOOK_ALLOW_PRIVATE: 'true', COFFER_S3_PORT: env.COFFER_S3_PORT || '0' },
    { ...flags, 'data-dir': dir },
  )
  return {
    config,
    adminApiKey,
    staleRemoved,
    fixture,
    ...(jsonFile !== undefined ? { jsonFile } : {}),
    ...(envFile !== undefined ? { envFile } : {}),
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
export async function announceEphemeral(server: Server, eph: Ephemeral, stdout: NodeJS.WritableStream): Promise<void> {
  publishAnnouncement(await prepareAnnouncement(server, eph, process.pid), eph, stdout)
}

/**
 * The tenant and buckets made, and what announces them. `pid` is the process to signal (COFFER_PID):
 * with --workers N the primary, which publishes the announcement once every worker is ready (#29).
 */
export async function prepareAnnouncement(server: Server, eph: Pick<Ephemeral, 'adminApiKey' | 'fixture'>, pid: number): Promise<Announcement> {
  const { tenant, apiKey, s3 } = createEphemeralTenant(server.core, eph.fixture, server.s3 !== undefined)
  await createBuckets(server.core, tenant, eph.fixture.buckets)
  const region = server.core.config.s3Region
  const line = {
    url: server.url,
    adminApiKey: eph.adminApiKey,
    tenant: { id: tenant.id, apiKey },
    ...(server.s3 && s3 ? { s3: { endpoint: server.s3.url, region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } } : {}),
  }
  const aws =
    server.s3 && s3
      ? {
          AWS_ACCESS_KEY_ID: s3.accessKeyId,
          AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
          // AWS_REGION for the SDKs, AWS_DEFAULT_REGION for botocore (the AWS CLI, boto3).
          AWS_REGION: region,
          AWS_DEFAULT_REGION: region,
          AWS_ENDPOINT_URL: server.s3.url,
          AWS_ENDPOINT_URL_S3: server.s3.url,
        }
      : {}
  // COFFER_PID: `coffer wait FILE --pid PID` knows the file is this process's, not an earlier run's.
  return { json: JSON.stringify(line), env: { ...aws, COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_PID: pid } }
}

/** Writes the files asked for, then the JSON line on stdout. */
export function publishAnnouncement(a: Announcement, eph: Pick<Ephemeral, 'jsonFile' | 'envFile'>, stdout: NodeJS.WritableStream): void {
  if (eph.jsonFile !== undefined) writeAtomic('--json-file', eph.jsonFile, `${a.json}\n`)
  if (eph.envFile !== undefined) writeAtomic('--write-env', eph.envFile, envLines(a.env))
  println(stdout, a.json)
}
