import { createHash } from 'node:crypto'
import { sqliteParents, sqlitePrimaryKey, type MetadataSide } from '../db/metadata-sides'
import type { DB } from '../db/database'

/**
 * `coffer migrate-metadata` (#30): copies every table of one database (a SQLite data dir's, or a
 * PostgreSQL one) into the other, resumably, and verifies the copy.
 *
 * - Every table is copied: the two schemas' table and column lists must be the same, a table or
 *   column on one side only is an error naming it, so a later migration's table is never skipped
 *   in silence. schema_migrations is compared instead (same versions and names, or refused) and
 *   PostgreSQL's auth_version (no SQLite twin) is bumped at the end.
 * - Batches in primary-key order, each one transaction; a killed run resumes from the target's
 *   last key (rewriting that row, and any row a migration seeded, by upsert), so nothing is
 *   duplicated or skipped. A target whose rows are not the start of the source's is refused.
 * - Tables are copied parents first (foreign keys stay checked). Counters kept by triggers
 *   (usage, file_counts, blob_totals) are copied as rows with the written table's triggers off: they then equal the source's by construction, and the checksums prove it,
 *   where triggers recomputing them would be a second implementation to trust.
 * - Verified: per table, the row count and an order-independent checksum of every row's values
 *   on both sides; on a difference, the first differing key, walking both in key order.
 */

export class MigrateMetadataError extends Error {
  override name = 'MigrateMetadataError'
}

/**
 * Tables not copied as rows: the schema's own history, compared instead; and the fingerprint of
 * the nodes' server secret (migration 25, #30), a PostgreSQL database's own (SQLite's stays
 * empty): a copy into PostgreSQL records the data dir's instead (cli/migrate-metadata.ts).
 */
const NOT_COPIED = new Set(['schema_migrations', 'server_secret'])

export interface CopyOptions {
  /** Rows per batch (one transaction each). */
  batchSize?: number
  /** Called after each committed batch (the tests' kill point, progress). */
  afterBatch?: (table: string, copied: number) => void
  now?: number
}

export interface TableReport {
  table: string
  rows: number
  copied: number
  checksum: string
}

/** SQLite's catalogue (one side is always SQLite) gives each table's columns and key. */
export interface Plan {
  table: string
  columns: string[]
  pk: string[]
}

/** The refusals that come before anything is written. */
export function plan(sqlite: DB, source: MetadataSide, target: MetadataSide, now = Date.now()): Plan[] {
  for (const side of [source, target]) {
    const live = side.liveLeases(now)
    if (live.length > 0)
      throw new MigrateMetadataError(
        `a server is running on the ${side.kind === 'sqlite' ? 'data dir' : 'PostgreSQL database'} (it holds ${live.length} lease(s), e.g. ${live[0]}): stop it first, or wait until its leases expire`,
      )
  }
  const sv = source.versions()
  const tv = target.versions()
  const sMax = Math.max(0, ...sv.keys())
  const tMax = Math.max(0, ...tv.keys())
  if (sMax !== tMax) throw new MigrateMetadataError(`the source's schema is version ${sMax}, the target's ${tMax}: both must be the same`)
  for (const [v, name] of sv) {
    if (tv.get(v) !== name) throw new MigrateMetadataError(`migration ${v} (${name}) is not applied on the target as on the source`)
  }
  const sTables = new Set(source.tables())
  const tTables = new Set(target.tables())
  for (const t of sTables)
    if (!tTables.has(t)) throw new MigrateMetadataError(`table ${t} is in the ${source.kind} source but not in the ${target.kind} target`)
  for (const t of tTables)
    if (!sTables.has(t)) throw new MigrateMetadataError(`table ${t} is in the ${target.kind} target but not in the ${source.kind} source`)
  const plans: Plan[] = []
  for (const table of [...sTables].sort()) {
    if (NOT_COPIED.has(table)) continue
    const columns = source.columns(table)
    const other = new Set(target.columns(table))
    for (const c of columns) if (!other.has(c)) throw new MigrateMetadataError(`column ${table}.${c} is in the source but not in the target`)
    for (const c of other) if (!columns.includes(c)) throw new MigrateMetadataError(`column ${table}.${c} is in the target but not in the source`)
    const pk = sqlitePrimaryKey(sqlite, table)
    if (pk.length === 0) throw new MigrateMetadataError(`table ${table} has no primary key: it cannot be copied in key order`)
    plans.push({ table, columns, pk })
  }
  return parentsFirst(sqlite, plans)
}

