import type { Engine, Statement } from '../engine'
import type { PgBridge } from './bridge'
import { PgError } from './errors'
import { toPgParams } from './placeholders'

/** A statement on PostgreSQL: translated once (placeholders.ts), sent with its values each time. */
class PgStatement<P extends unknown[], R> implements Statement<P, R> {
  private readonly text: string
  private readonly names: string[] | undefined
  private readonly count: number

  constructor(
    private readonly bridge: PgBridge,
    sql: string,
    private readonly first: boolean,
  ) {
    ;({ text: this.text, names: this.names, count: this.count } = toPgParams(sql))
  }

  get(...params: P): R | undefined {
    return this.rows(params)[0]
  }

  all(...params: P): R[] {
    return this.rows(params)
  }

  iterate(...params: P): IterableIterator<R> {
    return this.rows(params)[Symbol.iterator]()
  }

  run(...params: P): { changes: number } {
    return { changes: this.bridge.query(this.text, this.values(params)).rowCount }
  }

  private rows(params: unknown[]): R[] {
    const r = this.bridge.query(this.text, this.values(params))
    if (!this.first) return r.rows as R[]
    const column = r.fields[0]
    if (column === undefined) throw new Error('pluck() of a statement that returns no column')
    return r.rows.map((row) => row[column] as R)
  }

  /** Named parameters come as one object, as better-sqlite3 takes them; a missing one is an error, not NULL. */
  private values(params: unknown[]): unknown[] {
    if (!this.names) {
      if (params.length !== this.count) throw new RangeError(`expected ${this.count} parameters, got ${params.length}`)
      return params
    }
    const named = params[0] as Record<string, unknown> | undefined
    if (params.length !== 1 || typeof named !== 'object' || named === null) throw new TypeError('named parameters are passed as one object')
    return this.names.map((n) => {
      if (!(n in named)) throw new RangeError(`missing named parameter @${n}`)
      return named[n]
    })
  }
}

/**
 * SQLSTATEs after which the whole transaction runs again: serialization_failure (40001) and
 * deadlock_detected (40P01). PostgreSQL rolled it back and applies none of it; "applications
 * using this level must be prepared to retry transactions due to serialization failures"
 * (PostgreSQL's manual, 13.2.2 and 13.3.4). Another node's transaction on the same rows is what
 * causes them (#30); one process runs one transaction at a time and never conflicts with itself.
 */
const RETRIED = new Set(['40001', '40P01'])
/** Runs of a transaction in all, the first included; the last one's failure is the caller's. */
export const ATTEMPTS = 4
const sleeper = new Int32Array(new SharedArrayBuffer(4))
/**
 * A few milliseconds, random and longer each time, before another run: two nodes whose
 * transactions conflicted do not meet again in step. Synchronous, as every statement here is.
 */
const pause = (attempt: number): void => void Atomics.wait(sleeper, 0, 0, Math.random() * 5 * attempt)

/**
 * The PostgreSQL engine over a synchronous bridge. Transactions nest as better-sqlite3's do: the
 * outermost is BEGIN … COMMIT, an inner one a savepoint, so a service calling another service's
 * transactional method keeps working. The outermost one runs `fn` again after a serialization
 * failure or a deadlock (RETRIED), up to ATTEMPTS runs: `fn` must be a service's transaction,
 * reads, checks and writes with nothing done outside the database that a second run would repeat.
 */
export class PgEngine implements Engine {
  readonly dialect = 'postgres'
  private depth = 0

  constructor(readonly bridge: PgBridge) {}

  prepare<P extends unknown[] = unknown[], R = unknown>(sql: string): Statement<P, R> {
    return new PgStatement<P, R>(this.bridge, sql, false)
  }

  pluck<P extends unknown[] = unknown[], V = unknown>(sql: string): Statement<P, V> {
    return new PgStatement<P, V>(this.bridge, sql, true)
  }

  transaction<T>(fn: () => T): T {
    if (this.depth === 0) {
      for (let attempt = 1; ; attempt++) {
        this.depth++
        try {
          return this.bridge.transaction(fn)
        } catch (err) {
          if (!(err instanceof PgError && RETRIED.has(err.code)) || attempt >= ATTEMPTS) throw err
        } finally {
          this.depth--
        }
        pause(attempt)
      }
    }
    const name = `coffer_${this.depth}`
    this.bridge.exec(`SAVEPOINT ${name}`)
    this.depth++
    try {
      const result = fn()
      this.bridge.exec(`RELEASE SAVEPOINT ${name}`)
      return result
    } catch (err) {
      this.bridge.exec(`ROLLBACK TO SAVEPOINT ${name}`)
      this.bridge.exec(`RELEASE SAVEPOINT ${name}`)
      throw err
    } finally {
      this.depth--
    }
  }

  read<T>(fn: () => T): T {
    // Inside a transaction: a savepoint of it, as SQLite nests a deferred transaction.
    if (this.depth > 0) return this.transaction(fn)
    this.depth++
    try {
      // One snapshot for every statement; a read-only transaction at this level never fails to serialize.
      return this.bridge.transaction(fn, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    } finally {
      this.depth--
    }
  }
}
