// The thread that owns the PostgreSQL connection of a synchronous bridge (bridge.ts). It runs
// `pg`'s asynchronous client on its own event loop; the caller's thread blocks on Atomics.wait
// until a reply is posted and the flag raised (the way synckit, and better-sqlite3's own blocking
// I/O, keep a synchronous interface over work that is not).
import { workerData, type MessagePort } from 'node:worker_threads'
import pg from 'pg'
import { endsConnection, SQLSTATE, type WireError } from './errors'
import type { Reply, Request, WorkerData } from './protocol'

const { url, flag, port, statementTimeoutMs, connectTimeoutMs } = workerData as WorkerData & { port: MessagePort }
const signal = new Int32Array(flag)

// int8 (bigint) columns hold epoch milliseconds and byte counts: numbers, as better-sqlite3 gives
// them. Exact up to 2^53 (285,000 years of milliseconds, 8 PiB); a larger value is refused rather
// than rounded.
// SQLSTATE 22003 (numeric_value_out_of_range): pg reports a parser's error as the query's, and
// the connection goes on.
pg.types.setTypeParser(pg.types.builtins.INT8, (s: string) => {
  const n = Number(s)
  if (!Number.isSafeInteger(n)) throw Object.assign(new RangeError(`bigint ${s} is beyond JavaScript's exact integers`), { code: '22003' })
  return n
})

let client: pg.Client | undefined
/**
 * The connection the caller's open transaction began on. Should that connection be lost, the
 * server rolled the transaction back, and its remaining statements must fail rather than run in
 * autocommit on a new connection (a partial write): they are refused until the caller's ROLLBACK.
 */
let txClient: pg.Client | undefined

async function connection(): Promise<pg.Client> {
  if (client) return client
  const c = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: connectTimeoutMs,
    // The server cancels a statement running longer (SQLSTATE 57014), before the bridge's own deadline.
    statement_timeout: statementTimeoutMs,
    application_name: 'coffer',
  })
  // An idle connection that dies (server restart) emits 'error': forget it, the next query reconnects.
  c.on('error', () => {
    if (client === c) client = undefined
  })
  try {
    await c.connect()
  } catch (err) {
    void c.end().catch(() => {})
    throw err
  }
  client = c
  return c
}

/** SQLSTATE from the server when there is one; the connection class otherwise. */
function toWire(err: unknown, connecting: boolean): WireError {
  const e = err as { message?: string; code?: unknown; detail?: string; constraint?: string }
  const message = e.message ?? String(err)
  if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return { message, code: e.code, detail: e.detail, constraint: e.constraint }
  return { message, code: connecting ? SQLSTATE.cannotConnect : SQLSTATE.connectionFailure }
}

/** Buffers cross the thread boundary as Uint8Array; pg wants Buffers for bytea. */
const toParam = (v: unknown): unknown => (v instanceof Uint8Array && !Buffer.isBuffer(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : v)

async function handle(req: Request): Promise<Reply> {
  if (req.op === 'close') {
    const c = client
    client = undefined
    if (c) await c.end().catch(() => {})
    return { ok: true, rows: [], fields: [], rowCount: 0 }
  }
  if (req.tx === 'in' || req.tx === 'commit' || req.tx === 'rollback') {
    if (!txClient || txClient !== client) {
      txClient = undefined
      if (req.tx === 'rollback') return { ok: true, rows: [], fields: [], rowCount: 0 }
      return { ok: false, error: { message: 'the connection was lost inside a transaction, which PostgreSQL rolled back', code: SQLSTATE.connectionFailure } }
    }
  }
  let connecting = true
  try {
    const c = await connection()
    connecting = false
    if (req.tx === 'begin') txClient = c
    if (req.tx === 'commit' || req.tx === 'rollback') txClient = undefined
    if (req.op === 'exec') {
      // The simple protocol: several statements in one string, no parameters (migrations).
      await c.query(req.sql)
      return { ok: true, rows: [], fields: [], rowCount: 0 }
    }
    const r = await c.query({ text: req.sql, values: req.params.map(toParam) })
    return { ok: true, rows: r.rows as Record<string, unknown>[], fields: r.fields.map((f) => f.name), rowCount: r.rowCount ?? 0 }
  } catch (err) {
    const wire = toWire(err, connecting)
    // A connection-class failure, or the server ending the session, leaves the client unusable:
    // the next request connects again (and one inside a transaction is refused, above).
    if (endsConnection(wire.code) && client) {
      void client.end().catch(() => {})
      client = undefined
    }
    return { ok: false, error: wire }
  }
}

// A thread that ends for any reason (an uncaught error, a crash of pg) wakes a caller waiting on
// it (flag 2) instead of leaving it to its deadline.
process.on('exit', () => {
  Atomics.store(signal, 0, 2)
  Atomics.notify(signal, 0)
})

port.on('message', (req: Request) => {
  void handle(req).then((reply) => {
    // The reply is queued on the port before the flag is raised: the caller, woken, reads it with
    // receiveMessageOnPort. Then the port stays quiet until the next request.
    port.postMessage({ seq: req.seq, ...reply })
    Atomics.store(signal, 0, 1)
    Atomics.notify(signal, 0)
    if (req.op === 'close') port.close()
  })
})
