// @suites: pg s3
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { buildBundle, createTenantOverHttp, runCoffer, startCoffer, type Running } from './process-helper'
import { fileBytes, openTestDatabase, purgeStoredBlobs, storedSizes, tempDir, testDatabaseEnv, testStoreEnv, TEST_BLOB_STORE, TEST_DATABASE } from './helper'
import { startReceiver } from './webhook-receiver'
import { CLAIM_MS } from '../src/webhooks/scheduler'

// Concurrent uploads, deletes and workspace operations while the server is killed with SIGKILL at
// random moments, restarting on the same data dir each time; after every restart the invariants
// below are checked. COFFER_CRASH_KILLS raises the count for a longer soak. COFFER_TEST_DATABASE=
// postgres runs the server on a schema of the PostgreSQL fixture (COFFER_DATABASE_URL, #30).
buildBundle()

// On the S3 store each upload makes gateway round trips, so rounds last longer and there are fewer;
// on PostgreSQL each statement is a round trip, and a round took 11 s at load 14 (#30): fewer again.
const ON_S3 = TEST_BLOB_STORE === 's3'
const ON_PG = TEST_DATABASE === 'postgres'
/** The lease of a node on PostgreSQL here: its temp files are removed at a restart once it lapsed. */
const PG_LEASE_SECONDS = 2
const KILLS = Number(process.env.COFFER_CRASH_KILLS ?? (ON_S3 ? 12 : ON_PG ? 8 : 22))
const ADMIN = 'crash-admin-key-0123456789'
const CLIENTS = 6
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex')
const rand = (n: number) => Math.floor(Math.random() * n)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Tenant {
  id: string
  auth: { authorization: string }
  workspaces: string[]
}
interface Acked {
  tenant: Tenant
  sha256: string
  size: number
  workspaceId: string | null
}

// --workers 2 (#29): each round SIGKILLs one worker, then (a moment later, while the primary may be
// starting its replacement) the rest of the tree, primary last; fewer rounds, each start is longer.
const CLUSTER_KILLS = Number(process.env.COFFER_CRASH_KILLS ?? (ON_S3 ? 6 : ON_PG ? 4 : 10))
const CLUSTER_READY = /coffer ready: \d+ workers listening on (http:\/\/[^\s",]+)/
t.setTimeout(300_000)

const kill = (pid: number) => {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // already gone
  }
}

/** The processes of a server: with --workers, the primary's children (its workers). */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number)
  } catch {
    return []
  }
}

for (const workers of [1, 2]) crashLoop(workers)

