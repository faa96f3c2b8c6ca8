import type { WireError } from './errors'

/** What the bridge hands its worker thread (worker.ts) at start. */
export interface WorkerData {
  url: string
  /** A SharedArrayBuffer of one Int32: 0 while a request is out, 1 once its reply is posted, 2 once the thread has ended. */
  flag: SharedArrayBuffer
  statementTimeoutMs: number
  connectTimeoutMs: number
}

/** One request; `seq` pairs it with its reply (a late reply to a timed-out request is recognised). */
export type Request = { seq: number } & ({ op: 'query'; sql: string; params: unknown[] } | { op: 'exec'; sql: string } | { op: 'close' })

export type Reply = { ok: true; rows: Record<string, unknown>[]; fields: string[]; rowCount: number } | { ok: false; error: WireError }
