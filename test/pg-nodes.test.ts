// @suites: sqlite
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
import { OutboxRepo } from '../src/db/repos/outbox'
import { ManualClock } from '../src/lib/clock'
import { deliver, type DeliveryResult } from '../src/webhooks/deliver'
import { systemResolver } from '../src/webhooks/ssrf'
import { RETRY_DELAYS_MS, WebhookScheduler } from '../src/webhooks/scheduler'
import { postgres, sqlite, type Databases } from './pg/repos'
import { startReceiver } from './webhook-receiver'
import Fastify from 'fastify'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { ErrorResponse } from '../src/contract/common'
import { registerErrorHandling } from '../src/http/error-handler'
import { healthRoutes } from '../src/http/routes/health'
import type { App } from '../src/http/types'
import { captureLogs, makeApp } from './helper'
import { loadConfig } from '../src/config'
import { createLogger } from '../src/lib/logger'
import { startServer } from '../src/server'
import { freshSchema, withPg } from './pg/fixture'
import type { NodeDatabase, NodeTask, Reserved } from './pg/node-worker'
import { tempDir } from './helper'
import { SELF_SERVICE_LIMIT } from '../src/services/s3-credentials'

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

function tenant(engine: Engine, id: string, quotaBytes: number, n: number): void {
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
  tenant(engine, T1, fit * size, 1)
  tenant(engine, T2, 1_000_000_000, 2)
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

onBoth('a tenant creating its own S3 credentials on several nodes at once gets exactly the limit of 20 pairs', async (t, { engine, database }) => {
  tenant(engine, T1, 1_000_000, 1)
  const nodes = await startNodes(t, database, 3)
  const gate = new SharedArrayBuffer(4)
  for (const n of nodes) n.send({ kind: 'credentials', tenantId: T1, count: 10, gate })
  await Promise.all(nodes.map(async (n) => assert.equal(await n.next(), 'waiting')))
  Atomics.store(new Int32Array(gate), 0, 1)
  Atomics.notify(new Int32Array(gate), 0)
  const outcomes = ((await Promise.all(nodes.map((n) => n.next()))) as Reserved[][]).flat()
  t.equal(outcomes.length, 30, 'every request answered')
  t.equal(outcomes.filter((o) => 'ok' in o).length, SELF_SERVICE_LIMIT, `exactly ${SELF_SERVICE_LIMIT} of 30 concurrent creations succeed`)
  t.same(new Set(outcomes.filter((o) => 'refused' in o).map((o) => (o as { refused: string }).refused)), new Set(['CONFLICT']), 'the others are refused')
  t.equal(
    Number(engine.pluck<[string], number>('SELECT count(*) FROM s3_credentials WHERE tenant_id = ?').get(T1)),
    SELF_SERVICE_LIMIT,
    'the table holds the limit',
  )
})

const T3 = '00000000-0000-4000-8000-000000000003'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

onBoth('two nodes delivering from one outbox send every event exactly once, with the same retries and dead letters', async (t, { engine, database }) => {
  const ok = await startReceiver(t, [200])
  const failing = await startReceiver(t, [500])
  const tenants = [T1, T2, T3]
  tenants.forEach((id, i) => tenant(engine, id, 1_000_000, i + 1))
  const outbox = new OutboxRepo(engine)
  const now = Date.now()
  const events = 60
  engine.transaction(() => {
    for (let i = 0; i < events; i++) {
      const ev = { tenantId: tenants[i % 3]!, fileId: `f${i}`, event: 'file.uploaded' as const, payload: JSON.stringify({ i }), now }
      outbox.insert({ ...ev, id: `ev-${String(i).padStart(2, '0')}`, url: ok.url })
    }
    outbox.insert({ id: 'ev-dead', tenantId: T1, fileId: 'fd', event: 'file.failed', url: failing.url, payload: '{}', now })
  })
  const nodes = await startNodes(t, database, 2)
  nodes.forEach((n, i) => n.send({ kind: 'deliver', holder: `node ${i}`, claimMs: 60_000 }))
  t.same(await Promise.all(nodes.map((n) => n.next())), ['delivering', 'delivering'])

  await ok.waitFor(events, 60_000)
  await failing.waitFor(3, 60_000)
  // Until nothing is pending, then a little longer: a second sending of any event would come now.
  for (const deadline = Date.now() + 30_000; outbox.counts().pending > 0 && Date.now() < deadline;) await sleep(50)
  await sleep(500)
  nodes.forEach((n) => n.send({ kind: 'stop' }))
  t.same(await Promise.all(nodes.map((n) => n.next())), ['stopped', 'stopped'])

  const ids = ok.received.map((r) => String(r.headers['webhook-id']))
  t.equal(ids.length, events, `${events} deliveries for ${events} events`)
  t.equal(new Set(ids).size, events, 'each event sent once')
  t.same(outbox.counts(), { pending: 0, delivered: events, dead: 1 })
  t.same(new Set(outbox.list('delivered', events).map((e) => e.attempts)), new Set([1]), 'each delivered at its first attempt')
  // The dead letter: 3 attempts in all, 1 s then 2 s apart (at least), whichever node made each.
  t.equal(failing.received.length, 3, 'a failing receiver is tried 3 times, not 3 per node')
  const at = failing.received.map((r) => r.at)
  t.ok(
    at[1]! - at[0]! >= RETRY_DELAYS_MS[0] && at[2]! - at[1]! >= RETRY_DELAYS_MS[1],
    `retried after 1 s and 2 s (${at[1]! - at[0]!} ms, ${at[2]! - at[1]!} ms)`,
  )
  t.match(outbox.get('ev-dead'), { status: 'dead', attempts: 3, lastError: 'HTTP 500' })
})

/** Runs `body` on two connections to a fresh SQLite database, then to a fresh PostgreSQL schema. */
function onBothConnections(title: string, body: (t: Test, dbs: Databases) => Promise<void>): void {
  t.test(title, async (t) => {
    await t.test('SQLite', async (t) => body(t, await sqlite(t)))
    withPg(t, 'PostgreSQL', (url) => {
      void t.test('PostgreSQL', async (t) => body(t, await postgres(t, url)))
    })
  })
}

onBothConnections(
  'a node that dies mid-delivery leaves its claim to lapse, then another sends the event; one that stops gives it up at once',
  async (t, { engine, other }) => {
    const receiver = await startReceiver(t, [200])
    tenant(engine, T1, 1_000_000, 1)
    const clock = new ManualClock(Date.now())
    const claimMs = 30_000
    const log = { info() {}, warn() {}, error() {} } as never
    // Node a's receiver never answers: a node that hangs or died mid-delivery looks the same from outside.
    const hang = (_d: unknown, signal: AbortSignal) =>
      new Promise<DeliveryResult>((resolve) => signal.addEventListener('abort', () => resolve({ ok: false, error: 'aborted' })))
    const send = (d: Parameters<typeof deliver>[0], signal: AbortSignal) => deliver(d, { allowPrivate: true, resolve: systemResolver, signal })
    const scheduler = (db: Engine, holder: string, s: typeof send) =>
      new WebhookScheduler({ outbox: new OutboxRepo(db), tenants: new TenantsRepo(db), clock, log, holder, claimMs, send: s })
    const outbox = new OutboxRepo(engine)
    const insert = (id: string) => outbox.insert({ id, tenantId: T1, fileId: id, event: 'file.uploaded', url: receiver.url, payload: '{}', now: clock.now() })

    insert('e1')
    const a = scheduler(engine, 'a', hang)
    const b = scheduler(other, 'b', send)
    const aRun = a.runOnce()
    t.equal(await b.runOnce(), 0, 'node b does not send what node a claimed')
    clock.advance(claimMs - 1)
    t.equal(await b.runOnce(), 0, 'nor before the claim lapses')
    clock.advance(1)
    t.equal(await b.runOnce(), 1, 'once it lapses, node b sends it')
    t.equal(receiver.received.length, 1)
    t.match(outbox.get('e1'), { status: 'delivered', attempts: 1 })
    // Node a stops (its attempt aborted): the event is delivered already, and stays so.
    await a.stop()
    await aRun
    t.match(outbox.get('e1'), { status: 'delivered', attempts: 1 })

    insert('e2')
    const a2 = scheduler(engine, 'a2', hang)
    const a2Run = a2.runOnce()
    t.equal(await b.runOnce(), 0, 'e2 is claimed by node a2')
    await a2.stop()
    await a2Run
    t.equal(await b.runOnce(), 1, 'a node that stops gives its claims up: node b sends e2 without waiting for the claim to lapse')
    t.same(
      receiver.received.map((r) => r.headers['webhook-id']),
      ['e1', 'e2'],
    )
    t.match(outbox.get('e2'), { status: 'delivered', attempts: 1 })
  },
)

/** /health and /ready over `db`, and a route whose statement runs on it, as the API's routes do. */
async function probes(t: Test, db: Engine): Promise<App> {
  const { core } = await makeApp(t)
  const app = Fastify() as unknown as App
  app.addSchema(ErrorResponse)
  registerErrorHandling(app)
  await healthRoutes(app, { db, dataDir: core.dataDir, store: core.store })
  app.get('/statement', async () => ({ one: db.pluck('SELECT 1').get() }))
  t.teardown(() => app.close())
  return app
}

t.test('/health reports the database: 503 with Retry-After while it is lost, 200 again once it is back (SQLite: a closed connection)', async (t) => {
  await t.test('SQLite', async (t) => {
    const dir = tempDir(t)
    const db = openDatabase(path.join(dir, 'coffer.db'), dir)
    const app = await probes(t, engineOf(db))
    t.same((await app.inject({ url: '/health' })).json(), { status: 'ok' })
    t.match((await app.inject({ url: '/ready' })).json(), { database: { kind: 'sqlite', status: 'ok' } })
    db.close()
    const res = await app.inject({ url: '/health' })
    t.equal(res.statusCode, 503)
    t.equal(res.headers['retry-after'], '5')
    t.match(res.json(), { error: { code: 'DATABASE_UNAVAILABLE', details: { checks: { database: /^failed/ } } } })
  })
  withPg(t, 'PostgreSQL', (url) => {
    void t.test('PostgreSQL, its connection through a proxy that is stopped, then started again', async (t) => {
      const target = new URL(url)
      // The proxy is another process: the bridge blocks this thread while it waits for PostgreSQL.
      const proxy = async (port: number): Promise<{ child: ChildProcess; port: number }> => {
        const child = spawn(process.execPath, ['-e', PROXY, String(port), target.port], { stdio: ['ignore', 'pipe', 'inherit'] })
        t.teardown(() => void child.kill('SIGKILL'))
        const [line] = (await once(child.stdout!, 'data')) as [Buffer]
        return { child, port: Number(String(line).trim()) }
      }
      const first = await proxy(0)
      const through = new URL(url)
      through.port = String(first.port)
      const bridge = new PgBridge({ url: through.toString(), connectTimeoutMs: 2000 })
      t.teardown(() => bridge.close())
      const app = await probes(t, new PgEngine(bridge))

      t.same((await app.inject({ url: '/health' })).json(), { status: 'ok' }, 'connected: 200')
      t.match((await app.inject({ url: '/ready' })).json(), { database: { kind: 'postgres', status: 'ok' } }, 'PostgreSQL, in /ready')
      first.child.kill('SIGKILL')
      await once(first.child, 'exit')
      for (const path of ['/health', '/statement']) {
        const res = await app.inject({ url: path })
        t.equal(res.statusCode, 503, `${path}: the connection lost, 503`)
        t.equal(res.headers['retry-after'], '5', `${path}: with Retry-After`)
        t.equal(res.json().error.code, 'DATABASE_UNAVAILABLE')
      }
      t.match(
        (await app.inject({ url: '/health' })).json(),
        { error: { details: { checks: { database: /^unavailable: 08/ }, database: { kind: 'postgres', status: /^unavailable: 08/ } } } },
        'nobody listening: refused',
      )
      t.notMatch((await app.inject({ url: '/health' })).body, through.host, 'never its address (nor its URL)')
      t.match((await app.inject({ url: '/ready' })).json(), { error: { code: 'NOT_READY', details: { checks: { database: 'failed' } } } })

      await proxy(first.port)
      t.same((await app.inject({ url: '/health' })).json(), { status: 'ok' }, 'the database back: 200, with nothing done but asking again')
      t.same((await app.inject({ url: '/statement' })).json(), { one: 1 })
    })
  })
})

/** A TCP proxy to PostgreSQL on 127.0.0.1: `node -e PROXY <listen port or 0> <target port>`; prints its port. */
const PROXY = `
const net = require('node:net')
const [listen, target] = process.argv.slice(1).map(Number)
const server = net.createServer((c) => {
  const u = net.connect(target, '127.0.0.1')
  const end = () => { c.destroy(); u.destroy() }
  for (const s of [c, u]) { s.on('error', end); s.on('close', end) }
  c.pipe(u); u.pipe(c)
})
server.listen(listen, '127.0.0.1', () => console.log(server.address().port))
`

t.test('a server starting on SQLite drops the claims of the previous run: an event it was sending goes out at once', async (t) => {
  const receiver = await startReceiver(t, [200])
  const dir = tempDir(t)
  const config = loadConfig({ COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' }, { port: '0', 's3-port': '0', 'data-dir': dir })
  // The previous run: the event claimed (for an hour) by a process that is gone.
  const before = await startServer(config, createLogger('silent', captureLogs().stream), { startup: false })
  const now = Date.now()
  tenant(engineOf(before.core.db), T1, 1_000_000, 1)
  before.core.outbox.insert({ id: 'ev', tenantId: T1, fileId: 'f', event: 'file.uploaded', url: receiver.url, payload: '{}', now })
  t.same(before.core.outbox.claim(['ev'], 'gone', now, now + 3_600_000), ['ev'])
  await before.close()
  t.equal(receiver.received.length, 0, 'not sent by the previous run')

  const server = await startServer(config, createLogger('silent', captureLogs().stream))
  t.teardown(() => server.close())
  await receiver.waitFor(1, 20_000)
  t.equal(receiver.received[0]!.headers['webhook-id'], 'ev', 'sent without waiting an hour for the claim to lapse')
})
