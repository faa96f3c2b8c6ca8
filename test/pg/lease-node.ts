// One node of test/pg-leases.test.ts, in a worker thread (#30): a bridge of its own to the shared
// PostgreSQL schema, and Leases on it with the node's own clock. It takes one lease in a loop for
// a while, sometimes giving it up, sometimes stalling past its expiry, and reports each span of
// time it held the lease as it knew it, for the test to check that no two nodes' spans overlap.
import { workerData, parentPort } from 'node:worker_threads'
import { PgBridge } from '../../src/db/pg/bridge'
import { PgEngine } from '../../src/db/pg/engine'
import { EngineCommits } from '../../src/db/group-commit'
import { LeasesRepo } from '../../src/db/repos/leases'
import { Leases } from '../../src/services/leases'

export interface LeaseNodeTask {
  url: string
  name: string
  ttlMs: number
  durationMs: number
  /** Opened (set to 1 and notified) by the test once every node is ready, so that they race from the start. */
  gate: SharedArrayBuffer
}

/** A span the node held the lease: from the answer of the take that gave it, to its release or expiry. */
export interface HeldSpan {
  holder: string
  from: number
  to: number
}

export interface LeaseNodeReport {
  holder: string
  spans: HeldSpan[]
  takes: number
  refused: number
}

const task = workerData as LeaseNodeTask
const bridge = new PgBridge({ url: task.url })
const engine = new PgEngine(bridge)
// The clock a take reads its `now` from (Leases.take): the expiry it writes is that plus the ttl.
let lastNow = 0
const clock = { now: () => (lastNow = Date.now()) }
const leases = new Leases(new LeasesRepo(engine), new EngineCommits(engine), clock, process.pid)
const sleeper = new Int32Array(new SharedArrayBuffer(4))
const sleep = (ms: number) => void Atomics.wait(sleeper, 0, 0, ms)

const report: LeaseNodeReport = { holder: leases.holder, spans: [], takes: 0, refused: 0 }
let span: HeldSpan | undefined
let heldUntil = 0
const close = (to: number) => {
  if (span) report.spans.push({ ...span, to: Math.min(to, heldUntil) })
  span = undefined
}

// Connected before the race: the bridge's thread and connection start with its first statement.
leases.holderOf(task.name)
parentPort!.postMessage('ready')
Atomics.wait(new Int32Array(task.gate), 0, 0)
const end = Date.now() + task.durationMs
while (Date.now() < end) {
  const took = leases.take(task.name, task.ttlMs)
  const answered = Date.now()
  report.takes++
  if (!took) {
    report.refused++
    // Not ours, or no longer: whatever this node believed ends with the expiry it last wrote.
    close(heldUntil)
    sleep(Math.random() * task.ttlMs * 0.3)
    continue
  }
  // A renewal before the last expiry continues the span; a take after it starts a new one.
  if (span && lastNow >= heldUntil) close(heldUntil)
  span ??= { holder: leases.holder, from: answered, to: 0 }
  heldUntil = lastNow + task.ttlMs
  const dice = Math.random()
  if (dice < 0.15) {
    // Gives it up: held until the release is sent.
    close(Date.now())
    leases.release(task.name)
    sleep(Math.random() * task.ttlMs * 0.3)
  } else if (dice < 0.25) {
    // Stalls past the expiry (a pause, a lost connection): held until the expiry it wrote.
    close(heldUntil)
    sleep(task.ttlMs * (1 + Math.random() * 0.5))
  } else {
    // Renews within the lease, as LeasedBackground does every third of it.
    sleep(Math.random() * task.ttlMs * 0.3)
  }
}
close(Date.now())
bridge.close()
parentPort!.postMessage(report)
