import fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { Writable } from 'node:stream'
import type { Test } from 'tap'
import { buildApp } from '../src/app'
import { loadConfig, type Config } from '../src/config'
import { createCore, type Core, type CoreOptions } from '../src/core'
import { ManualClock } from '../src/lib/clock'
import { createLogger } from '../src/lib/logger'
import type { App } from '../src/http/types'
import type { Resolver } from '../src/webhooks/ssrf'
import { blobPath } from '../src/blobs/layout'
import { TEST_LOG_DIR } from './log-scan/secrets'
import { fixtureEnv } from './s3/fixture'
import { DiskBlobStore } from '../src/blobs/disk-blob-store'
import { S3BlobStore } from '../src/blobs/s3-blob-store'
import type { BlobStore } from '../src/blobs/blob-store'
import { randomUUID } from 'node:crypto'
import { openConnection } from '../src/db/database'
import { InlineBlobsRepo } from '../src/db/repos/inline-blobs'
import { freshSchema, pgFixture } from './pg/fixture'
import { engineOf, type Engine } from '../src/db/engine'
import { PgBridge } from '../src/db/pg/bridge'
import { PgEngine } from '../src/db/pg/engine'

export const ADMIN_KEY = 'test-admin-key-0123456789abcdef'

export interface TestContext {
  app: App
  core: Core
  clock: ManualClock
  dir: string
  config: Config
  /** Log lines written so far, parsed. */
  logs: Record<string, unknown>[]
}

export function tempDir(t: Test, prefix = 'coffer-test-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A logger sink that keeps parsed lines and mirrors them into TEST_LOG_DIR. */
export function captureLogs(): { stream: Writable; lines: Record<string, unknown>[] } {
  fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
  const file = path.join(TEST_LOG_DIR, `${process.pid}.log`)
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      const text = chunk.toString('utf8')
      fs.appendFileSync(file, text)
      for (const line of text.split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>)
      cb()
    },
  })
  return { stream, lines }
}

/** An app on a fresh temp data dir with a manual clock; closed and removed when the test ends. */
export async function makeApp(
  t: Test,
  env: Record<string, string> = {},
  opts: { resolve?: Resolver; dir?: string; store?: CoreOptions['store']; webhookPollMs?: number; walSync?: CoreOptions['walSync'] } = {},
): Promise<TestContext> {
  const dir = opts.dir ?? tempDir(t)
  // A small disk reserve: every app writes (and fsyncs) one; the default's 4 MiB per test app is
  // disk traffic the suite does not need. test/disk-full.test.ts sets its own.
  const config = loadConfig(
    { COFFER_ADMIN_API_KEY: ADMIN_KEY, COFFER_LOG_LEVEL: 'debug', COFFER_DISK_RESERVE_BYTES: '65536', ...testStoreEnv(), ...env },
    { 'data-dir': dir },
  )
  const clock = new ManualClock()
  const { stream, lines } = captureLogs()
  const logger = createLogger(config.logLevel, stream)
  const database = await testDatabase(t, dir)
  const core = createCore(config, {
    clock,
    log: logger,
    ...(database ? { database } : {}),
    ...(opts.resolve ? { resolve: opts.resolve } : {}),
    ...(opts.store ? { store: opts.store } : {}),
    ...(opts.webhookPollMs !== undefined ? { webhookPollMs: opts.webhookPollMs } : {}),
    ...(opts.walSync ? { walSync: opts.walSync } : {}),
  })
  const app = await buildApp(core, { logger })
  t.teardown(async () => {
    await core.webhooks.stop()
    await app.close()
    if (core.store.remote) await purge(core.store)
    core.close()
  })
  return { app, core, clock, dir, config, logs: lines }
}

/** Which metadata database the API and S3 tests run on: SQLite unless COFFER_TEST_DATABASE=postgres (#30). */
export const TEST_DATABASE: 'sqlite' | 'postgres' = process.env.COFFER_TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite'

/** The schema URL of each data dir a test put on PostgreSQL: an app made again on that dir (a restart) finds its rows. */
const schemas = new Map<string, string>()

/**
 * CoreOptions.database for an app on data dir `dir`: nothing on SQLite (the data dir's own file);
 * on PostgreSQL a fresh schema of the fixture's database (test/pg/fixture.ts), dropped when the
 * test ends, the same one again for the same dir. Asking for PostgreSQL without its fixture is
 * an error, never a silent fall-back to SQLite.
 */
