import type { DB } from './database'
import type { PgBridge } from './pg/bridge'

/**
 * The two ends of `coffer migrate-metadata` (#30): a SQLite data dir's database and a PostgreSQL
 * database, each seen as tables of rows read and written in primary-key order. All of the
 * command's SQL is here; services/migrate-metadata.ts decides what to copy and verifies it.
 *
 * Both schemas are the same migrations' (db/migrations.ts and pg/migrations.ts, same versions),
 * so one table's columns and primary key are read from SQLite's catalogue and used on both sides;
 * the PostgreSQL side only has to have the same tables and columns, which the service checks.
 */
export interface MetadataSide {
  readonly kind: 'sqlite' | 'postgres'
  /** Every table of the schema (SQLite's own sqlite_* tables left out). */
  tables(): string[]
  /** The table's column names. */
  columns(table: string): string[]
  /** The migrations applied: version → name. */
  versions(): Map<number, string>
  /** Holders of leases not yet expired at `now`: a server (or a node) working on this database. */
  liveLeases(now: number): string[]
  count(table: string): number
  /** Up to `limit` rows in primary-key order, after `after` (or from `after`, with `inclusive`). */
  rows(table: string, columns: string[], pk: string[], after: unknown[] | undefined, limit: number, inclusive?: boolean): unknown[][]
  /** The first or last key in primary-key order, undefined for an empty table. */
  edgeKey(table: string, pk: string[], last: boolean): unknown[] | undefined
  /** Rows whose key is at most `key`. */
  countUpTo(table: string, pk: string[], key: unknown[]): number
  hasKey(table: string, pk: string[], key: unknown[]): boolean
  /**
   * Writes rows in one transaction with the schema's triggers off (the counters they maintain
   * are copied as rows), each row inserted or, where its key exists (a row a migration seeded,
   * or the last row of a run that was killed), replaced.
   */
  write(table: string, columns: string[], pk: string[], rows: unknown[][]): void
  /** After a complete copy: what the database derives from the others (PostgreSQL: the caches' version). */
  finish(): void
}

const q = (name: string): string => `"${name.replaceAll('"', '""')}"`
const list = (names: string[]): string => names.map(q).join(', ')
const marks = (n: number, first = 1, pg = false): string => Array.from({ length: n }, (_, i) => (pg ? `$${first + i}` : '?')).join(', ')

/** The tables a SQLite table's foreign keys refer to. */
export function sqliteParents(db: DB, table: string): string[] {
  return db.prepare<[string], string>('SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)').pluck().all(table)
}

/** The primary key of a SQLite table, in key order (PRAGMA table_info's pk is its position). */
export function sqlitePrimaryKey(db: DB, table: string): string[] {
  const cols = db.prepare(`SELECT name, pk FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk`).all(table) as { name: string }[]
  return cols.map((c) => c.name)
}

export class SqliteSide implements MetadataSide {
  readonly kind = 'sqlite'
  constructor(readonly db: DB) {}

