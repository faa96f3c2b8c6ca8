import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads'
import { PgError, SQLSTATE, fromWire } from './errors'
import type { Reply, Request, TxStep, WorkerData } from './protocol'
import { pgWorkerSource } from './worker-source'

/** The bridge's settings. Times in milliseconds. */
export interface PgBridgeOptions {
  /** postgres://user:password@host:port/database (COFFER_DATABASE_URL's form). */
  url: string
  /** The server cancels a statement running longer (SQLSTATE 57014). Default 30 s. */
  statementTimeoutMs?: number
  /** Connecting gives up after this long (SQLSTATE 08001). Default 10 s. */
  connectTimeoutMs?: number
}

/** A query's result as the caller sees it: rows as objects, bytea as Buffer, int8 as number. */
export interface PgResult {
  rows: Record<string, unknown>[]
  /** Column names in select-list order (what a "pluck" takes the first of). */
  fields: string[]
  /** Rows returned, or changed by INSERT/UPDATE/DELETE. */
  rowCount: number
}

/**
 * Raises the flag to 2 (thread ended) when an eval'd worker exits, as worker.ts does once loaded;
 * "use strict" first, so that the bundle's own directive still applies to all of its code.
 */
const EXIT_HOOK =
  '"use strict";' +
  "process.on('exit',()=>{const s=new Int32Array(require('node:worker_threads').workerData.flag);Atomics.store(s,0,2);Atomics.notify(s,0)});\n"

/** On top of the server's own timeouts: how long the caller waits for a reply at all. */
const BRIDGE_MARGIN_MS = 5_000

/**
 * A synchronous PostgreSQL connection: each call blocks the calling thread until PostgreSQL
 * answers, so the repositories and services written for better-sqlite3 (no `await` inside a
 * transaction) run unchanged over it. One connection per bridge, one
 * statement at a time, so one transaction at a time per process: nothing interleaves, as with
 * SQLite. The cost is a thread hop and a localhost round trip per statement (README, "Metadata in
 * PostgreSQL").
 *
 * Errors come back as PgError with a SQLSTATE. When no reply comes within the statement timeout
 * plus a margin (the server or the network gone), the worker is terminated, which closes its
 * connection (PostgreSQL rolls back an open transaction), the call throws 08006, and the next
 * call starts a new worker and connection.
 */
export class PgBridge {
  private worker: Worker | undefined
  private port: MessagePort | undefined
  private signal: Int32Array | undefined
  private seq = 0
  private closed = false
  private inTransaction = false
  private readonly statementTimeoutMs: number
  private readonly connectTimeoutMs: number

  constructor(private readonly opts: PgBridgeOptions) {
    this.statementTimeoutMs = opts.statementTimeoutMs ?? 30_000
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000
  }

  /**
   * One statement with `$1…$n` parameters (the extended protocol: values never spliced into SQL).
   * `deadlineMs` replaces the bridge's own deadline for this call (a migration, a lock wait).
   */
  query(sql: string, params: readonly unknown[] = [], deadlineMs?: number): PgResult {
    const reply = this.call({ seq: 0, op: 'query', sql, params: [...params], tx: this.step() }, deadlineMs)
    return { rows: reply.rows.map(withBuffers), fields: reply.fields, rowCount: reply.rowCount }
  }

  /** Several statements in one string, no parameters (the simple protocol: migrations). */
  exec(sql: string, deadlineMs?: number): void {
    this.call({ seq: 0, op: 'exec', sql, tx: this.step() }, deadlineMs)
  }

  /** The transaction step of a statement sent now (worker.ts refuses one whose connection was lost). */
  private step(): TxStep | undefined {
    return this.inTransaction ? 'in' : undefined
  }

  /**
   * Runs `fn` between BEGIN and COMMIT, ROLLBACK if it throws. Not reentrant: PostgreSQL has no
   * nested BEGIN, and a nested call is a programming error here as it is with better-sqlite3's
   * immediate transactions. `begin` is the statement that opens it (an isolation level, READ ONLY).
   */
  transaction<T>(fn: () => T, begin = 'BEGIN'): T {
    if (this.inTransaction) throw new Error('PgBridge.transaction is not reentrant (PgEngine nests with savepoints)')
    this.call({ seq: 0, op: 'exec', sql: begin, tx: 'begin' })
    this.inTransaction = true
    let result: T
    try {
      result = fn()
    } catch (err) {
      this.rollbackQuietly()
      throw err
    }
    try {
      this.call({ seq: 0, op: 'exec', sql: 'COMMIT', tx: 'commit' })
    } catch (err) {
      // A failed COMMIT (a deferred constraint, the connection lost) left nothing committed.
      this.rollbackQuietly()
      throw err
    } finally {
      this.inTransaction = false
    }
    return result
  }

