// @suites: sqlite
import t, { type Test } from 'tap'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { openDatabase } from '../src/db/database'
import { constraintViolated, engineOf, type Engine } from '../src/db/engine'
import { PgBridge } from '../src/db/pg/bridge'
import { ATTEMPTS, PgEngine } from '../src/db/pg/engine'
import { migratePg } from '../src/db/pg/migrate'
import { freshSchema, withPg } from './pg/fixture'
import { tempDir } from './helper'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

// The PostgreSQL engine's transaction against the fixture (#30): a serialization failure or a
// deadlock, caused by another connection that really conflicts, runs the transaction again, a
// bounded number of times; and constraint violations, one kind on both databases.

function bridge(t: Test, url: string): PgBridge {
  const b = new PgBridge({ url })
  t.teardown(() => b.close())
  return b
}

withPg(t, 'the engine against PostgreSQL', (url) => {
  t.test('a serialization failure (40001) runs the transaction again, and no update is lost', async (t) => {
    const schemaUrl = await freshSchema(t, url)
    const engine = new PgEngine(bridge(t, schemaUrl))
    const other = new PgEngine(bridge(t, schemaUrl))
    engine.prepare('CREATE TABLE counter (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)').run()
    engine.prepare('INSERT INTO counter VALUES (1, 0)').run()
    const read = engine.pluck<[], number>('SELECT n FROM counter WHERE id = 1')
    const write = engine.prepare<[number]>('UPDATE counter SET n = ? WHERE id = 1')
    let runs = 0
    const result = engine.transaction(() => {
      runs++
      // REPEATABLE READ: the snapshot is the first read's, and an update of a row another
      // transaction changed since is refused with 40001 instead of overwriting it.
      engine.prepare('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ').run()
      const n = read.get()!
      // Another node adds 100 meanwhile, on the first run only (its own connection, committed at once).
      if (runs === 1) other.prepare('UPDATE counter SET n = n + 100 WHERE id = 1').run()
      write.run(n + 1)
      return n
    })
    t.equal(runs, 2, 'run twice')
    t.equal(result, 100, "the second run read the other node's update")
    t.equal(read.get(), 101, 'both updates are there')
  })

  t.test('a conflict on every run: the transaction gives up after ATTEMPTS runs with 40001, and nothing of it stays', async (t) => {
    const schemaUrl = await freshSchema(t, url)
    const engine = new PgEngine(bridge(t, schemaUrl))
    const other = new PgEngine(bridge(t, schemaUrl))
    engine.prepare('CREATE TABLE counter (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)').run()
    engine.prepare('CREATE TABLE log (run INTEGER NOT NULL)').run()
    engine.prepare('INSERT INTO counter VALUES (1, 0)').run()
    let runs = 0
    t.match(
      t.throws(() =>
        engine.transaction(() => {
          runs++
          engine.prepare('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ').run()
          engine.prepare('INSERT INTO log VALUES (?)').run(runs)
          engine.prepare('SELECT n FROM counter WHERE id = 1').get()
          other.prepare('UPDATE counter SET n = n + 1 WHERE id = 1').run()
          engine.prepare('UPDATE counter SET n = 0 WHERE id = 1').run()
        }),
      ),
      { name: 'PgError', code: '40001' },
    )
    t.equal(runs, ATTEMPTS, `${ATTEMPTS} runs, no more`)
    t.same(engine.prepare('SELECT count(*)::int AS n FROM log').get(), { n: 0 }, 'every run rolled back')
    t.same(engine.prepare('SELECT n FROM counter').get(), { n: ATTEMPTS }, "the other node's updates stand")
  })

  t.test('other errors are not retried: a unique violation fails at once', async (t) => {
    const engine = new PgEngine(bridge(t, await freshSchema(t, url)))
    engine.prepare('CREATE TABLE x (id INTEGER PRIMARY KEY)').run()
    let runs = 0
    t.match(
      t.throws(() =>
        engine.transaction(() => {
          runs++
          engine.prepare('INSERT INTO x VALUES (1), (1)').run()
        }),
      ),
      { code: '23505' },
    )
    t.equal(runs, 1)
  })

  t.test('a deadlock (40P01) with another node runs the transaction again, inside a nested one too', async (t) => {
    const schemaUrl = await freshSchema(t, url)
    const engine = new PgEngine(bridge(t, schemaUrl))
    engine.prepare('CREATE TABLE r (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)').run()
    engine.prepare('INSERT INTO r VALUES (1, 0), (2, 0)').run()
    // The other node: its own thread and connection (this thread blocks in the bridge while it
    // waits for a lock). It locks row 2, says so, then wants row 1, which this node holds: a
    // deadlock. PostgreSQL ends the transaction of the backend that detects it, the one that
    // waited deadlock_timeout first: this node's, which began waiting first.
    const flag = new Int32Array(new SharedArrayBuffer(4))
    const worker = new Worker(
      `const pg = require('pg')
       const { workerData } = require('node:worker_threads')
       const flag = new Int32Array(workerData.flag)
       const c = new pg.Client({ connectionString: workerData.url })
       ;(async () => {
         await c.connect()
         await c.query('BEGIN')
         await c.query('UPDATE r SET n = n + 10 WHERE id = 2')
         Atomics.store(flag, 0, 1)
         Atomics.notify(flag, 0)
         await new Promise((resolve) => setTimeout(resolve, 300))
         await c.query('UPDATE r SET n = n + 10 WHERE id = 1')
         await c.query('COMMIT')
         await c.end()
         Atomics.store(flag, 0, 2)
         Atomics.notify(flag, 0)
       })().catch((err) => {
         Atomics.store(flag, 0, 3)
         Atomics.notify(flag, 0)
         throw err
       })`,
      { eval: true, workerData: { url: schemaUrl, flag: flag.buffer } },
    )
    const ended = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
    let runs = 0
    const started = Date.now()
    engine.transaction(() =>
      engine.transaction(() => {
        runs++
        engine.prepare('UPDATE r SET n = n + 1 WHERE id = 1').run()
        if (runs === 1) Atomics.wait(flag, 0, 0, 10_000)
        engine.prepare('UPDATE r SET n = n + 1 WHERE id = 2').run()
      }),
    )
    await ended
    t.equal(Atomics.load(flag, 0), 2, 'the other node committed')
    t.equal(runs, 2, 'run twice')
    t.ok(Date.now() - started >= 900, 'the first run waited for the deadlock to be detected')
    t.same(engine.prepare('SELECT id, n FROM r ORDER BY id').all(), [
      { id: 1, n: 11 },
      { id: 2, n: 11 },
    ])
  })
})