  tables(): string[] {
    return this.db
      .prepare<[], string>(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name`)
      .pluck()
      .all()
  }

  columns(table: string): string[] {
    return this.db.prepare<[string], string>('SELECT name FROM pragma_table_info(?) ORDER BY cid').pluck().all(table)
  }

  versions(): Map<number, string> {
    const rows = this.db.prepare('SELECT version, name FROM schema_migrations').all() as { version: number; name: string }[]
    return new Map(rows.map((r) => [r.version, r.name]))
  }

  liveLeases(now: number): string[] {
    return this.db.prepare<[number], string>('SELECT holder FROM leases WHERE expires_at > ?').pluck().all(now)
  }

  count(table: string): number {
    return this.db
      .prepare(`SELECT count(*) FROM ${q(table)}`)
      .pluck()
      .get() as number
  }

  rows(table: string, columns: string[], pk: string[], after: unknown[] | undefined, limit: number, inclusive = false): unknown[][] {
    const where = after ? `WHERE (${list(pk)}) ${inclusive ? '>=' : '>'} (${marks(pk.length)})` : ''
    const stmt = this.db.prepare(`SELECT ${list(columns)} FROM ${q(table)} ${where} ORDER BY ${list(pk)} LIMIT ${limit}`).raw()
    const rows = (after ? stmt.all(...after) : stmt.all()) as unknown[][]
    return table === 'tenants' ? rows.map((r) => placeholderNames(columns, r)) : rows
  }

  edgeKey(table: string, pk: string[], last: boolean): unknown[] | undefined {
    const order = pk.map((c) => `${q(c)} ${last ? 'DESC' : 'ASC'}`).join(', ')
    return this.db
      .prepare(`SELECT ${list(pk)} FROM ${q(table)} ORDER BY ${order} LIMIT 1`)
      .raw()
      .get() as unknown[] | undefined
  }

  countUpTo(table: string, pk: string[], key: unknown[]): number {
    return this.db
      .prepare(`SELECT count(*) FROM ${q(table)} WHERE (${list(pk)}) <= (${marks(pk.length)})`)
      .pluck()
      .get(...key) as number
  }

  hasKey(table: string, pk: string[], key: unknown[]): boolean {
    const where = pk.map((c) => `${q(c)} = ?`).join(' AND ')
    return this.db.prepare(`SELECT 1 FROM ${q(table)} WHERE ${where}`).get(...key) !== undefined
  }

  /**
   * SQLite cannot switch triggers off, but its DDL is transactional: the batch drops them, writes,
   * and creates them again from their own text, all in one transaction, so a run killed at any
   * point leaves them in place. Foreign keys stay on: parents are copied first.
   */
  write(table: string, columns: string[], pk: string[], rows: unknown[][]): void {
    const others = columns.filter((c) => !pk.includes(c))
    const update = others.length ? `DO UPDATE SET ${others.map((c) => `${q(c)} = excluded.${q(c)}`).join(', ')}` : 'DO NOTHING'
    const insert = this.db.prepare(`INSERT INTO ${q(table)} (${list(columns)}) VALUES (${marks(columns.length)}) ON CONFLICT (${list(pk)}) ${update}`)
    const triggers = this.db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'trigger'`).all() as { name: string; sql: string }[]
    this.db
      .transaction(() => {
        for (const t of triggers) this.db.exec(`DROP TRIGGER ${q(t.name)}`)
        for (const r of rows) insert.run(...r.map(toSqlite))
        for (const t of triggers) this.db.exec(t.sql)
      })
      .immediate()
  }

  finish(): void {}
}

/** PostgreSQL's only values SQLite has no type for: booleans (none in the schema today) stored as 0/1. */
const toSqlite = (v: unknown): unknown => (typeof v === 'boolean' ? (v ? 1 : 0) : v)

/** Tables of PostgreSQL's schema that SQLite has no twin of, and that are not copied. */
export const POSTGRES_ONLY_TABLES = new Set(['auth_version'])

export class PgSide implements MetadataSide {
  readonly kind = 'postgres'
  constructor(readonly bridge: PgBridge) {}

  tables(): string[] {
    return this.bridge
      .query(`SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`)
      .rows.map((r) => r.t as string)
      .filter((t) => !POSTGRES_ONLY_TABLES.has(t))
  }