  /** Ends the connection and the thread. Idempotent. */
  close(): void {
    if (this.closed) return
    this.closed = true
    if (!this.worker) return
    try {
      this.call({ seq: 0, op: 'close' }, undefined, true)
    } catch {
      // The worker is terminated below either way.
    }
    this.stop()
  }

  private rollbackQuietly(): void {
    this.inTransaction = false
    try {
      this.call({ seq: 0, op: 'exec', sql: 'ROLLBACK', tx: 'rollback' })
    } catch {
      // Nothing to undo if the connection is gone: the server rolled back when it closed.
    }
  }

  private start(): { port: MessagePort; signal: Int32Array } {
    if (this.port && this.signal) return { port: this.port, signal: this.signal }
    const flag = new SharedArrayBuffer(4)
    const { port1, port2 } = new MessageChannel()
    const data: WorkerData & { port: MessagePort } = {
      url: this.opts.url,
      flag,
      statementTimeoutMs: this.statementTimeoutMs,
      connectTimeoutMs: this.connectTimeoutMs,
      port: port2,
    }
    // A file from sources; in dist/coffer.cjs and the executable, the worker's own bundle as code,
    // after a hook that wakes the caller should the thread end before worker.ts has set its own
    // (pg failing to load): the caller would otherwise wait out the whole deadline.
    const source = pgWorkerSource()
    const opts = { workerData: data, transferList: [port2], name: 'coffer-pg' }
    this.worker = 'code' in source ? new Worker(EXIT_HOOK + source.code, { ...opts, eval: true }) : new Worker(source.file, opts)
    // A thread that dies of an uncaught error also emits it here, once the caller has already been
    // told (flag 2, SQLSTATE 08006): without a listener, that event would crash the process.
    this.worker.on('error', () => {})
    this.port = port1
    this.signal = new Int32Array(flag)
    return { port: port1, signal: this.signal }
  }

  private stop(): void {
    this.port?.close()
    void this.worker?.terminate()
    this.worker = undefined
    this.port = undefined
    this.signal = undefined
  }

  private call(req: Request, deadlineMs?: number, closing = false): Extract<Reply, { ok: true }> {
    if (this.closed && !closing) throw new PgError('the PostgreSQL bridge is closed', SQLSTATE.connectionFailure)
    // A thread that ended between calls (flag 2) would never answer: this call starts another
    // instead of waiting out the deadline. Inside a transaction, the new connection refuses it.
    if (this.signal && Atomics.load(this.signal, 0) === 2) this.stop()
    const { port, signal } = this.start()
    const seq = ++this.seq
    Atomics.store(signal, 0, 0)
    port.postMessage({ ...req, seq })
    const waitMs = deadlineMs ?? Math.max(this.statementTimeoutMs, this.connectTimeoutMs) + BRIDGE_MARGIN_MS
    const deadline = Date.now() + waitMs
    for (;;) {
      const left = deadline - Date.now()
      if (left <= 0 || Atomics.wait(signal, 0, 0, left) === 'timed-out') {
        this.stop()
        throw new PgError(`no reply from PostgreSQL within ${waitMs} ms`, SQLSTATE.connectionFailure)
      }
      // The worker queues the reply before it raises the flag, so it is there once woken. The
      // only replies are to this request: a request that timed out took its worker with it.
      const got = receiveMessageOnPort(port)
      if (!got) {
        if (Atomics.load(signal, 0) !== 2) continue
        this.stop()
        throw new PgError("the PostgreSQL bridge's thread ended", SQLSTATE.connectionFailure)
      }
      const reply = got.message as Reply & { seq: number }
      if (!reply.ok) throw fromWire(reply.error)
      return reply
    }
  }
}

/** bytea values cross the thread boundary as Uint8Array; the repositories expect Buffers, as from better-sqlite3. */
function withBuffers(row: Record<string, unknown>): Record<string, unknown> {
  for (const k in row) {
    const v = row[k]
    if (v instanceof Uint8Array && !Buffer.isBuffer(v)) row[k] = Buffer.from(v.buffer, v.byteOffset, v.byteLength)
  }
  return row
}