/** Violates each kind of constraint of the schema; returns what constraintViolated said of each error. */
function violations(t: Test, engine: Engine): unknown[] {
  const run = (sql: string, ...params: unknown[]) => engine.prepare(sql).run(...params)
  const tenant = `INSERT INTO tenants (id, name, name_key, key_hash, key_kind, webhook_secret, quota_bytes, allowed_types, created_at)
    VALUES (?, ?, ?, ?, 'live', 'w', ?, '[]', 1)`
  run(tenant, 't1', 'one', 'one', Buffer.alloc(32, 1), 10)
  const kinds: unknown[] = []
  const kind = (what: string, fn: () => unknown) => {
    const err = t.throws(fn, what)
    kinds.push([what, constraintViolated(err)])
  }
  kind('a primary key taken', () => run(tenant, 't1', 'other', 'other', Buffer.alloc(32, 2), 10))
  kind('a unique index', () => run(tenant, 't2', 'One', 'one', Buffer.alloc(32, 2), 10))
  kind('a foreign key', () => run(`INSERT INTO workspaces (id, tenant_id, name, slug, created_at, updated_at) VALUES ('w', 'nobody', 'w', 'w', 1, 1)`))
  kind('a check', () => run(tenant, 't3', 'three', 'three', Buffer.alloc(32, 3), -1))
  kind('not null', () => run(tenant, 't4', null, 'four', Buffer.alloc(32, 4), 1))
  kind('not a constraint', () => run('SELECT * FROM no_such_table'))
  kinds.push(constraintViolated(new Error('x')), constraintViolated(Object.assign(new Error('x'), { code: '23505' })), constraintViolated('23505'))
  // Going on after a violation inside a transaction: the statement in a nested transaction (a
  // savepoint), which PostgreSQL needs (its transaction is otherwise aborted) and SQLite takes alike.
  engine.transaction(() => {
    try {
      engine.transaction(() => run(tenant, 't1', 'dup', 'dup', Buffer.alloc(32, 5), 1))
    } catch (err) {
      if (constraintViolated(err) !== 'unique') throw err
      kinds.push('caught')
    }
    run(tenant, 't5', 'five', 'five', Buffer.alloc(32, 5), 1)
  })
  kinds.push(engine.pluck('SELECT id FROM tenants ORDER BY id').all())
  return kinds
}

t.test('constraint violations are one kind on SQLite and on PostgreSQL', async (t) => {
  let onSqlite: unknown[] = []
  await t.test('SQLite', async (t) => {
    const dir = tempDir(t)
    const db = openDatabase(path.join(dir, 'coffer.db'), dir)
    t.teardown(() => db.close())
    onSqlite = violations(t, engineOf(db))
    t.same(onSqlite.slice(0, 9), [
      ['a primary key taken', 'unique'],
      ['a unique index', 'unique'],
      ['a foreign key', 'foreign-key'],
      ['a check', 'check'],
      ['not null', 'not-null'],
      ['not a constraint', undefined],
      undefined,
      undefined,
      undefined,
    ])
    t.same(onSqlite.slice(9), ['caught', ['t1', 't5']], 'a violation caught in a nested transaction, and the outer one goes on')
  })
  withPg(t, 'PostgreSQL', (url) => {
    void t.test('PostgreSQL', async (t) => {
      const b = bridge(t, await freshSchema(t, url))
      migratePg(b)
      t.same(violations(t, new PgEngine(b)), onSqlite, "PostgreSQL's answers are SQLite's")
    })
  })
})