function crashLoop(workers: number): void {
  const KILLS_HERE = workers === 1 ? KILLS : CLUSTER_KILLS
  t.test(`SIGKILL at random moments (${KILLS_HERE} kills, --workers ${workers}): nothing acknowledged is lost`, async (t) => {
    const cwd = tempDir(t)
    const dataDir = path.join(cwd, 'data')
    const receiver = await startReceiver(t, [200])
    // COFFER_TEST_BLOB_STORE=s3 runs the same crashes on the S3 store (one key prefix for the whole test).
    const storeEnv = testStoreEnv()
    t.teardown(() => purgeStoredBlobs(storeEnv, dataDir))
    // The server's kill, a teardown added below, runs before this schema's drop: teardowns run last added first.
    const dbEnv = await testDatabaseEnv(t, dataDir)
    // On PostgreSQL a starting node removes only the temp files of nodes whose lease lapsed (other
    // nodes may be uploading into a shared data dir: services/node-tmp.ts), so the killed node's
    // lease is short and the restart waits it out.
    const leaseEnv: Record<string, string> = ON_PG ? { COFFER_LEASE_SECONDS: String(PG_LEASE_SECONDS) } : {}
    const env = { ...storeEnv, ...dbEnv, ...leaseEnv, COFFER_ADMIN_API_KEY: ADMIN, COFFER_WEBHOOK_ALLOW_PRIVATE: 'true', COFFER_LOG_LEVEL: 'info' }
    const serve = () =>
      startCoffer(['serve', '--port', '0', '--data-dir', 'data', '--workers', String(workers)], {
        cwd,
        env,
        ...(workers > 1 ? { ready: CLUSTER_READY, timeoutMs: 30_000 } : {}),
      })
    /** SIGKILL: one worker first, then the rest, the primary last (with one process: that process). */
    const killAll = async (s: Running) => {
      const children = childrenOf(s.child.pid!)
      if (children.length > 0) {
        const first = children[rand(children.length)]!
        kill(first)
        await sleep(rand(100))
        for (const pid of childrenOf(s.child.pid!)) kill(pid)
      }
      s.child.kill('SIGKILL')
    }
    let server: Running = await serve()
    t.teardown(() => killAll(server))

    const tenants: Tenant[] = []
    for (const name of ['crash-a', 'crash-b']) {
      const created = await createTenantOverHttp(server.url, ADMIN, { name, quotaBytes: 64 * 1024 * 1024 })
      tenants.push({ id: created.id, auth: created.auth, workspaces: [] })
    }

    const acked = new Map<string, Acked>() // 2xx PUT seen
    const deleteAcked = new Set<string>() // 2xx DELETE seen (file, or its workspace)
    const deleteTried = new Set<string>() // a DELETE was sent; its outcome may be lost with the process
    const wsDeleteTried = new Set<string>()
    const wsDeleteAcked = new Set<string>()
    let slug = 0
    const stats = { uploads: 0, deletes: 0, workspaceOps: 0, refused: 0 }

    async function work(url: string, stop: { now: boolean }): Promise<void> {
      while (!stop.now) {
        const tenant = tenants[rand(tenants.length)]!
        const roll = Math.random()
        try {
          if (roll < 0.62) {
            const big = Math.random() < 0.08
            const size = big ? 1_000_000 + rand(3_000_000) : 1 + rand(150_000)
            const bytes = fileBytes('application/pdf', size, rand(1e9))
            const workspaceId = tenant.workspaces.length > 0 && Math.random() < 0.5 ? tenant.workspaces[rand(tenant.workspaces.length)]! : null
            const declare = Math.random() < 0.5
            const hs = await fetch(`${url}/api/v1/upload/request`, {
              method: 'POST',
              headers: { ...tenant.auth, 'content-type': 'application/json', ...(workspaceId ? { 'x-workspace-id': workspaceId } : {}) },
              body: JSON.stringify({
                fileType: 'application/pdf',
                fileName: `f-${size}.pdf`,
                webhookUrl: receiver.url,
                ...(declare ? { fileSizeBytes: size } : {}),
              }),
            })
            if (hs.status !== 200) {
              stats.refused++
              continue
            }
            const h = (await hs.json()) as { fileId: string; presignedUrl: string }
            const put = await fetch(`${url}${h.presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'application/pdf' }, body: new Uint8Array(bytes) })
            if (put.status === 200) {
              acked.set(h.fileId, { tenant, sha256: sha256(bytes), size, workspaceId })
              stats.uploads++
            } else {
              await put.arrayBuffer()
              stats.refused++
            }
          } else if (roll < 0.82) {
            const mine = [...acked].filter(([id, a]) => a.tenant === tenant && !deleteTried.has(id))
            if (mine.length === 0) continue
            const [id] = mine[rand(mine.length)]!
            deleteTried.add(id)
            const res = await fetch(`${url}/api/v1/files/${id}`, { method: 'DELETE', headers: tenant.auth })
            if (res.status === 200) deleteAcked.add(id)
            await res.arrayBuffer()
            stats.deletes++
          } else if (roll < 0.92) {
            const res = await fetch(`${url}/api/v1/workspaces`, {
              method: 'POST',
              headers: { ...tenant.auth, 'content-type': 'application/json' },
              body: JSON.stringify({ name: 'w', slug: `w-${++slug}`, quotaBytes: 8 * 1024 * 1024 }),
            })
            if (res.status === 201) tenant.workspaces.push(((await res.json()) as { id: string }).id)
            stats.workspaceOps++
          } else if (roll < 0.96 && tenant.workspaces.length > 2) {
            const id = tenant.workspaces.splice(rand(tenant.workspaces.length), 1)[0]!
            wsDeleteTried.add(id)
            const res = await fetch(`${url}/api/v1/workspaces/${id}`, { method: 'DELETE', headers: tenant.auth })
            if (res.status === 200) wsDeleteAcked.add(id)
            await res.arrayBuffer()
            stats.workspaceOps++
          } else {
            await (await fetch(`${url}/api/v1/files?limit=50`, { headers: tenant.auth })).arrayBuffer()
          }
        } catch {
          return // the server is gone
        }
      }
    }

    /** The invariants checked after every restart, straight from the data dir. */
    const checks = { restarts: 0, usage: 0, counts: 0, blobs: 0, downloads: 0, tmp: 0 }
    async function checkInvariants(url: string, verifyAll: boolean): Promise<void> {
      checks.restarts++
      t.same(fs.readdirSync(path.join(dataDir, 'tmp')), [], 'no temp files left after start')
      checks.tmp++
      const { db, close } = openTestDatabase(dataDir)
      try {
        // Each total beside its recount in a subquery: PostgreSQL's WHERE sees no column alias of its SELECT.
        const live = "deleted_at IS NULL AND status != 'failed'"
        const badTenants = db
          .prepare(
            `SELECT * FROM (SELECT t.id, t.used_bytes, (SELECT coalesce(sum(size_bytes), 0) FROM files f WHERE f.tenant_id = t.id AND ${live}) AS actual FROM tenants t) x WHERE used_bytes != actual`,
          )
          .all()
        const badWs = db
          .prepare(
            `SELECT * FROM (SELECT w.id, w.used_bytes, (SELECT coalesce(sum(size_bytes), 0) FROM files f WHERE f.workspace_id = w.id AND ${live}) AS actual FROM workspaces w) x WHERE used_bytes != actual`,
          )
          .all()
        t.same([...badTenants, ...badWs], [], "every tenant's and workspace's usedBytes equals its live files plus open reservations")
        checks.usage++
        const badCounts = db
          .prepare(
            `SELECT * FROM (SELECT c.*, (SELECT count(*) FROM files f WHERE f.tenant_id = c.tenant_id AND coalesce(f.workspace_id, '') = c.workspace_id
             AND f.file_type = c.file_type AND f.context = c.context AND f.deleted_at IS NULL) AS actual FROM file_counts c) x WHERE n != actual`,
          )
          .all()
        t.same(badCounts, [], 'listing totals match the live files')
        // As numbers: PostgreSQL's sum of bigints is a numeric, which comes as a string.
        const numbers = (r: unknown) => Object.values(r as Record<string, unknown>).map(Number)
        const totals = numbers(db.prepare('SELECT count, bytes FROM blob_totals').get())
        const actual = numbers(db.prepare('SELECT count(*) AS count, coalesce(sum(size_bytes), 0) AS bytes FROM blobs').get())
        t.same(totals, actual, 'blob totals match the blobs')
        checks.counts++
        const referenced = db.prepare(`SELECT DISTINCT f.sha256, b.size_bytes FROM files f JOIN blobs b ON b.sha256 = f.sha256`).all() as {
          sha256: string
          size_bytes: number
        }[]
        const sizes = await storedSizes(storeEnv, dataDir)
        const missing = referenced.filter((b) => sizes.get(b.sha256) !== b.size_bytes)
        t.same(missing, [], 'no referenced blob is missing or short')
        checks.blobs++
        const unknownBlob = db.pluck(`SELECT count(*) FROM files WHERE status = 'completed' AND sha256 NOT IN (SELECT sha256 FROM blobs)`).get()
        t.equal(unknownBlob, 0)
      } finally {
        close()
      }
      // Every acknowledged upload not (possibly) deleted since downloads with the same SHA-256.
      const toVerify = [...acked].filter(([id, a]) => !deleteTried.has(id) && !(a.workspaceId && wsDeleteTried.has(a.workspaceId)))
      const sample = verifyAll ? toVerify : toVerify.slice(-40)
      for (const [id, a] of sample) {
        const res = await fetch(`${url}/api/v1/files/${id}/download`, { headers: a.tenant.auth })
        const body = Buffer.from(await res.arrayBuffer())
        if (res.status !== 200 || sha256(body) !== a.sha256) t.fail(`acknowledged upload ${id} answered ${res.status} with ${body.length} bytes`)
        checks.downloads++
      }
      for (const id of deleteAcked) {
        const a = acked.get(id)!
        const res = await fetch(`${url}/api/v1/files/${id}`, { headers: a.tenant.auth })
        await res.arrayBuffer()
        if (res.status !== 404) t.fail(`acknowledged delete of ${id} undone: ${res.status}`)
      }
      for (const [id, a] of acked) {
        if (!a.workspaceId || !wsDeleteAcked.has(a.workspaceId)) continue
        const res = await fetch(`${url}/api/v1/files/${id}`, { headers: a.tenant.auth })
        await res.arrayBuffer()
        if (res.status !== 404) t.fail(`file ${id} of an acknowledged workspace delete is back: ${res.status}`)
      }
    }

    let kills = 0
    for (let round = 0; round < KILLS_HERE; round++) {
      const stop = { now: false }
      const clients = Array.from({ length: CLIENTS }, () => work(server.url, stop))
      await sleep(ON_S3 || workers > 1 ? 600 + rand(1400) : 150 + rand(600))
      await killAll(server)
      t.equal(await server.exited, 'SIGKILL')
      kills++
      stop.now = true
      await Promise.all(clients)
      // A worker outlives its primary for no longer than it takes to see the IPC channel close.
      for (let i = 0; i < 100 && childrenOf(server.child.pid!).length > 0; i++) await sleep(20)
      if (ON_PG) await sleep(PG_LEASE_SECONDS * 1000 + 500)
      server = await serve()
      await checkInvariants(server.url, round === KILLS_HERE - 1)
    }

    // Webhooks: every completed upload's file.uploaded event is delivered at least once.
    const { db, close } = openTestDatabase(dataDir)
    // On PostgreSQL a restart does not take back a dead node's claims (other nodes may be
    // sending them): the events the last kill cut off go out once their claim lapses (CLAIM_MS).
    const waitPending = async () => {
      for (let i = 0; i < (ON_PG ? (CLAIM_MS + 15_000) / 100 : 150); i++) {
        if ((db.pluck("SELECT count(*) FROM outbox WHERE status = 'pending'").get() as number) === 0) return
        await sleep(100)
      }
    }
    await waitPending()
    const completed = db.pluck("SELECT id FROM files WHERE status = 'completed'").all() as string[]
    const dead = db.pluck("SELECT count(*) FROM outbox WHERE status = 'dead'").get()
    close()
    const delivered = new Set(
      receiver.received
        .map((r) => JSON.parse(r.body) as { event: string; fileId: string })
        .filter((e) => e.event === 'file.uploaded')
        .map((e) => e.fileId),
    )
    const undelivered = completed.filter((id) => !delivered.has(id))
    t.same(undelivered, [], `every completed upload's webhook was delivered at least once (${completed.length} uploads)`)
    t.equal(dead, 0, 'no event dead-lettered')
    const verify = runCoffer(['verify', '--json', '--read-data', '--data-dir', 'data'], { cwd, env: { ...storeEnv, ...dbEnv } })
    t.equal(verify.status, 0, 'coffer verify: every blob re-hashes to its name')
    const report = JSON.parse(verify.stdout) as { checked: number; missing: string[]; corrupt: string[] }
    const duplicates = receiver.received.length - new Set(receiver.received.map((r) => r.headers['webhook-id'])).size

    t.comment(
      `crash test: ${kills} SIGKILLs; ${stats.uploads} uploads and ${stats.deletes} deletes acknowledged or attempted, ${stats.workspaceOps} workspace operations, ${stats.refused} refused (quota)`,
    )
    t.comment(
      `crash test: invariants after each of ${checks.restarts} restarts: empty tmp ${checks.tmp}x, usage = live files + reservations ${checks.usage}x, listing totals ${checks.counts}x, referenced blobs present ${checks.blobs}x, ${checks.downloads} downloads SHA-256-verified`,
    )
    t.comment(
      `crash test: ${completed.length} completed uploads, all webhooks delivered (${duplicates} redelivered duplicates, deduplicated by webhook-id); coffer verify re-hashed ${report.checked} blobs: ${report.missing.length} missing, ${report.corrupt.length} corrupt`,
    )
    server.child.kill('SIGTERM')
    t.equal(await server.exited, 0)
  })
}
