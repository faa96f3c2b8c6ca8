// @suites: sqlite
import t, { type Test } from 'tap'
import net from 'node:net'
import { PgBridge } from '../src/db/pg/bridge'
import { PgEngine } from '../src/db/pg/engine'
import { PgError } from '../src/db/pg/errors'
import { toPgParams } from '../src/db/pg/placeholders'
import { admin, freshSchema, withPg } from './pg/fixture'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

// The synchronous bridge to PostgreSQL (#30): results as better-sqlite3 gives them, errors as
// SQLSTATEs, transactions, and what happens when the server is slow, gone or never answers.

t.test('placeholders: ? and @name become $n outside literals, identifiers and comments', async (t) => {
  t.same(toPgParams('SELECT ? FROM x WHERE a = \'?\' AND "b?" = ? -- ?\n AND c = ?'), {
    text: 'SELECT $1 FROM x WHERE a = \'?\' AND "b?" = $2 -- ?\n AND c = $3',
    names: undefined,
    count: 3,
  })
  t.same(toPgParams("UPDATE t SET a = @name, b = @name, c = @id, d = 'it''s @x' /* @y */"), {
    text: "UPDATE t SET a = $1, b = $1, c = $2, d = 'it''s @x' /* @y */",
    names: ['name', 'id'],
    count: 2,
  })
  t.same(toPgParams('SELECT x::bigint FROM t').text, 'SELECT x::bigint FROM t')
  t.throws(() => toPgParams('SELECT ? WHERE a = @a'), /cannot mix/)
})