  columns(table: string): string[] {
    return this.bridge
      .query(`SELECT column_name AS c FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, [
        table,
      ])
      .rows.map((r) => r.c as string)
  }

  versions(): Map<number, string> {
    const rows = this.bridge.query('SELECT version, name FROM schema_migrations').rows
    return new Map(rows.map((r) => [r.version as number, r.name as string]))
  }

  liveLeases(now: number): string[] {
    return this.bridge.query('SELECT holder FROM leases WHERE expires_at > $1', [now]).rows.map((r) => r.holder as string)
  }

  count(table: string): number {
    return Number(this.bridge.query(`SELECT count(*)::bigint AS n FROM ${q(table)}`).rows[0]!.n)
  }

  rows(table: string, columns: string[], pk: string[], after: unknown[] | undefined, limit: number, inclusive = false): unknown[][] {
    const where = after ? `WHERE (${list(pk)}) ${inclusive ? '>=' : '>'} (${marks(pk.length, 1, true)})` : ''
    const r = this.bridge.query(`SELECT ${list(columns)} FROM ${q(table)} ${where} ORDER BY ${list(pk)} LIMIT ${limit}`, after ?? [])
    return r.rows.map((row) => columns.map((c) => row[c]))
  }

  edgeKey(table: string, pk: string[], last: boolean): unknown[] | undefined {
    const order = pk.map((c) => `${q(c)} ${last ? 'DESC' : 'ASC'}`).join(', ')
    const row = this.bridge.query(`SELECT ${list(pk)} FROM ${q(table)} ORDER BY ${order} LIMIT 1`).rows[0]
    return row && pk.map((c) => row[c])
  }

  countUpTo(table: string, pk: string[], key: unknown[]): number {
    return Number(this.bridge.query(`SELECT count(*)::bigint AS n FROM ${q(table)} WHERE (${list(pk)}) <= (${marks(pk.length, 1, true)})`, key).rows[0]!.n)
  }

  hasKey(table: string, pk: string[], key: unknown[]): boolean {
    const where = pk.map((c, i) => `${q(c)} = $${i + 1}`).join(' AND ')
    return this.bridge.query(`SELECT 1 FROM ${q(table)} WHERE ${where}`, key).rowCount > 0
  }

  /**
   * The table's own triggers (the counters they maintain are copied as rows) are off for this
   * transaction alone: ALTER TABLE is transactional in PostgreSQL, so the batch disables them,
   * writes and enables them again before COMMIT, and a run killed at any point leaves them on.
   * DISABLE TRIGGER USER keeps the foreign keys' own triggers, so parents are copied first. It
   * needs the tables' owner (who ran the migrations), not a superuser as
   * session_replication_role would. One multi-row INSERT per batch: one round trip, not one per row.
   */
  write(table: string, columns: string[], pk: string[], rows: unknown[][]): void {
    if (rows.length === 0) return
    const others = columns.filter((c) => !pk.includes(c))
    const update = others.length ? `DO UPDATE SET ${others.map((c) => `${q(c)} = excluded.${q(c)}`).join(', ')}` : 'DO NOTHING'
    const values = rows.map((_, i) => `(${marks(columns.length, i * columns.length + 1, true)})`).join(', ')
    const params = rows.flat()
    this.bridge.transaction(() => {
      this.bridge.exec(`ALTER TABLE ${q(table)} DISABLE TRIGGER USER`)
      this.bridge.query(`INSERT INTO ${q(table)} (${list(columns)}) VALUES ${values} ON CONFLICT (${list(pk)}) ${update}`, params)
      this.bridge.exec(`ALTER TABLE ${q(table)} ENABLE TRIGGER USER`)
    })
  }

  /** The authentication caches of running nodes must not trust what they read before the copy. */
  finish(): void {
    this.bridge.query('UPDATE auth_version SET version = version + 1 WHERE id = 1')
  }
}

/**
 * A deleted tenant's row keeps a placeholder name that SQLite's repository writes with a NUL
 * (`TenantsRepo.deletedName`) and PostgreSQL's with U+0001, since PostgreSQL's text cannot hold a
 * NUL (SQLSTATE 22021). The SQLite side reads it as PostgreSQL's, so the copy and both checksums
 * agree; copied back, the row keeps U+0001, which is as much a placeholder (no live name holds a
 * control character) and is only ever read as a deleted row.
 */
function placeholderNames(columns: string[], row: unknown[]): unknown[] {
  return row.map((v, i) =>
    (columns[i] === 'name' || columns[i] === 'name_key') && typeof v === 'string' && v.includes('\u0000') ? v.replaceAll('\u0000', '\u0001') : v,
  )
}