/** The plans with every table after those its foreign keys refer to (foreign keys are checked during the copy), else by name. */
function parentsFirst(sqlite: DB, plans: Plan[]): Plan[] {
  const byName = new Map(plans.map((p) => [p.table, p]))
  const out: Plan[] = []
  const state = new Map<string, 'visiting' | 'done'>()
  const visit = (p: Plan): void => {
    if (state.get(p.table) === 'done') return
    if (state.get(p.table) === 'visiting') throw new MigrateMetadataError(`the foreign keys of table ${p.table} form a cycle: no order copies it`)
    state.set(p.table, 'visiting')
    for (const parent of sqliteParents(sqlite, p.table)) {
      const pp = byName.get(parent)
      if (pp && pp !== p) visit(pp)
    }
    state.set(p.table, 'done')
    out.push(p)
  }
  for (const p of plans) visit(p)
  return out
}

/**
 * Where each table's copy resumes: after the target's last key, that row rewritten (inclusive).
 * The target's rows must be the source's first ones: its first and last keys exist in the source
 * and it has as many rows as the source has up to its last key. Otherwise it holds other data.
 */
function resumeFrom(p: Plan, source: MetadataSide, target: MetadataSide): unknown[] | undefined {
  const last = target.edgeKey(p.table, p.pk, true)
  if (last === undefined) return undefined
  const first = target.edgeKey(p.table, p.pk, false)!
  for (const key of [first, last]) {
    if (!source.hasKey(p.table, p.pk, key))
      throw new MigrateMetadataError(
        `the target's table ${p.table} holds a row the source does not have (key ${JSON.stringify(key)}): it is not a copy of this source; use an empty database`,
      )
  }
  if (source.countUpTo(p.table, p.pk, last) !== target.count(p.table))
    throw new MigrateMetadataError(
      `the target's table ${p.table} holds rows other than the start of the source's: it is not a copy of this source; use an empty database`,
    )
  return last
}

/** Copies what the target lacks, table by table; returns the rows written per table. */
export function copyMetadata(plans: Plan[], source: MetadataSide, target: MetadataSide, opts: CopyOptions = {}): Map<string, number> {
  const batch = opts.batchSize ?? 500
  // PostgreSQL takes at most 65535 parameters in one statement.
  const copied = new Map<string, number>()
  for (const p of plans) {
    const perBatch = Math.max(1, Math.min(batch, Math.floor(60_000 / p.columns.length)))
    let after = resumeFrom(p, source, target)
    let inclusive = after !== undefined
    let n = 0
    for (;;) {
      const rows = source.rows(p.table, p.columns, p.pk, after, perBatch, inclusive)
      if (rows.length === 0) break
      target.write(p.table, p.columns, p.pk, rows)
      n += rows.length
      opts.afterBatch?.(p.table, n)
      const lastRow = rows.at(-1)!
      after = p.pk.map((c) => lastRow[p.columns.indexOf(c)])
      inclusive = false
      if (rows.length < perBatch) break
    }
    copied.set(p.table, n)
  }
  target.finish()
  return copied
}

/**
 * One row's values as bytes both databases give alike: the column's name, then a tag and the value
 * (integers in decimal, text as UTF-8, bytes as they are, NULL as its own tag; a boolean as the
 * 0 or 1 SQLite stores), each length-prefixed so that no two rows run together.
 */
