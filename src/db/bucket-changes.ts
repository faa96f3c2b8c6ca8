import type { DB } from './database'
import { engineOf, type Engine } from './engine'

/** Writes by this process's connection to what a bucket's state is made of, per engine. */
const localWrites = new WeakMap<Engine, { n: number }>()

/**
 * Called by the repositories that write a bucket's state (its workspace row, its versioning, its
 * configuration documents), in the same call as the write: the bucket state cache
 * (services/bucket-cache.ts) drops what it holds before its next read. Counted whether the write's
 * transaction commits or rolls back, which only costs a refill.
 */
export function noteBucketWrite(db: DB | Engine): void {
  const engine = engineOf(db)
  const count = localWrites.get(engine)
  if (count) count.n++
  else localWrites.set(engine, { n: 1 })
}

/**
 * Whether a bucket's state may have changed since a stamp was taken, for the bucket state cache
 * (#29), on SQLite: `PRAGMA data_version`, which changes when another connection commits (another
 * worker of `--workers N`, the CLI), and this connection's own writes (noteBucketWrite).
 *
 * The data version is read at most once per callback from the event loop (it is kept until the
 * next microtask checkpoint): every read made while handling a request then comes after the
 * request's bytes were read from its socket, so whatever was committed before the client sent it
 * (a PutBucketVersioning answered by another worker) is seen by it. Inside a write transaction that
 * value is never used: another process may have committed between it and the BEGIN. There the
 * version is read again, once per transaction when the transaction says where it starts and ends
 * (`within`, GroupCommit's batches: no other connection commits while this one holds the write
 * lock), else at each read.
 */
export class BucketChanges {
  private readonly dataVersion
  private readonly engine: Engine
  /** The data version read in this callback, outside any transaction. */
  private memo: number | undefined
  /** The data version read at the start of the write transaction `within` runs. */
  private scoped: number | undefined
  private readonly clear = () => {
    this.memo = undefined
  }

  constructor(private readonly db: DB) {
    this.engine = engineOf(db)
    this.dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck()
  }

  /** Another connection's commits: changes whenever one committed since the last read. */
  version(): number {
    if (this.db.inTransaction) return this.scoped ?? this.dataVersion.get()!
    if (this.memo === undefined) {
      this.memo = this.dataVersion.get()!
      queueMicrotask(this.clear)
    }
    return this.memo
  }

  /** Whether this connection is inside a transaction (what it reads there may yet be rolled back). */
  inTransaction(): boolean {
    return this.db.inTransaction
  }

  /** This connection's writes of a bucket's state so far (noteBucketWrite). */
  local(): number {
    return localWrites.get(this.engine)?.n ?? 0
  }

  /** Runs `fn`, which runs inside a write transaction, with one read of the data version for all of it. */
  within<T>(fn: () => T): T {
    this.scoped = this.dataVersion.get()!
    try {
      return fn()
    } finally {
      this.scoped = undefined
    }
  }
}
