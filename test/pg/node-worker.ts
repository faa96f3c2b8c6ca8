// One "node" of test/pg-nodes.test.ts, run in a worker thread (#30): a connection of its own to
// the shared database (a bridge to PostgreSQL, or a better-sqlite3 connection to the same file),
// and the services under test on it. A thread is to the test what a process is to a deployment:
// its transactions block it alone, so several nodes' transactions really run at the same time
// and wait on each other's locks, which one thread driving two bridges could never show.
import path from 'node:path'
import { parentPort, workerData } from 'node:worker_threads'
import { openDatabase } from '../../src/db/database'
import { engineOf, type Engine } from '../../src/db/engine'
import type { GroupCommit } from '../../src/db/group-commit'
import { PgBridge } from '../../src/db/pg/bridge'
import { PgEngine } from '../../src/db/pg/engine'
import { FilesRepo } from '../../src/db/repos/files'
import { OutboxRepo } from '../../src/db/repos/outbox'
import { TenantsRepo } from '../../src/db/repos/tenants'
import { WorkspacesRepo } from '../../src/db/repos/workspaces'
import { AppError } from '../../src/errors'
import { systemClock } from '../../src/lib/clock'
import { Quotas } from '../../src/services/quotas'
import { S3CredentialsService } from '../../src/services/s3-credentials'
import { S3CredentialsRepo } from '../../src/db/repos/s3-credentials'
import { UploadRecords } from '../../src/services/upload-records'
import { deliver } from '../../src/webhooks/deliver'
import { systemResolver } from '../../src/webhooks/ssrf'
import type { FileEvents } from '../../src/webhooks/events'
import { WebhookScheduler } from '../../src/webhooks/scheduler'

/**
 * What a node is asked to do, one message at a time; it answers each. A reservation run waits at
 * `gate` (posting 'waiting' first) until the test opens it for every node at once.
 */
export type NodeTask =
  | { kind: 'reserve'; tenantId: string; workspaceId: string | null; count: number; size: number; gate: SharedArrayBuffer }
  | { kind: 'deliver'; holder: string; claimMs: number }
  | { kind: 'credentials'; tenantId: string; count: number; gate: SharedArrayBuffer }
  | { kind: 'stop' }

/** A node's connection: a PostgreSQL URL (its schema on the search path), or a SQLite database file. */
export type NodeDatabase = { postgres: string } | { sqlite: string }

/** A reservation's outcome: its file id, or the error code that refused it. */
export type Reserved = { ok: string } | { refused: string }

const database = workerData as NodeDatabase
const port = parentPort!

function open(): { engine: Engine; close: () => void } {
  if ('postgres' in database) {
    const bridge = new PgBridge({ url: database.postgres })
    return { engine: new PgEngine(bridge), close: () => bridge.close() }
  }
  const db = openDatabase(database.sqlite, path.dirname(database.sqlite))
  return { engine: engineOf(db), close: () => db.close() }
}

const { engine, close } = open()
const tenants = new TenantsRepo(engine)
const workspaces = new WorkspacesRepo(engine)
let scheduler: WebhookScheduler | undefined

/** The API handshake's transaction (UploadRecords.reserve), `count` times, each a write transaction of its own. */
function reserve(task: Extract<NodeTask, { kind: 'reserve' }>): Reserved[] {
  // As the group commit's runUnflushed runs it on SQLite: one transaction, committed at once.
  const commits = { runUnflushed: <T>(fn: () => T): T => engine.transaction(fn) } as unknown as GroupCommit
  const records = new UploadRecords({
    db: engine,
    commits,
    clock: systemClock,
    files: new FilesRepo(engine),
    workspaces,
    quotas: new Quotas(tenants, workspaces),
    events: undefined as unknown as FileEvents, // a reservation writes no event
  })
  const gate = new Int32Array(task.gate)
  port.postMessage('waiting')
  Atomics.wait(gate, 0, 0)
  const results: Reserved[] = []
  for (let i = 0; i < task.count; i++) {
    const id = crypto.randomUUID()
    try {
      records.reserve({
        id,
        tenantId: task.tenantId,
        workspaceId: task.workspaceId,
        originalName: 'a.png',
        fileType: 'image/png',
        sizeBytes: task.size,
        declaredSize: task.size,
        context: '',
        tags: {},
        webhookUrl: null,
        uploadExpiresAt: Date.now() + 60_000,
        createdAt: Date.now(),
        objectKey: null,
      })
      results.push({ ok: id })
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      results.push({ refused: err.code })
    }
  }
  return results
}

/** A tenant's own S3 credential pairs (createOwn, the tenant API's POST), `count` times after the gate. */
function createCredentials(task: Extract<NodeTask, { kind: 'credentials' }>): Reserved[] {
  const credentials = new S3CredentialsService(engine, new S3CredentialsRepo(engine), tenants, systemClock, Buffer.alloc(32, 7), () => 0)
  const gate = new Int32Array(task.gate)
  port.postMessage('waiting')
  Atomics.wait(gate, 0, 0)
  const results: Reserved[] = []
  for (let i = 0; i < task.count; i++) {
    try {
      results.push({ ok: credentials.createOwn(task.tenantId).accessKeyId })
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      results.push({ refused: err.code })
    }
  }
  return results
}

/** A webhook scheduler as `coffer serve` runs it, delivering to the test's receiver on 127.0.0.1. */
function startDelivering(task: Extract<NodeTask, { kind: 'deliver' }>): void {
  scheduler = new WebhookScheduler({
    outbox: new OutboxRepo(engine),
    tenants,
    clock: systemClock,
    log: { info() {}, warn() {}, error() {} } as never,
    pollMs: 20,
    holder: task.holder,
    claimMs: task.claimMs,
    send: (delivery, signal) => deliver(delivery, { allowPrivate: true, resolve: systemResolver, signal }),
  })
  scheduler.start()
}

port.on('message', (task: NodeTask) => {
  if (task.kind === 'reserve') port.postMessage(reserve(task))
  else if (task.kind === 'credentials') port.postMessage(createCredentials(task))
  else if (task.kind === 'deliver') {
    startDelivering(task)
    port.postMessage('delivering')
  } else {
    void (scheduler?.stop() ?? Promise.resolve()).then(() => {
      close()
      port.postMessage('stopped')
      port.close()
    })
  }
})
port.postMessage('ready')
