import t, { type Test } from 'tap'
import assert from 'node:assert/strict'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { openDatabase } from '../src/db/database'
import { engineOf, type Engine } from '../src/db/engine'
import { PgBridge } from '../src/db/pg/bridge'
import { PgEngine } from '../src/db/pg/engine'
import { migratePg } from '../src/db/pg/migrate'
import { TenantsRepo } from '../src/db/repos/tenants'
import { WorkspacesRepo } from '../src/db/repos/workspaces'
import { freshSchema, withPg } from './pg/fixture'
import type { NodeDatabase, NodeTask, Reserved } from './pg/node-worker'
import { tempDir } from './helper'

// Correct with N nodes on one database (#30): each "node" is a worker thread with a connection of
// its own (test/pg/node-worker.ts), all of them on one SQLite file or one PostgreSQL schema, and
// the same scenario runs on both databases. Starting a node loads the sources in a thread of its
// own (seconds on a loaded machine): each test starts its nodes once.
t.setTimeout(600_000)

const WORKER = path.join(__dirname, 'pg', 'node-worker.ts')
const T1 = '00000000-0000-4000-8000-000000000001'
const T2 = '00000000-0000-4000-8000-000000000002'
const W2 = '00000000-0000-4000-8000-0000000000b2'

/** The database the nodes share, as the test reads it, and how a node reaches it. */
interface Shared {
  engine: Engine
  database: NodeDatabase
}

async function sqliteShared(t: Test): Promise<Shared> {
  const dir = tempDir(t)
  const file = path.join(dir, 'coffer.db')
  const db = openDatabase(file, dir)
  t.teardown(() => db.close())
  return { engine: engineOf(db), database: { sqlite: file } }
}

async function pgShared(t: Test, url: string): Promise<Shared> {
  const schemaUrl = await freshSchema(t, url)
  const bridge = new PgBridge({ url: schemaUrl })
  t.teardown(() => bridge.close())
  migratePg(bridge)
  return { engine: new PgEngine(bridge), database: { postgres: schemaUrl } }
}

/** Runs `body` on a fresh SQLite database, then on a fresh PostgreSQL schema (skipped visibly without the fixture). */
function onBoth(title: string, body: (t: Test, shared: Shared) => Promise<void>): void {
  t.test(title, async (t) => {
    await t.test('SQLite', async (t) => body(t, await sqliteShared(t)))
    withPg(t, 'PostgreSQL', (url) => {
      void t.test('PostgreSQL', async (t) => body(t, await pgShared(t, url)))
    })
  })
}

/** A node (test/pg/node-worker.ts) and its answers, in order. */
interface TestNode {
  worker: Worker
  send(task: NodeTask): void
  /** Its next message; rejects if it died. */
  next(): Promise<unknown>
}

/** `n` nodes on the shared database, ready; terminated at the end of the test. */
async function startNodes(t: Test, database: NodeDatabase, n: number): Promise<TestNode[]> {
  const nodes = Array.from({ length: n }, (): TestNode => {
    const worker = new Worker(WORKER, { workerData: database })
    const inbox: unknown[] = []
    const waiting: { resolve: (m: unknown) => void; reject: (e: Error) => void }[] = []
    let died: Error | undefined
    worker.on('message', (m) => {
      const w = waiting.shift()
      if (w) w.resolve(m)
      else inbox.push(m)
    })
    const die = (err: Error) => {
      died ??= err
      for (const w of waiting.splice(0)) w.reject(died)
    }
    worker.on('error', die)
    worker.on('exit', (code) => die(new Error(`the node exited (${code})`)))
    return {
      worker,
      send: (task) => worker.postMessage(task),
      next: () => {
        if (inbox.length > 0) return Promise.resolve(inbox.shift())
        if (died) return Promise.reject(died)
        return new Promise((resolve, reject) => waiting.push({ resolve, reject }))
      },
    }
  })
  t.teardown(() => Promise.all(nodes.map((x) => x.worker.terminate())))
  t.same(await Promise.all(nodes.map((x) => x.next())), Array(n).fill('ready'), `${n} nodes connected`)
  return nodes
}

function tenantWithQuota(engine: Engine, id: string, quotaBytes: number, n: number): void {
  new TenantsRepo(engine).insert({
    id,
    name: `tenant ${n}`,
    keyHash: Buffer.alloc(32, n),
    keyKind: 'live',
    webhookSecret: 'whsec_dGVzdA==',
    quotaBytes,
    allowedFileTypes: [],
    createdAt: 1,
  })
}

/** Every node reserving `each` uploads of `size` bytes, all of them released at once; every outcome. */
async function reserveTogether(nodes: TestNode[], tenantId: string, workspaceId: string | null, each: number, size: number): Promise<Reserved[]> {
  const gate = new SharedArrayBuffer(4)
  for (const n of nodes) n.send({ kind: 'reserve', tenantId, workspaceId, count: each, size, gate })
  await Promise.all(nodes.map(async (n) => assert.equal(await n.next(), 'waiting')))
  Atomics.store(new Int32Array(gate), 0, 1)
  Atomics.notify(new Int32Array(gate), 0)
  return ((await Promise.all(nodes.map((n) => n.next()))) as Reserved[][]).flat()
}

onBoth('uploads reserved by several nodes at once never pass a quota: exactly as many as fit succeed', async (t, { engine, database }) => {
  const size = 100
  const fit = 25
  // The tenant's quota has room for `fit`; the other tenant's is large, its workspace's has room for `fit`.
  tenantWithQuota(engine, T1, fit * size, 1)
  tenantWithQuota(engine, T2, 1_000_000_000, 2)
  new WorkspacesRepo(engine).insert({ id: W2, tenantId: T2, name: 'w', slug: 'w', quotaBytes: fit * size, metadata: null, webhookUrl: null, now: 1 })
  const used = (sql: string) => engine.prepare<[string], { used_bytes: number; quota_bytes: number | null }>(sql)
  const pending = engine.pluck<[string], number>("SELECT count(*) FROM files WHERE tenant_id = ? AND status = 'pending'")

  const nodes = await startNodes(t, database, 3)
  for (const [scope, tenantId, workspaceId, table, id] of [
    ['tenant', T1, null, 'tenants', T1],
    ['workspace', T2, W2, 'workspaces', W2],
  ] as const) {
    const outcomes = await reserveTogether(nodes, tenantId, workspaceId, 20, size)
    const ok = outcomes.filter((o) => 'ok' in o)
    t.equal(outcomes.length, 60, `${scope}: every reservation answered`)
    t.equal(ok.length, fit, `${scope}: exactly ${fit} of 60 concurrent reservations fit`)
    t.same(
      new Set(outcomes.filter((o) => 'refused' in o).map((o) => (o as { refused: string }).refused)),
      new Set(['QUOTA_EXCEEDED']),
      `${scope}: the others are refused for the quota`,
    )
    const row = used(`SELECT used_bytes, quota_bytes FROM ${table} WHERE id = ?`).get(id)!
    t.equal(row.used_bytes, fit * size, `${scope}: usage is exactly the reservations that succeeded`)
    t.ok(row.used_bytes <= row.quota_bytes!, `${scope}: within its quota`)
    t.equal(Number(pending.get(tenantId)), fit, `${scope}: one pending row per success`)
  }
})
