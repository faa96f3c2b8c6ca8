// What the tests of the shipped artifacts (dist/coffer.cjs, dist/coffer) ask of the PostgreSQL
// bridge inside them (#30), through the hidden `coffer __pg-bridge` (src/cli/pg-bridge.ts): a
// query, transactions that commit, one that fails and rolls back, one nested (a savepoint).
import { spawnSync } from 'node:child_process'
import type { Test } from 'tap'
import { admin, freshSchema } from './fixture'

/** Records, on stderr, each worker thread the process starts and each SEA asset it reads (`--require` it). */
export const PROBE_PRELOAD = `process.stderr.write('probe: on\\n')
process.on('worker', (w) => process.stderr.write('probe: thread ' + w.threadName + '\\n'))
try {
  const sea = require('node:sea')
  const getAsset = sea.getAsset
  sea.getAsset = (key, ...rest) => (process.stderr.write('probe: asset ' + key + '\\n'), getAsset(key, ...rest))
} catch {}
`

/**
 * Runs `command args… __pg-bridge` in `cwd` with nothing but PATH (no NODE_PATH, no node_modules
 * near it) and checks its answers against a schema of its own, read back with a client of the
 * test's. Returns the command's stderr (what PROBE_PRELOAD wrote, given NODE_OPTIONS).
 */
export async function checkBridge(t: Test, url: string, run: { command: string; args: string[]; cwd: string; env?: Record<string, string> }): Promise<string> {
  const schemaUrl = await freshSchema(t, url)
  const big = 2 ** 53 - 1
  const script = {
    url: schemaUrl,
    steps: [
      { sql: 'SELECT $1::int + 1 AS n, current_schema() AS s', params: [41] },
      { sql: 'CREATE TABLE kv (k TEXT PRIMARY KEY, v BYTEA, n BIGINT)' },
      {
        transaction: [
          { sql: 'INSERT INTO kv VALUES ($1, $2, $3)', params: ['a', '\\x0102', big] },
          { sql: "INSERT INTO kv VALUES ('b', '\\x00ff'::bytea, 2)" },
        ],
      },
      { transaction: [{ sql: "INSERT INTO kv VALUES ('c', NULL, 3)" }, { sql: "INSERT INTO kv VALUES ('a', NULL, 4)" }] },
      { transaction: [{ sql: "INSERT INTO kv VALUES ('d', NULL, 5)" }, { transaction: [{ sql: "INSERT INTO kv VALUES ('e', NULL, 6)" }] }] },
      { sql: 'SELECT k, v, n FROM kv ORDER BY k' },
    ],
  }
  const r = spawnSync(run.command, [...run.args, '__pg-bridge'], {
    cwd: run.cwd,
    input: JSON.stringify(script),
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: '/usr/bin:/bin', ...run.env },
  })
  const lines = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
  t.equal(r.status, 1, `exit 1: one step failed (${r.stderr.trim()})`)
  t.equal(lines.length, 6, 'one line per step')
  const schema = new URL(schemaUrl).searchParams.get('options')!.split('=')[1]
  t.same(lines[0], { rows: [{ n: 42, s: schema }], rowCount: 1 }, 'a query with a parameter, on the connection the URL describes')
  t.same(
    lines[2],
    {
      results: [
        { rows: [], rowCount: 1 },
        { rows: [], rowCount: 1 },
      ],
    },
    'a transaction commits',
  )
  t.match(lines[3], { error: { code: '23505', message: /duplicate key/ } }, 'a failed statement: its SQLSTATE')
  t.same(lines[4], { results: [{ rows: [], rowCount: 1 }, { results: [{ rows: [], rowCount: 1 }] }] }, 'a nested transaction (a savepoint)')
  const rows = (lines[5] as { rows: { k: string; v: { type: string; data: number[] } | null; n: number }[] }).rows
  t.same(
    rows.map((row) => row.k),
    ['a', 'b', 'd', 'e'],
    "the failed transaction's first insert was rolled back",
  )
  t.equal(rows[0]!.n, big, 'bigint as a number (the type parser runs in the worker bundle)')
  t.same(
    [rows[0]!.v, rows[1]!.v],
    [
      { type: 'Buffer', data: [1, 2] },
      { type: 'Buffer', data: [0, 255] },
    ],
    'bytea as Buffers',
  )
  const seen = await admin(schemaUrl, 'SELECT k FROM kv ORDER BY k')
  t.same(
    seen.rows.map((row: { k: string }) => row.k),
    ['a', 'b', 'd', 'e'],
    'another connection sees what was committed, and only that',
  )
  return r.stderr
}
