import type { DB } from './database'

/**
 * The two databases behind one repository interface (#30): a repository takes an Engine and
 * prepares its statements on it, whichever database it is. Statements are written once, with `?`
 * or `@name` parameters, in the SQL both databases run alike; where they differ the repository
 * keeps both texts side by side and picks one by `dialect`.
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

/** The kinds of integrity constraint both databases report alike. */
export type ConstraintKind = 'unique' | 'foreign-key' | 'check' | 'not-null'

/** better-sqlite3's extended result codes (SqliteError.code) by kind; a primary key is a unique constraint. */
const SQLITE_CONSTRAINTS: Record<string, ConstraintKind> = {
  SQLITE_CONSTRAINT_UNIQUE: 'unique',
  SQLITE_CONSTRAINT_PRIMARYKEY: 'unique',
  SQLITE_CONSTRAINT_FOREIGNKEY: 'foreign-key',
  SQLITE_CONSTRAINT_CHECK: 'check',
  SQLITE_CONSTRAINT_NOTNULL: 'not-null',
}

/** PostgreSQL's SQLSTATEs of class 23 (Appendix A) by kind, as PgError carries them. */
const PG_CONSTRAINTS: Record<string, ConstraintKind> = {
  '23505': 'unique',
  '23503': 'foreign-key',
  '23514': 'check',
  '23502': 'not-null',
}

/**
 * The kind of constraint a statement's error says it violated, on either database, or undefined
 * for any other error: the one test a service makes to catch, say, a row another node inserted
 * first (#30). Read from the error's name and code, so SQLite's statements stay better-sqlite3's
 * own, with nothing wrapped around them. On PostgreSQL a violation aborts the transaction
 * (25P02 after it): a service that goes on after one runs the statement in a nested
 * `transaction()`, a savepoint, as SQLite needs nothing for.
 */
export function constraintViolated(err: unknown): ConstraintKind | undefined {
  if (!(err instanceof Error) || !('code' in err) || typeof err.code !== 'string') return undefined
  if (err.name === 'SqliteError') return SQLITE_CONSTRAINTS[err.code]
  if (err.name === 'PgError') return PG_CONSTRAINTS[err.code]
  return undefined
}

/**
 * Whether a statement failed because a text parameter holds a character PostgreSQL's text cannot
 * store: U+0000 (SQLSTATE 22021, character_not_in_repertoire; 22P05, untranslatable_character).
 * SQLite stores and compares such text, so a lookup by it there finds nothing; on PostgreSQL
 * the statement fails, and the request asked for something no row can hold: the client's input,
 * a 400, not a 500 (#30, found by test/fuzz.test.ts's path ids under COFFER_TEST_DATABASE=postgres).
 */
export function unstorableText(err: unknown): boolean {
  if (!(err instanceof Error) || err.name !== 'PgError' || !('code' in err)) return false
  return err.code === '22021' || err.code === '22P05'
}

/**
 * SQLSTATEs of a PostgreSQL connection lost or refused (#30): class 08 (connection exception,
 * the bridge's own 08001 and 08006 among them) and the server going away (57P01 admin shutdown,
 * 57P02 crash shutdown, 57P03 cannot connect now: starting, or a standby not yet open).
 */
const CONNECTION_LOST = /^(08...|57P0[123])$/

/**
 * Whether a statement failed because the database could not be reached, not because of what it
 * asked: the request may be made again once it is back (503 with Retry-After, not a 500). Nothing
 * of its transaction was committed (PostgreSQL rolls back what a lost connection held). Read from
 * the error's name and code, as constraintViolated, so the bridge's modules stay unloaded.
 */
export function connectionLost(err: unknown): boolean {
  if (!(err instanceof Error) || err.name !== 'PgError' || !('code' in err) || typeof err.code !== 'string') return false
  return CONNECTION_LOST.test(err.code)
}