export async function testDatabase(t: Test, dir: string, database = TEST_DATABASE): Promise<{ postgres: string } | undefined> {
  if (database === 'sqlite') return undefined
  const known = schemas.get(dir)
  if (known !== undefined) return { postgres: known }
  const fixture = pgFixture()
  if ('unavailable' in fixture) throw new Error(`COFFER_TEST_DATABASE=postgres but the PostgreSQL fixture is unavailable: ${fixture.unavailable}`)
  const url = await freshSchema(t, fixture.url)
  schemas.set(dir, url)
  t.teardown(() => void schemas.delete(dir))
  return { postgres: url }
}

/**
 * The environment that puts a spawned `coffer` (serve, or a data-dir command) on the database of
 * data dir `dir`: nothing on SQLite (the dir's own coffer.db); on PostgreSQL COFFER_DATABASE_URL,
 * the dir's schema (testDatabase: the one an app on that dir runs on, or a fresh one), so that a
 * crash test really kills a node on PostgreSQL and its restart finds the rows again (#30).
 */
export async function testDatabaseEnv(t: Test, dir: string): Promise<Record<string, string>> {
  const database = await testDatabase(t, dir)
  return database ? { COFFER_DATABASE_URL: database.postgres } : {}
}

/** testDatabaseEnv of a dir an app already runs on (makeApp, makeS3), synchronously: for a CLI command's env or a second core. */
export function databaseEnvOf(dir: string): Record<string, string> {
  const url = schemas.get(dir)
  return url === undefined ? {} : { COFFER_DATABASE_URL: url }
}

/**
 * The metadata of data dir `dir` opened beside the process that serves it, for a test to read
 * (or damage) rows behind its back: the dir's coffer.db on SQLite (read-only unless `writable`),
 * its schema on PostgreSQL (testDatabase must have given it one). Close it when done.
 */
export function openTestDatabase(dir: string, opts: { writable?: boolean } = {}): { db: Engine; close: () => void } {
  const url = schemas.get(dir)
  if (url !== undefined) {
    const bridge = new PgBridge({ url })
    return { db: new PgEngine(bridge), close: () => bridge.close() }
  }
  const sqlite = openConnection(path.join(dir, 'coffer.db'), dir, { readonly: opts.writable !== true, fileMustExist: true })
  return { db: engineOf(sqlite), close: () => sqlite.close() }
}

/** Which blob store the API tests run on: disk unless COFFER_TEST_BLOB_STORE=s3 (the CI's second pass). */
export const TEST_BLOB_STORE: 'disk' | 's3' = process.env.COFFER_TEST_BLOB_STORE === 's3' ? 's3' : 'disk'

/**
 * The env that puts an app on the test blob store: nothing for disk; for s3 the Ceph fixture's
 * settings with a key prefix of its own, so each app sees only its own objects (listings, orphans).
 * Asking for s3 without a fixture is an error, never a silent fall-back to disk. The S3 front is
 * off (a served process would otherwise take the fixed default port); makeS3 turns it on.
 */
export function testStoreEnv(store = TEST_BLOB_STORE): Record<string, string> {
  if (store === 'disk') return {}
  const fixture = fixtureEnv()
  if ('unavailable' in fixture) throw new Error(`COFFER_TEST_BLOB_STORE=s3 but the Ceph fixture is unavailable: ${fixture.unavailable}`)
  return { ...fixture.env, COFFER_BLOB_STORE: 's3', COFFER_S3_PORT: 'off', COFFER_BLOB_S3_PREFIX: `t-${process.pid}-${randomUUID().slice(0, 8)}/` }
}

/** The hashes of every blob the app's store holds (disk or S3). */
export async function storedBlobs(core: Core): Promise<string[]> {
  const out: string[] = []
  for await (const b of core.store.list()) out.push(b.sha256)
  return out.sort()
}

/**
 * Size of every stored blob by hash, for a data dir served by another process: the disk layout,
 * or the bucket when `storeEnv` (testStoreEnv) puts it on S3.
 */
export async function storedSizes(storeEnv: Record<string, string>, dataDir: string): Promise<Map<string, number>> {
  const config = loadConfig(storeEnv, { 'data-dir': dataDir })
  if (config.blobStore === 's3') {
    const store = storeFor(storeEnv, dataDir)
    const sizes = new Map<string, number>()
    for await (const b of store.list()) sizes.set(b.sha256, b.size)
    if (store instanceof S3BlobStore) store.close()
    return sizes
  }
  // The disk store keeps small blobs inside the database (blob_inline): listed through it.
  const { db, close } = openTestDatabase(dataDir, { writable: true })
  try {
    const store = new DiskBlobStore(path.join(dataDir, 'blobs', 'sha256'), path.join(dataDir, 'tmp'), new InlineBlobsRepo(db))
    const sizes = new Map<string, number>()
    for await (const b of store.list()) sizes.set(b.sha256, b.size)
    return sizes
  } finally {
    close()
  }
}

