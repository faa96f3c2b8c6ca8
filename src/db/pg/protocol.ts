import type { WireError } from './errors'

/** What the bridge hands its worker thread (worker.ts) at start. */
export interface WorkerData {
  url: string
  /** A SharedArrayBuffer of one Int32: 0 while a request is out, 1 once its reply is posted, 2 once the thread has ended. */
  flag: SharedArrayBuffer
  statementTimeoutMs: number
  connectTimeoutMs: number
}

/**
 * Where a statement stands in the caller's transaction: `begin` opens it, `in` runs inside it,
 * `commit` and `rollback` end it; absent outside one. The worker refuses `in` and `commit` on a
 * connection other than the one `begin` ran on.
 */
export type TxStep = 'begin' | 'in' | 'commit' | 'rollback'

/** One request; `seq` pairs it with its reply. */
export type Request = { seq: number; tx?: TxStep | undefined } & (
  { op: 'query'; sql: string; params: unknown[] } | { op: 'exec'; sql: string } | { op: 'close' }
)

export type Reply = { ok: true; rows: Record<string, unknown>[]; fields: string[]; rowCount: number } | { ok: false; error: WireError }
