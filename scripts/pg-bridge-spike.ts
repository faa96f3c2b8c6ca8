// The measurement behind README's "Metadata in PostgreSQL": what a statement costs through the
// synchronous bridge (src/db/pg/bridge.ts) against async `pg` straight from the event loop and
// against better-sqlite3, on the same machine. Run it with `node scripts/pg-bridge-spike.mjs`
// (it bundles this file and the bridge's worker, and needs COFFER_DATABASE_URL, e.g. from
// `scripts/pg-fixture.sh env`). Prints µs per statement, mean over N after a warm-up.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'
import { PgBridge } from '../src/db/pg/bridge'

const url = process.env.COFFER_DATABASE_URL
if (!url) throw new Error('COFFER_DATABASE_URL is not set (scripts/pg-fixture.sh env)')
const N = Number(process.env.SPIKE_N ?? 5000)
const WARM = 500
// A service transaction as the upload path runs one: read the tenant, insert two rows, update one.
const TX_N = Math.round(N / 5)

const table = `spike_${process.pid}`
const create = (blob: string) => `CREATE TABLE ${table} (id BIGINT PRIMARY KEY, name TEXT NOT NULL, size BIGINT NOT NULL, body ${blob})`
const body = Buffer.alloc(64, 7)

/** Wall-clock µs per operation, and this process's CPU µs (all its threads: the bridge's worker too). */
interface Cost {
  wall: number
  cpu: number
}

interface Figures {
  select: Cost
  insert: Cost
  tx: Cost
}

const cpuNow = () => {
  const u = process.cpuUsage()
  return u.user + u.system
}

function time(n: number, fn: (i: number) => void): Cost {
  for (let i = 0; i < WARM; i++) fn(-1 - i)
  const t0 = process.hrtime.bigint()
  const c0 = cpuNow()
  for (let i = 0; i < n; i++) fn(i)
  return { wall: Number(process.hrtime.bigint() - t0) / 1000 / n, cpu: (cpuNow() - c0) / n }
}

async function timeAsync(n: number, fn: (i: number) => Promise<void>): Promise<Cost> {
  for (let i = 0; i < WARM; i++) await fn(-1 - i)
  const t0 = process.hrtime.bigint()
  const c0 = cpuNow()
  for (let i = 0; i < n; i++) await fn(i)
  return { wall: Number(process.hrtime.bigint() - t0) / 1000 / n, cpu: (cpuNow() - c0) / n }
}

function sqlite(): Figures {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-spike-'))
  const db = new Database(path.join(dir, 'spike.db'))
  db.pragma('journal_mode = WAL')
  // NORMAL: the fixture's PostgreSQL runs with fsync off, so neither side pays for a flush here.
  db.pragma('synchronous = NORMAL')
  db.exec(create('BLOB'))
  const ins = db.prepare(`INSERT INTO ${table} (id, name, size, body) VALUES (?, ?, ?, ?)`)
  const sel = db.prepare(`SELECT id, name, size, body FROM ${table} WHERE id = ?`)
  const upd = db.prepare(`UPDATE ${table} SET size = size + 1 WHERE id = ?`)
  for (let i = 0; i < N; i++) ins.run(1e9 + i, `row ${i}`, i, body)
  const insert = time(N, (i) => ins.run(i, `row ${i}`, i, body))
  const select = time(N, (i) => void sel.get(1e9 + (Math.abs(i) % N)))
  const tx = time(TX_N, (i) =>
    db
      .transaction(() => {
        sel.get(1e9 + (Math.abs(i) % N))
        ins.run(2e9 + i * 2, 'a', 1, body)
        ins.run(2e9 + i * 2 + 1, 'b', 1, body)
        upd.run(1e9)
      })
      .immediate(),
  )
  db.close()
  fs.rmSync(dir, { recursive: true, force: true })
  return { select, insert, tx }
}

function bridge(): Figures {
  const b = new PgBridge({ url: url! })
  b.exec(create('BYTEA'))
  try {
    const ins = `INSERT INTO ${table} (id, name, size, body) VALUES ($1, $2, $3, $4)`
    const sel = `SELECT id, name, size, body FROM ${table} WHERE id = $1`
    for (let i = 0; i < N; i++) b.query(ins, [1e9 + i, `row ${i}`, i, body])
    const insert = time(N, (i) => void b.query(ins, [i, `row ${i}`, i, body]))
    const select = time(N, (i) => void b.query(sel, [1e9 + (Math.abs(i) % N)]))
    const tx = time(TX_N, (i) =>
      b.transaction(() => {
        b.query(sel, [1e9 + (Math.abs(i) % N)])
        b.query(ins, [2e9 + i * 2, 'a', 1, body])
        b.query(ins, [2e9 + i * 2 + 1, 'b', 1, body])
        b.query(`UPDATE ${table} SET size = size + 1 WHERE id = $1`, [1e9])
      }),
    )
    return { select, insert, tx }
  } finally {
    b.exec(`DROP TABLE ${table}`)
    b.close()
  }
}

async function direct(): Promise<Figures> {
  pg.types.setTypeParser(pg.types.builtins.INT8, Number)
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  await c.query(create('BYTEA'))
  try {
    const ins = `INSERT INTO ${table} (id, name, size, body) VALUES ($1, $2, $3, $4)`
    const sel = `SELECT id, name, size, body FROM ${table} WHERE id = $1`
    for (let i = 0; i < N; i++) await c.query(ins, [1e9 + i, `row ${i}`, i, body])
    const insert = await timeAsync(N, async (i) => void (await c.query(ins, [i, `row ${i}`, i, body])))
    const select = await timeAsync(N, async (i) => void (await c.query(sel, [1e9 + (Math.abs(i) % N)])))
    const tx = await timeAsync(TX_N, async (i) => {
      await c.query('BEGIN')
      await c.query(sel, [1e9 + (Math.abs(i) % N)])
      await c.query(ins, [2e9 + i * 2, 'a', 1, body])
      await c.query(ins, [2e9 + i * 2 + 1, 'b', 1, body])
      await c.query(`UPDATE ${table} SET size = size + 1 WHERE id = $1`, [1e9])
      await c.query('COMMIT')
    })
    return { select, insert, tx }
  } finally {
    await c.query(`DROP TABLE ${table}`)
    await c.end()
  }
}

async function main(): Promise<void> {
  const rows: [string, Figures][] = []
  rows.push(['better-sqlite3', sqlite()])
  rows.push(['pg, async', await direct()])
  rows.push(['pg through the bridge', bridge()])
  const f = (x: Cost) => `${x.wall.toFixed(0).padStart(6)} /${x.cpu.toFixed(0).padStart(5)}`
  console.log(`N=${N} (transactions: ${TX_N}), ${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)}`)
  console.log('µs per statement (per transaction in the last column): wall clock / CPU of this process (all its threads)')
  console.log(`${'engine'.padEnd(24)}  SELECT by pk       INSERT   tx: SELECT, 2 INSERT, UPDATE`)
  for (const [name, x] of rows) console.log(`${name.padEnd(24)}${f(x.select)}  ${f(x.insert)}  ${f(x.tx)}`)
}

void main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})