/**
 * Deletes what a test left in the fixture's bucket under its prefix: the fixture keeps its objects
 * (in RAM, capped) from run to run, and a full OSD makes writes hang. Best effort: a test whose
 * store is down has nothing there.
 */
export async function purge(store: BlobStore): Promise<void> {
  try {
    for await (const b of store.list()) await store.remove(b.sha256)
  } catch {
    // unreachable store (the store-down tests): nothing was written
  }
}

/** purge() for a data dir served by another process (the crash test). */
export async function purgeStoredBlobs(storeEnv: Record<string, string>, dataDir: string): Promise<void> {
  const store = storeFor(storeEnv, dataDir)
  if (!(store instanceof S3BlobStore)) return
  await purge(store)
  store.close()
}

function storeFor(storeEnv: Record<string, string>, dataDir: string): BlobStore {
  const config = loadConfig(storeEnv, { 'data-dir': dataDir })
  const disk = new DiskBlobStore(path.join(dataDir, 'blobs', 'sha256'), path.join(dataDir, 'tmp'))
  const store =
    config.blobStore === 's3'
      ? new S3BlobStore({
          endpoint: config.blobS3Endpoint!,
          bucket: config.blobS3Bucket!,
          region: config.blobS3Region,
          credentials: { accessKeyId: config.blobS3AccessKeyId!, secretAccessKey: config.blobS3SecretAccessKey! },
          prefix: config.blobS3Prefix ?? '',
          forcePathStyle: true,
          timeoutMs: 15_000,
          staging: disk,
        })
      : disk
  return store
}

/**
 * Why a test about SQLite itself (its query plans, its file) does not run when the run's database
 * is PostgreSQL (a visible skip, COFFER_TEST_DATABASE=postgres), or false.
 */
export const sqliteOnly = (why: string): string | false => (TEST_DATABASE === 'postgres' ? `SQLite only: ${why}` : false)

/** Why a disk-only test does not run on the S3 store (a visible skip), or false. */
export const diskOnly = (why: string): string | false => (TEST_BLOB_STORE === 's3' ? `disk store only: ${why}` : false)

export const admin = { authorization: `Bearer ${ADMIN_KEY}` }
export const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

/** Creates a tenant through the admin API and returns its id, key and webhook secret. */
export async function createTenant(
  app: App,
  body: { name?: string; quotaBytes?: number; allowedFileTypes?: string[] } = {},
): Promise<{ id: string; apiKey: string; webhookSecret: string; headers: { authorization: string } }> {
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/admin/tenants',
    headers: admin,
    payload: { name: body.name ?? `tenant-${Math.random().toString(36).slice(2)}`, ...body },
  })
  if (res.statusCode !== 201) throw new Error(`tenant creation failed: ${res.statusCode} ${res.body}`)
  const json = res.json() as { id: string; apiKey: string; webhookSecret: string }
  return { ...json, headers: bearer(json.apiKey) }
}

const SIGNATURES: Record<string, Buffer> = {
  'image/png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  'image/jpeg': Buffer.from([0xff, 0xd8, 0xff, 0xe0]),
  'image/gif': Buffer.from('GIF89a', 'latin1'),
  'image/webp': Buffer.concat([Buffer.from('RIFF'), Buffer.from([0x10, 0, 0, 0]), Buffer.from('WEBPVP8 ')]),
  'image/avif': Buffer.concat([Buffer.from([0, 0, 0, 0x1c]), Buffer.from('ftypavif'), Buffer.from([0, 0, 0, 0]), Buffer.from('avifmif1miaf')]),
  'application/pdf': Buffer.from('%PDF-1.7\n', 'latin1'),
}

/** `size` bytes that start with the signature of `type` and continue with a deterministic pattern. */
export function fileBytes(type: string, size: number, seed = 1): Buffer {
  const sig = SIGNATURES[type]!
  const out = Buffer.alloc(size)
  let x = seed * 2654435761
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out[i] = x >>> 24
  }
  sig.copy(out, 0, 0, Math.min(sig.length, size))
  return out
}

export interface Handshake {
  fileId: string
  presignedUrl: string
  expiresAt: string
  uploadMetadata: { maxSizeBytes: number; allowedTypes: string[] }
}