export function rowDigest(columns: string[], row: unknown[]): Buffer {
  const h = createHash('sha256')
  const part = (tag: string, bytes: Buffer): void => {
    const len = Buffer.alloc(4)
    len.writeUInt32BE(bytes.length)
    h.update(tag).update(len).update(bytes)
  }
  columns.forEach((c, i) => {
    part('c', Buffer.from(c))
    const v = row[i]
    if (v === null || v === undefined) part('n', Buffer.alloc(0))
    else if (typeof v === 'boolean') part('i', Buffer.from(v ? '1' : '0'))
    else if (typeof v === 'number' || typeof v === 'bigint') part(Number.isInteger(Number(v)) ? 'i' : 'f', Buffer.from(String(v)))
    else if (typeof v === 'string') part('s', Buffer.from(v, 'utf8'))
    else if (v instanceof Uint8Array) part('b', Buffer.from(v.buffer, v.byteOffset, v.byteLength))
    else throw new MigrateMetadataError(`unexpected value of type ${typeof v} in column ${c}`)
  })
  return h.digest()
}

const MOD = 1n << 128n

/** A table's count and checksum: the sum of its rows' digests (first 128 bits) modulo 2^128, whatever their order. */
export function tableChecksum(side: MetadataSide, p: Plan, batchSize = 2000): { rows: number; checksum: string } {
  let sum = 0n
  let rows = 0
  let after: unknown[] | undefined
  for (;;) {
    const page = side.rows(p.table, p.columns, p.pk, after, batchSize)
    for (const r of page) sum = (sum + BigInt('0x' + rowDigest(p.columns, r).subarray(0, 16).toString('hex'))) % MOD
    rows += page.length
    if (page.length < batchSize) break
    const last = page.at(-1)!
    after = p.pk.map((c) => last[p.columns.indexOf(c)])
  }
  return { rows, checksum: sum.toString(16).padStart(32, '0') }
}

/** The first key, in key order, where the two sides' rows differ (a row on one side only, or other values). */
function firstDifference(p: Plan, a: MetadataSide, b: MetadataSide, batchSize = 2000): string {
  const keyOf = (r: unknown[]) => p.pk.map((c) => r[p.columns.indexOf(c)])
  let after: unknown[] | undefined
  for (;;) {
    const ra = a.rows(p.table, p.columns, p.pk, after, batchSize)
    const rb = b.rows(p.table, p.columns, p.pk, after, batchSize)
    for (let i = 0; i < Math.max(ra.length, rb.length); i++) {
      const x = ra[i]
      const y = rb[i]
      if (!x || !y || !rowDigest(p.columns, x).equals(rowDigest(p.columns, y))) {
        if (!x) return `row ${JSON.stringify(keyOf(y!))} is in the ${b.kind} target only`
        if (!y) return `row ${JSON.stringify(keyOf(x))} is in the ${a.kind} source only`
        const [kx, ky] = [JSON.stringify(keyOf(x)), JSON.stringify(keyOf(y))]
        return kx === ky ? `row ${kx} differs` : `the source's row ${kx} and the target's ${ky} stand at the same place in key order`
      }
    }
    if (ra.length < batchSize) return 'no row differs in key order (the sides changed during the check?)'
    after = keyOf(ra.at(-1)!)
  }
}

export interface VerifyReport {
  ok: boolean
  tables: { table: string; rows: number; checksum: string }[]
  /** The first differing table and row, when not ok. */
  difference?: string
}

/** Compares every table's count and checksum; stops at the first table that differs and names its first differing row. */
export function verifyMetadata(plans: Plan[], source: MetadataSide, target: MetadataSide): VerifyReport {
  const tables: VerifyReport['tables'] = []
  for (const p of plans) {
    const s = tableChecksum(source, p)
    const t = tableChecksum(target, p)
    if (s.rows !== t.rows || s.checksum !== t.checksum) {
      const where = firstDifference(p, source, target)
      return { ok: false, tables, difference: `table ${p.table}: ${s.rows} row(s) in the source, ${t.rows} in the target; ${where}` }
    }
    tables.push({ table: p.table, ...s })
  }
  return { ok: true, tables }
}
