import type { DB } from './database'

/**
 * The two databases behind one repository interface (#30): a repository takes an Engine and
 * prepares its statements on it, whichever database it is. Statements are written once, with `?`
 * or `@name` parameters, in the SQL both databases run alike; where they differ the repository
 * keeps both texts side by side and picks one by `dialect` (architecture.md, "Two databases").
 * Both run synchronously (PostgreSQL through db/pg/bridge.ts), so services keep their
 * transactions free of `await`.
 */
export interface Engine {
  readonly dialect: 'sqlite' | 'postgres'
  /** A statement returning rows as objects keyed by column name. */
  prepare<P extends unknown[] = unknown[], R = unknown>(sql: string): Statement<P, R>
  /** A statement returning each row's first column alone (better-sqlite3's `pluck()`). */
  pluck<P extends unknown[] = unknown[], V = unknown>(sql: string): Statement<P, V>
  /** Runs `fn` in a write transaction (nested: a savepoint), committed when it returns, rolled back when it throws. */
  transaction<T>(fn: () => T): T
  /**
   * Runs `fn`, which only reads, in a transaction of its own: all its statements see one snapshot
   * (a page and its total agree). SQLite: a deferred transaction, which takes no write lock;
   * PostgreSQL: REPEATABLE READ, READ ONLY. Nested in another transaction, it is part of that one.
   */
  read<T>(fn: () => T): T
}

/** A prepared statement. Parameters are positional, or one object for `@name` parameters. */
export interface Statement<P extends unknown[], R> {
  get(...params: P): R | undefined
  all(...params: P): R[]
  /**
   * The rows one at a time (better-sqlite3's `iterate()`, which steps as the caller reads, so a
   * listing that stops early reads no more). PostgreSQL's engine runs the statement at the call and
   * hands out its rows, which the statement's LIMIT bounds.
   */
  iterate(...params: P): IterableIterator<R>
  /** `changes`: rows inserted, updated or deleted. */
  run(...params: P): { changes: number }
}

/** The text of a statement on each database, where they differ. */
export interface Dialects {
  sqlite: string
  postgres: string
}

/** The SQLite engine: better-sqlite3's own statements, which already have this shape. */
class SqliteEngine implements Engine {
  readonly dialect = 'sqlite'
  constructor(readonly db: DB) {}

  prepare<P extends unknown[] = unknown[], R = unknown>(sql: string): Statement<P, R> {
    return this.db.prepare<P, R>(sql)
  }

  pluck<P extends unknown[] = unknown[], V = unknown>(sql: string): Statement<P, V> {
    return this.db.prepare<P, V>(sql).pluck()
  }

  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate()
  }

  read<T>(fn: () => T): T {
    return this.db.transaction(fn)()
  }
}

const engines = new WeakMap<DB, Engine>()

/** The engine of a better-sqlite3 connection (the same one each time), or the engine itself. */
export function engineOf(db: DB | Engine): Engine {
  if ('dialect' in db) return db
  let e = engines.get(db)
  if (!e) engines.set(db, (e = new SqliteEngine(db)))
  return e
}

/** The text for this engine's database. */
export const dialect = (engine: Engine, sql: Dialects): string => sql[engine.dialect]