export async function handshake(app: App, headers: Record<string, string>, body: Record<string, unknown>) {
  return app.inject({ method: 'POST', url: '/api/v1/upload/request', headers, payload: body })
}

/** Handshake + PUT; returns both responses. */
export async function upload(
  app: App,
  headers: Record<string, string>,
  opts: { type?: string; name?: string; bytes?: Buffer; declare?: boolean; extra?: Record<string, unknown> } = {},
) {
  const type = opts.type ?? 'image/png'
  const bytes = opts.bytes ?? fileBytes(type, 1024)
  const hs = await handshake(app, headers, {
    fileType: type,
    fileName: opts.name ?? 'photo.png',
    ...(opts.declare === false ? {} : { fileSizeBytes: bytes.length }),
    ...opts.extra,
  })
  if (hs.statusCode !== 200) throw new Error(`handshake failed: ${hs.statusCode} ${hs.body}`)
  const h = hs.json() as Handshake
  const put = await putContent(app, h, bytes, type)
  return { handshake: h, put, fileId: h.fileId }
}

/** The PUT of an upload's content to the presigned path of a handshake (its body, or its response). */
export async function putContent(app: App, h: Handshake | { json(): unknown }, payload: Buffer | string, contentType = 'image/png') {
  const url = 'presignedUrl' in h ? h.presignedUrl : (h.json() as Handshake).presignedUrl
  return app.inject({ method: 'PUT', url, headers: { 'content-type': contentType }, payload })
}

/** Waits until uploads streaming into `tmpDir` (a data dir's tmp/) have written `bytes` in all:
 * the server has claimed the upload and is receiving its body. */
export async function receivedAtLeast(tmpDir: string, bytes: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const written = fs.readdirSync(tmpDir).reduce((n, f) => n + fs.statSync(path.join(tmpDir, f)).size, 0)
    if (written >= bytes) return
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error(`the server never received ${bytes} bytes`)
}

/** Where the disk store keeps a blob of this core's data dir: tests damage or inspect content there. */
export function blobFile(core: Core, sha256: string): string {
  return blobPath(core.dataDir.blobs, sha256)
}

/** Wraps a store to record the most bytes staged at once, counting a chunk once the guards accepted it. */
export function measuringStore() {
  const seen = { now: 0, max: 0 }
  const wrap = (disk: BlobStore): BlobStore =>
    Object.assign(Object.create(disk) as BlobStore, {
      stage: async (source: Parameters<BlobStore['stage']>[0], guard: Parameters<BlobStore['stage']>[1]) => {
        let mine = 0
        try {
          return await disk.stage(source, {
            ...guard,
            onChunk: (bytes: number) => {
              guard.onChunk?.(bytes)
              mine += bytes
              seen.now += bytes
              seen.max = Math.max(seen.max, seen.now)
            },
          })
        } finally {
          seen.now -= mine
        }
      },
    })
  return { seen, wrap }
}

/** Every file below `dir` (none when it does not exist). */
export function filesBelow(dir: string): string[] {
  return fs.existsSync(dir)
    ? fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesBelow(path.join(dir, e.name)) : [path.join(dir, e.name)]))
    : []
}

/** Inverts bit 5 of the byte at `offset` of `file`, in place: damage that a checksum or an AEAD tag must catch. */
export function flipByte(file: string, offset: number): void {
  const fd = fs.openSync(file, 'r+')
  try {
    const one = Buffer.alloc(1)
    fs.readSync(fd, one, 0, 1, offset)
    one[0]! ^= 0x20
    fs.writeSync(fd, one, 0, 1, offset)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * The real S3 clients (AWS CLI, rclone, restic, s3cmd, botocore), installed by scripts/s3-clients.sh
 * when missing: undefined when they are there. A machine that cannot install them (not root, no
 * apt) gets the reason, said loudly for `what` so that its tests skip visibly; in CI it throws.
 */
export function s3ClientsMissing(what: string): string | undefined {
  const r = spawnSync('bash', [path.join(__dirname, '..', 'scripts', 's3-clients.sh')], { encoding: 'utf8', timeout: 20 * 60_000 })
  if (r.status === 0) return undefined
  const why = `scripts/s3-clients.sh exited ${r.status}: ${(r.stderr ?? '').trim().split('\n').slice(-3).join(' | ')}`
  if (process.env.CI === 'true') throw new Error(`S3 clients unavailable in CI: ${why}`)
  console.error(`\n*** SKIPPING ${what}: ${why} ***\n`)
  return why
}
