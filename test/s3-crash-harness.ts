// What the S3 crash tests share: a real server on a data dir of the test's own, a tenant with S3
// credentials made over HTTP, SDK clients that never retry (an answer lost with the process must not
// be re-sent to the next one), restarts on the same data dir, and the loop that kills the server
// while work is in flight. On the run's blob store: COFFER_TEST_BLOB_STORE=s3 puts the content on
// the Ceph gateway, one key prefix per data dir, purged when the test ends. COFFER_TEST_DATABASE=
// postgres puts the server on a schema of the PostgreSQL fixture (COFFER_DATABASE_URL), the same
// one at each restart, so that the kills are of a node on PostgreSQL (#30).
import path from 'node:path'
import type { Test } from 'tap'
import { S3Client } from '@aws-sdk/client-s3'
import { createTenantOverHttp, startCoffer, type Running } from './process-helper'
import { openTestDatabase, purgeStoredBlobs, storedSizes, tempDir, testDatabaseEnv, testStoreEnv } from './helper'
import type { Engine } from '../src/db/engine'

export const storeEnv = testStoreEnv()
export const rand = (n: number) => Math.floor(Math.random() * n)
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export interface CrashServer {
  /** The running server; replaced by start(). */
  server: Running
  cwd: string
  dataDir: string
  /** The admin API of the first server (where the tenant was made). */
  api: string
  tenantId: string
  /** The S3 endpoint of the running server. */
  s3: string
  /** A new client of the running server, destroyed when the test ends. */
  client(): S3Client
  /** Starts the server again on the same data dir (after it died). */
  start(): Promise<void>
  /** SIGKILLs the running server and waits for it to be gone. */
  kill(): Promise<void>
  /** The database settings of every start (COFFER_DATABASE_URL on PostgreSQL): for a command run on the data dir. */
  dbEnv: Record<string, string>
  /** Opens the data dir's database (read-only on SQLite) for the length of `fn`. */
  inspect<T>(fn: (db: Engine) => T): T
}

/** A server on a new data dir (with `env` on every start, `firstEnv` on the first only) and a tenant `name` on it. */
export async function crashServer(
  t: Test,
  name: string,
  o: { env?: Record<string, string>; firstEnv?: Record<string, string>; quotaBytes?: number } = {},
): Promise<CrashServer> {
  const admin = `${name}-admin-key-0123456789`
  const cwd = tempDir(t, `coffer-${name}-`)
  const dataDir = path.join(cwd, 'data')
  t.teardown(() => purgeStoredBlobs(storeEnv, dataDir))
  const dbEnv = await testDatabaseEnv(t, dataDir)
  const launch = async (env: Record<string, string>) =>
    // --s3-port overrides the COFFER_S3_PORT=off of the store env (flags win over the environment).
    startCoffer(['serve', '--port', '0', '--s3-port', '0', '--data-dir', 'data'], {
      cwd,
      env: { ...storeEnv, ...dbEnv, COFFER_ADMIN_API_KEY: admin, COFFER_LOG_LEVEL: 'info', ...o.env, ...env },
      ready: /coffer S3 listening on (http:\/\/[^\s"]+)/,
    })
  const first = await launch(o.firstEnv ?? {})
  const api = /coffer listening on (http:\/\/[^\s"]+)/.exec(first.lines.join('\n'))![1]!
  const tenant = await createTenantOverHttp(api, admin, { name, quotaBytes: o.quotaBytes ?? 1024 ** 3 })
  const credRes = await fetch(`${api}/api/v1/admin/tenants/${tenant.id}/s3-credentials`, { method: 'POST', headers: { authorization: `Bearer ${admin}` } })
  const credentials = (await credRes.json()) as { accessKeyId: string; secretAccessKey: string }
  const crash: CrashServer = {
    server: first,
    cwd,
    dataDir,
    dbEnv,
    api,
    tenantId: tenant.id,
    s3: first.url,
    client() {
      const c = new S3Client({ endpoint: crash.s3, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 })
      t.teardown(() => c.destroy())
      return c
    },
    async start() {
      crash.server = await launch({})
      crash.s3 = crash.server.url
    },
    async kill() {
      crash.server.child.kill('SIGKILL')
      await crash.server.exited
    },
    inspect(fn) {
      const { db, close } = openTestDatabase(dataDir)
      try {
        return fn(db)
      } finally {
        close()
      }
    },
  }
  // Added after the schema's: teardowns run last added first, so the server is gone before its schema.
  t.teardown(() => void crash.server.child.kill('SIGKILL'))
  return crash
}

/**
 * `kills` rounds of: three copies of `work` against the running server, a SIGKILL after 0.4–2 s,
 * the work stopped, a restart on the same data dir, then `check` with a client of the new server.
 */
export async function killLoop(
  crash: CrashServer,
  kills: number,
  work: (c: S3Client, stop: { now: boolean }) => Promise<void>,
  check: (kill: number, c: S3Client) => Promise<void>,
  /** Before each kill, also wait (at most 60 s) until this says the round did enough work: a time
   * alone gives a busy machine's few requests, and a test that counts them would fail by load. */
  ready: () => boolean = () => true,
): Promise<void> {
  let c = crash.client()
  for (let kill = 1; kill <= kills; kill++) {
    const stop = { now: false }
    const workers = [work(c, stop), work(c, stop), work(c, stop)]
    await sleep(400 + rand(1600))
    for (const until = Date.now() + 60_000; !ready() && Date.now() < until;) await sleep(20)
    await crash.kill()
    stop.now = true
    await Promise.all(workers)
    c.destroy()
    await crash.start()
    c = crash.client()
    await check(kill, c)
  }
}

/** Referenced blobs (by a file or a part) that the store does not hold at their recorded size. */
export async function missingBlobs(crash: CrashServer): Promise<{ sha256: string; size: number }[]> {
  const referenced = crash.inspect(
    (db) =>
      db
        .prepare(
          `SELECT b.sha256, b.size_bytes AS size FROM blobs b
           WHERE EXISTS (SELECT 1 FROM files f WHERE f.sha256 = b.sha256) OR EXISTS (SELECT 1 FROM s3_parts p WHERE p.sha256 = b.sha256)`,
        )
        .all() as { sha256: string; size: number }[],
  )
  const sizes = await storedSizes(storeEnv, crash.dataDir)
  return referenced.filter((b) => sizes.get(b.sha256) !== b.size)
}
