// @suites: sqlite
import t from 'tap'
import path from 'node:path'
import { spawn } from 'node:child_process'
import readline from 'node:readline'
import { MIGRATIONS } from '../src/db/migrations'
import { openDatabase, SchemaTooNewError } from '../src/db/database'
import { PG_MIGRATIONS } from '../src/db/pg/migrations'
import { migratePg } from '../src/db/pg/migrate'
import { PgBridge } from '../src/db/pg/bridge'
import { admin, freshSchema, withPg } from './pg/fixture'
import { tempDir } from './helper'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

// PostgreSQL's schema (#30): SQLite's migrations in PostgreSQL's dialect, applied once under an
// advisory lock however many nodes start together.

/** Tables, triggers the PostgreSQL schema has and SQLite's has not (what PRAGMA data_version does there). */
const PG_ONLY = { tables: ['auth_version'], triggers: ['tenants_auth_changed', 's3_credentials_auth_changed'] }

t.test('one PostgreSQL migration for each SQLite migration: same versions, same names', async (t) => {
  t.same(
    PG_MIGRATIONS.map((m) => `${m.version} ${m.name}`),
    MIGRATIONS.map((m) => `${m.version} ${m.name}`),
    'a migration appended to src/db/migrations.ts needs its PostgreSQL twin in src/db/pg/migrations.ts',
  )
})

withPg(t, 'PostgreSQL migrations', (url) => {
  t.test('three nodes starting at once: the schema migrated once, to the newest version', async (t) => {
    const schemaUrl = await freshSchema(t, url)
    const loader = process.execArgv.filter((a) => a.includes('@tapjs/typescript'))
    const nodes = [0, 1, 2].map(() => {
      const child = spawn(process.execPath, [...loader, path.join(__dirname, 'pg', 'migrator.ts'), schemaUrl], { stdio: ['pipe', 'pipe', 'inherit'] })
      const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
      return { child, lines, exited }
    })
    t.teardown(() => nodes.forEach((n) => n.child.kill('SIGKILL')))
    for (const n of nodes) t.equal((await n.lines.next()).value, 'ready')
    for (const n of nodes) n.child.stdin.write('go\n')
    const applied = await Promise.all(nodes.map(async (n) => JSON.parse((await n.lines.next()).value as string) as number[]))
    t.same(await Promise.all(nodes.map((n) => n.exited)), [0, 0, 0])
    const all = applied.flat().sort((a, b) => a - b)
    t.same(
      all,
      PG_MIGRATIONS.map((m) => m.version),
      `every migration applied by exactly one node (${applied.map((a) => a.length).join(', ')})`,
    )
    const recorded = await admin(schemaUrl, 'SELECT version FROM schema_migrations ORDER BY version')
    t.same(
      recorded.rows.map((r: { version: number }) => r.version),
      MIGRATIONS.map((m) => m.version),
    )

    const again = new PgBridge({ url: schemaUrl })
    t.teardown(() => again.close())
    t.same(migratePg(again), [], 'a later start applies nothing')
    t.throws(() => migratePg(again, PG_MIGRATIONS.slice(0, 5)), SchemaTooNewError, 'an older build refuses a newer schema')
    t.same((await admin(schemaUrl, 'SELECT pg_try_advisory_lock(2344861562653042021) AS ok')).rows, [{ ok: true }], 'the lock was released')
  })

  t.test("the same tables, columns, indexes and triggers as SQLite's schema", async (t) => {
    const schemaUrl = await freshSchema(t, url)
    const bridge = new PgBridge({ url: schemaUrl })
    t.teardown(() => bridge.close())
    migratePg(bridge)
    const sqlite = openDatabase(path.join(tempDir(t), 'coffer.db'), tempDir(t))
    t.teardown(() => sqlite.close())

    const sqliteColumns = sqlite
      .prepare(
        `SELECT m.name AS tbl, c.name AS col, c.type AS type, c."notnull" OR c.pk > 0 AS required
         FROM sqlite_master m, pragma_table_info(m.name) c
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY 1, 2`,
      )
      .all() as { tbl: string; col: string; type: string; required: number }[]
    const pgColumns = bridge.query(
      `SELECT table_name AS tbl, column_name AS col, data_type AS type, is_nullable = 'NO' AS required
       FROM information_schema.columns WHERE table_schema = current_schema()`,
    ).rows as { tbl: string; col: string; type: string; required: boolean }[]
    const TYPES: Record<string, string[]> = { INTEGER: ['bigint', 'integer'], TEXT: ['text'], BLOB: ['bytea'] }
    const byName = new Map(pgColumns.map((c) => [`${c.tbl}.${c.col}`, c]))
    for (const c of sqliteColumns) {
      const p = byName.get(`${c.tbl}.${c.col}`)
      if (!p) {
        t.fail(`${c.tbl}.${c.col} is missing in PostgreSQL`)
        continue
      }
      byName.delete(`${c.tbl}.${c.col}`)
      if (!TYPES[c.type]?.includes(p.type) || p.required !== (c.required === 1)) {
        t.fail(`${c.tbl}.${c.col}: SQLite ${c.type}${c.required ? ' NOT NULL' : ''}, PostgreSQL ${p.type}${p.required ? ' NOT NULL' : ''}`)
      }
    }
    t.same(
      [...new Set([...byName.values()].map((c) => c.tbl))],
      PG_ONLY.tables,
      'no column in PostgreSQL that SQLite has not, but the tables of PostgreSQL alone',
    )
    t.ok(sqliteColumns.length > 100, `${sqliteColumns.length} columns compared`)

    const sqliteIndexes = (
      sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name").pluck().all() as string[]
    ).sort()
    const pgIndexes = (
      bridge.query(`SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()
         AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE connamespace = current_schema()::regnamespace)`).rows as { indexname: string }[]
    )
      .map((r) => r.indexname)
      .sort()
    t.same(pgIndexes, sqliteIndexes, 'the same named indexes (primary keys and UNIQUE constraints are their own)')

    const sqliteTriggers = (sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'").pluck().all() as string[]).sort()
    const pgTriggers = (
      bridge.query('SELECT DISTINCT trigger_name AS name FROM information_schema.triggers WHERE trigger_schema = current_schema()').rows as { name: string }[]
    )
      .map((r) => r.name)
      .filter((n) => !PG_ONLY.triggers.includes(n))
      .sort()
    t.same(pgTriggers, sqliteTriggers, 'the same triggers')
  })
})