withPg(t, 'the bridge against PostgreSQL', (url) => {
  const bridge = (t: Test, opts: { url: string; statementTimeoutMs?: number; connectTimeoutMs?: number }) => {
    const b = new PgBridge(opts)
    t.teardown(() => b.close())
    return b
  }

  t.test('rows as better-sqlite3 gives them: bigint as number, bytea as Buffer, NULL as null', async (t) => {
    const b = bridge(t, { url: await freshSchema(t, url) })
    b.exec('CREATE TABLE r (id BIGINT PRIMARY KEY, body BYTEA, note TEXT)')
    const big = Date.now() * 1000
    t.equal(b.query('INSERT INTO r VALUES ($1, $2, $3), ($4, NULL, NULL)', [big, Buffer.from([0, 1, 255]), 'x', 2]).rowCount, 2)
    const rows = b.query('SELECT id, body, note FROM r ORDER BY id').rows
    t.same(rows[0], { id: 2, body: null, note: null })
    t.equal(rows[1]!.id, big)
    t.ok(Buffer.isBuffer(rows[1]!.body), 'a Buffer, not the Uint8Array that crossed the thread')
    t.same([...(rows[1]!.body as Buffer)], [0, 1, 255])
    t.same(b.query('SELECT id, note FROM r WHERE id = $1', [big]).fields, ['id', 'note'])
    t.throws(
      () => b.query('SELECT 9007199254740993::bigint AS n'),
      { code: '22003', message: /beyond JavaScript's exact integers/ },
      'a bigint past 2^53 is refused, not rounded',
    )
    t.same(b.query('SELECT 1 AS one').rows, [{ one: 1 }], 'on a connection that goes on')
  })

  t.test("errors carry PostgreSQL's SQLSTATE, and the connection goes on", async (t) => {
    const b = bridge(t, { url: await freshSchema(t, url) })
    b.exec('CREATE TABLE u (id TEXT PRIMARY KEY)')
    b.query('INSERT INTO u VALUES ($1)', ['a'])
    const dup = t.throws(() => b.query('INSERT INTO u VALUES ($1)', ['a'])) as PgError
    t.ok(dup instanceof PgError)
    t.equal(dup.code, '23505')
    t.equal(dup.constraint, 'u_pkey')
    t.match(
      t.throws(() => b.query('SELEKT 1')),
      { code: '42601' },
    )
    t.match(
      t.throws(() => b.query('SELECT * FROM missing')),
      { code: '42P01' },
    )
    t.same(b.query('SELECT count(*)::int AS n FROM u').rows, [{ n: 1 }])
  })

  t.test('a transaction commits when its function returns and rolls back when it throws', async (t) => {
    const b = bridge(t, { url: await freshSchema(t, url) })
    b.exec('CREATE TABLE x (id INT PRIMARY KEY)')
    t.equal(
      b.transaction(() => {
        b.query('INSERT INTO x VALUES (1)')
        return 'done'
      }),
      'done',
    )
    t.throws(
      () =>
        b.transaction(() => {
          b.query('INSERT INTO x VALUES (2)')
          b.query('INSERT INTO x VALUES (1)') // 23505: the whole transaction goes
        }),
      { code: '23505' },
    )
    t.throws(() =>
      b.transaction(() => {
        b.query('INSERT INTO x VALUES (3)')
        throw new Error('the caller changed its mind')
      }),
    )
    t.same(b.query('SELECT id FROM x ORDER BY id').rows, [{ id: 1 }])
    // The engine nests as better-sqlite3 does: an inner failure undoes the inner part only.
    const engine = new PgEngine(b)
    engine.transaction(() => {
      engine.prepare('INSERT INTO x VALUES (?)').run(4)
      t.throws(() =>
        engine.transaction(() => {
          engine.prepare('INSERT INTO x VALUES (?)').run(5)
          throw new Error('inner')
        }),
      )
    })
    t.same(b.query('SELECT id FROM x ORDER BY id').rows, [{ id: 1 }, { id: 4 }])
  })

  t.test('a statement past the statement timeout is cancelled by the server: 57014', async (t) => {
    const b = bridge(t, { url, statementTimeoutMs: 200 })
    b.query('SELECT 1') // the worker started and connected: the time below is the statement's
    const t0 = Date.now()
    t.match(
      t.throws(() => b.query('SELECT pg_sleep(5)')),
      { code: '57014' },
    )
    t.ok(Date.now() - t0 < 3000, `cancelled after ${Date.now() - t0} ms`)
    t.same(b.query('SELECT 1 AS one').rows, [{ one: 1 }], 'and the connection serves the next statement')
  })

  t.test('no server: 08001 at once; a connection the server ends: replaced, and its transaction rolled back', async (t) => {
    const closed = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (s.address() as net.AddressInfo).port
        s.close(() => resolve(port))
      })
    })
    const u = new URL(url)
    u.port = String(closed)
    const nowhere = bridge(t, { url: u.toString() })
    t.match(
      t.throws(() => nowhere.query('SELECT 1')),
      { code: '08001' },
    )

    // An idle connection the server ended is replaced without the caller noticing.
    const b = bridge(t, { url: await freshSchema(t, url) })
    const pidOf = () => b.query('SELECT pg_backend_pid() AS pid').rows[0]!.pid as number
    const first = pidOf()
    await admin(url, 'SELECT pg_terminate_backend($1)', [first])
    const second = pidOf()
    t.not(second, first, 'a new connection')

    // One ended inside a transaction fails that transaction, which PostgreSQL rolled back.
    b.exec('CREATE TABLE y (id INT)')
    t.throws(() =>
      b.transaction(() => {
        b.query('INSERT INTO y VALUES (1)')
        b.query('SELECT pg_terminate_backend(pg_backend_pid())')
      }),
    )
    t.same(b.query('SELECT count(*)::int AS n FROM y').rows, [{ n: 0 }], 'nothing of it committed, and the bridge reconnected')
    const third = pidOf()
    t.not(third, second)

    // Lost between two statements of a transaction whose function goes on after the error: what
    // follows is refused, never run in autocommit on a new connection (a partial write).
    const other = bridge(t, { url })
    t.throws(
      () =>
        b.transaction(() => {
          b.query('INSERT INTO y VALUES (2)')
          other.query('SELECT pg_terminate_backend($1)', [third])
          t.throws(() => b.query('INSERT INTO y VALUES (3)'), { code: /^(08006|57P01)$/ })
          t.throws(() => b.query('INSERT INTO y VALUES (4)'), { code: '08006', message: /lost inside a transaction/ })
        }),
      { code: '08006' },
      'and its COMMIT fails',
    )
    t.same(b.query('SELECT count(*)::int AS n FROM y').rows, [{ n: 0 }], 'none of its rows, before or after the loss')
  })

  t.test('a server that never answers: the bridge gives up at its deadline with 08006, and closes', async (t) => {
    const sockets: net.Socket[] = []
    const mute = net.createServer((s) => void sockets.push(s))
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve))
    t.teardown(() => {
      for (const s of sockets) s.destroy()
      mute.close()
    })
    const u = new URL(url)
    u.port = String((mute.address() as net.AddressInfo).port)
    const b = bridge(t, { url: u.toString(), connectTimeoutMs: 60_000 })
    const t0 = Date.now()
    t.match(
      t.throws(() => b.query('SELECT 1', [], 300)),
      { code: '08006', message: /no reply from PostgreSQL within 300 ms/ },
    )
    t.ok(Date.now() - t0 < 5000)
    b.close()
    t.match(
      t.throws(() => b.query('SELECT 1')),
      { code: '08006', message: /closed/ },
    )
  })
})
