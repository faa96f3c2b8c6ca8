// @suites: sqlite
import t from 'tap'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { once } from 'node:events'
import { PgBridge } from '../src/db/pg/bridge'
import { migratePg } from '../src/db/pg/migrate'
import { freshSchema, withPg } from './pg/fixture'
import type { HeldSpan, LeaseNodeReport, LeaseNodeTask } from './pg/lease-node'

// Leases across nodes on PostgreSQL (#30): several nodes, each a worker thread with a bridge of
// its own (test/pg/lease-node.ts), take one lease in a loop under READ COMMITTED, giving it up,
// letting it lapse, renewing it; every span of time a node held it (from the answer of the take
// that gave it to its release or to the expiry it wrote) must overlap no other node's. The
// nodes share this machine's clock: what a clock skew between machines does is in README.md
// ("Metadata in PostgreSQL": leases across nodes).
t.setTimeout(300_000)

const NODES = 4
const TTL_MS = 300
const DURATION_MS = 8_000

withPg(t, 'leases across nodes', (url) => {
  t.test(`${NODES} nodes taking one lease: exactly one holder at any time`, async (t) => {
    const schemaUrl = await freshSchema(t, url)
    const bridge = new PgBridge({ url: schemaUrl })
    t.teardown(() => bridge.close())
    migratePg(bridge)
    const gate = new SharedArrayBuffer(4)
    const task: LeaseNodeTask = { url: schemaUrl, name: 'background:test', ttlMs: TTL_MS, durationMs: DURATION_MS, gate }
    const workers = Array.from({ length: NODES }, () => new Worker(path.join(__dirname, 'pg', 'lease-node.ts'), { workerData: task }))
    t.teardown(() => Promise.all(workers.map((w) => w.terminate())))
    // Each posts 'ready' once its sources are loaded and its bridge open, then waits at the gate.
    await Promise.all(workers.map((w) => once(w, 'message')))
    const reports = workers.map((w) => once(w, 'message').then(([m]) => m as LeaseNodeReport))
    Atomics.store(new Int32Array(gate), 0, 1)
    Atomics.notify(new Int32Array(gate), 0)
    const done = await Promise.all(reports)

    const spans: HeldSpan[] = done.flatMap((r) => r.spans).sort((a, b) => a.from - b.from)
    const overlaps: [HeldSpan, HeldSpan][] = []
    for (let i = 0; i < spans.length; i++) {
      for (let j = i + 1; j < spans.length && spans[j]!.from < spans[i]!.to; j++) {
        if (spans[j]!.holder !== spans[i]!.holder) overlaps.push([spans[i]!, spans[j]!])
      }
    }
    const holders = new Set(spans.map((s) => s.holder))
    let handoffs = 0
    for (let i = 1; i < spans.length; i++) if (spans[i]!.holder !== spans[i - 1]!.holder) handoffs++
    t.comment(`takes ${done.reduce((n, r) => n + r.takes, 0)}, refused ${done.reduce((n, r) => n + r.refused, 0)}, spans ${spans.length}, handoffs ${handoffs}`)
    t.same(overlaps.slice(0, 5), [], 'no two nodes held the lease at the same time')
    t.ok(holders.size >= 2, `the lease changed hands between nodes (${holders.size} holders)`)
    t.ok(handoffs >= 10, `and did so often (${handoffs} handoffs)`)
    t.ok(
      done.every((r) => r.refused > 0),
      'every node was refused it while another held it',
    )
  })
})
