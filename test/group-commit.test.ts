// @suites: sqlite
// Group commit: an acknowledgement waits for the WAL flush that covers its commit, concurrent
// commits share flushes, and a failed flush fails the acknowledgement (and every later one).
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { openDatabase } from '../src/db/database'
import { GroupCommit } from '../src/db/group-commit'
import { datasyncFile, KeptOpenSync } from '../src/lib/durable'
import { createTenant, fileBytes, handshake, makeApp, tempDir, type Handshake } from './helper'

/** A WAL flush the test opens by hand: each call waits for its own release(). */
function gatedSync() {
  const calls: { file: string; release: () => void; fail: (err: Error) => void }[] = []
  const sync = (file: string) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ file, release: resolve, fail: reject })
    })
  return { sync, calls }
}

const tick = () => new Promise((r) => setTimeout(r, 20))
/** After the batch scheduled before it (setImmediate), whatever the machine's load. */
const turn = () => new Promise((r) => setImmediate(r))
const eio = () => Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })

function tracked<T>(p: Promise<T>) {
  const state = { settled: false, value: undefined as T | undefined, error: undefined as unknown }
  const done = p.then(
    (v) => {
      state.settled = true
      state.value = v
    },
    (err: unknown) => {
      state.settled = true
      state.error = err
    },
  )
  return { state, done }
}

function openTestDb(t: Test) {
  const dir = tempDir(t)
  const db = openDatabase(path.join(dir, 'test.db'), dir, [{ version: 1, name: 'rows', sql: 'CREATE TABLE rows (n INTEGER NOT NULL) STRICT' }])
  t.teardown(() => db.close())
  const insert = db.prepare('INSERT INTO rows (n) VALUES (?)')
  const count = () => (db.prepare('SELECT count(*) AS c FROM rows').get() as { c: number }).c
  return { db, insert, count, dir }
}

t.test('concurrent commits are one transaction and one WAL flush, and none resolves before the flush that covers it', async (t) => {
  const { db, insert, count } = openTestDb(t)
  const { sync, calls } = gatedSync()
  const commits = new GroupCommit(db, sync)
  const wal = `${db.name}-wal`
  const walBytes = () => fs.statSync(wal).size
  const before = walBytes()
  const runs = Array.from({ length: 20 }, (_, i) => tracked(commits.run(() => insert.run(i))))
  await turn()
  t.equal(count(), 20, 'every transaction is committed')
  // One commit of the table's one page is one WAL frame; twenty commits of it were twenty (#29).
  t.ok(walBytes() - before <= 2 * (24 + 4096), `one transaction wrote the WAL (${walBytes() - before} bytes)`)
  t.equal(calls.length, 1, 'one flush is running, for the batch')
  t.ok(calls[0]!.file.endsWith('test.db-wal'), 'it flushes the WAL')
  t.equal(runs.filter((r) => r.state.settled).length, 0, 'nothing is acknowledged before a flush has finished')
  t.equal(db.pragma('synchronous', { simple: true }), 2, 'the connection is back to synchronous=FULL for other writes')

  // Commits made while a flush runs wait for it, uncommitted, then go as one batch under the next.
  const later = Array.from({ length: 5 }, (_, i) => tracked(commits.run(() => insert.run(100 + i))))
  await tick()
  t.equal(count(), 20, 'the commits made during the flush wait for it to end')
  calls[0]!.release()
  await Promise.all(runs.map((r) => r.done))
  t.ok(
    runs.every((r) => r.state.error === undefined),
    'the first flush acknowledges the whole batch',
  )
  await tick()
  t.equal(count(), 25, 'the waiting commits are committed as the flush ends')
  t.equal(calls.length, 2, 'and share one second flush')
  t.equal(later.filter((r) => r.state.settled).length, 0, 'not acknowledged before it ends')
  calls[1]!.release()
  await Promise.all(later.map((r) => r.done))
  t.ok(
    later.every((r) => r.state.error === undefined),
    'all acknowledged',
  )
  t.equal(calls.length, 2, 'two flushes for twenty-five commits')
})

t.test('a transaction of a batch that throws is rolled back alone; the others commit', async (t) => {
  const { db, insert, count } = openTestDb(t)
  const commits = new GroupCommit(db, datasyncFile)
  const ok1 = commits.run(() => insert.run(1))
  const bad = commits.run(() => {
    insert.run(2)
    insert.run(3)
    throw new Error('refused halfway')
  })
  const ok2 = commits.run(() => {
    insert.run(4)
    return 'four'
  })
  await t.rejects(bad, /refused halfway/)
  await ok1
  t.equal(await ok2, 'four', 'each gets its own result')
  t.same(db.prepare('SELECT n FROM rows ORDER BY n').pluck().all(), [1, 4], 'the failed one left nothing')
  t.equal(count(), 2)
  t.equal(db.pragma('temp_store', { simple: true }), 2, "the savepoints' journals are kept in memory, not written to temp files")
})

t.test('an error that makes SQLite roll back the whole batch fails every transaction of it, and the rest goes on', async (t) => {
  const { db, insert } = openTestDb(t)
  const commits = new GroupCommit(db, datasyncFile)
  const first = commits.run(() => insert.run(1))
  // ROLLBACK inside a transaction ends it, as SQLITE_FULL or SQLITE_IOERR would.
  const breaker = commits.run(() => {
    db.prepare('ROLLBACK').run()
    throw new Error('the transaction is gone')
  })
  const after = commits.run(() => insert.run(3))
  await t.rejects(first, /the transaction is gone/, 'a commit rolled back with its batch is not acknowledged')
  await t.rejects(breaker, /the transaction is gone/)
  await t.resolves(after, 'the transactions after it go in a new one')
  t.same(db.prepare('SELECT n FROM rows ORDER BY n').pluck().all(), [3])
})

t.test('a batch that finds the connection closed (a shutdown) fails its transactions, and the process goes on', async (t) => {
  const dir = tempDir(t)
  const db = openDatabase(path.join(dir, 'test.db'), dir, [{ version: 1, name: 'rows', sql: 'CREATE TABLE rows (n INTEGER NOT NULL) STRICT' }])
  const commits = new GroupCommit(db, datasyncFile)
  const insert = db.prepare('INSERT INTO rows (n) VALUES (?)')
  const pending = commits.run(() => insert.run(1))
  db.close()
  await t.rejects(pending, /not open/)
})

t.test('the WAL is flushed through one descriptor kept open, closed with the group commit', async (t) => {
  const { db, insert } = openTestDb(t)
  const commits = new GroupCommit(db)
  const walFds = () =>
    fs.readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`) === `${db.name}-wal`
      } catch {
        return false
      }
    }).length
  const before = walFds()
  for (let i = 0; i < 3; i++) await commits.run(() => insert.run(i))
  t.equal(walFds(), before + 1, 'three flushes, one descriptor of our own, still open')
  commits.close()
  t.equal(walFds(), before, 'closed with the group commit')
})

t.test('a kept-open file removed meanwhile is reopened by name', async (t) => {
  const dir = tempDir(t)
  const file = path.join(dir, 'f')
  fs.writeFileSync(file, 'a')
  const keeper = new KeptOpenSync(file)
  t.teardown(() => keeper.close())
  await keeper.datasync()
  fs.rmSync(file)
  await t.rejects(keeper.datasync(), { code: 'ENOENT' }, 'the removed file is not flushed as if it counted')
  fs.writeFileSync(file, 'b')
  await t.resolves(keeper.datasync(), 'the new file of that name is')
})

t.test('a failed flush fails its acknowledgements, and every write after it until a restart', async (t) => {
  const { db, insert, count } = openTestDb(t)
  const { sync, calls } = gatedSync()
  const commits = new GroupCommit(db, sync)
  const first = tracked(commits.run(() => insert.run(1)))
  await tick()
  calls[0]!.fail(eio())
  await first.done
  t.match(String(first.state.error), /could not flush the database's write-ahead log.*EIO/)
  let ran = false
  await t.rejects(
    commits.run(() => {
      ran = true
      insert.run(2)
    }),
    /could not flush/,
  )
  t.notOk(ran, 'a later transaction is not even attempted')
  t.equal(count(), 1)
  t.equal(calls.length, 1, 'no further flush')
})

t.test('a commit inside a transaction is refused (the safety level cannot change there)', async (t) => {
  const { db, insert } = openTestDb(t)
  const commits = new GroupCommit(db, datasyncFile)
  let nested: Promise<unknown> | undefined
  db.transaction(() => {
    nested = commits.run(() => insert.run(1))
  })()
  await t.rejects(nested!, /cannot be nested/)
  await t.resolves(
    commits.run(() => insert.run(2)),
    'the real fdatasync of the WAL',
  )
})

t.test('HTTP: the PUT answers only after the WAL flush, the handshake starts one without waiting; a failed flush is a 500, never a 200', async (t) => {
  let mode: 'real' | 'gated' | 'failing' = 'real'
  const gate = gatedSync()
  const { app, core } = await makeApp(
    t,
    {},
    {
      walSync: (file) => (mode === 'real' ? datasyncFile(file) : mode === 'gated' ? gate.sync(file) : Promise.reject(eio())),
    },
  )
  const tenant = await createTenant(app)
  const bytes = fileBytes('image/png', 4096)

  mode = 'gated'
  // The handshake holds no content: it is answered at once (README: Durability), its flush started.
  const hs = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: bytes.length })
  t.equal(hs.statusCode, 200)
  const h = hs.json() as Handshake
  t.equal(gate.calls.length, 1, 'the handshake started a flush, and did not wait for it')

  const put = tracked(app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png' }, payload: bytes }))
  // The PUT's commit waits, uncommitted, for the flush running: it goes in the batch after it.
  for (let i = 0; i < 20; i++) await tick()
  t.equal(gate.calls.length, 1, "the PUT's commit waits for the flush running, which started before it")
  t.equal(core.sqlite!.prepare('SELECT status FROM files WHERE id = ?').pluck().get(h.fileId), 'pending', 'not committed yet')
  t.notOk(put.state.settled, 'no 200 while the flush running does not cover the commit')
  gate.calls[0]!.release()
  for (let i = 0; i < 250 && gate.calls.length < 2; i++) await tick()
  t.equal(gate.calls.length, 2, 'the PUT waits for its own flush')
  await tick()
  t.notOk(put.state.settled, 'no 200 before the flush has finished')
  const row = core.sqlite!.prepare('SELECT status FROM files WHERE id = ?').get(h.fileId) as { status: string }
  t.equal(row.status, 'completed', 'although the row is committed')
  gate.calls[1]!.release()
  await put.done
  t.equal(put.state.value!.statusCode, 200)
  t.equal(put.state.value!.json().processingStatus, 'completed')

  mode = 'real'
  const h2 = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'b.png', fileSizeBytes: bytes.length })).json() as Handshake
  mode = 'failing'
  const failed = await app.inject({ method: 'PUT', url: h2.presignedUrl, headers: { 'content-type': 'image/png' }, payload: fileBytes('image/png', 4096, 2) })
  t.equal(failed.statusCode, 500, 'an upload whose commit could not be made durable is not acknowledged')
  t.equal(failed.json().error.code, 'INTERNAL_ERROR')
  mode = 'real'
  const after = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'c.png' })
  t.equal(after.statusCode, 500, 'uploads are refused until a restart, even once fdatasync works again')
})

t.test("a commit waits for another connection's write lock without blocking the event loop (#29)", async (t) => {
  const { db, dir, insert } = openTestDb(t)
  // Another worker (another process in production; a second connection here) holds the write lock.
  const other = openDatabase(path.join(dir, 'test.db'), dir, [{ version: 1, name: 'rows', sql: 'CREATE TABLE rows (n INTEGER NOT NULL) STRICT' }])
  t.teardown(() => other.close())
  other.prepare('BEGIN IMMEDIATE').run()
  other.prepare('INSERT INTO rows (n) VALUES (1)').run()
  const commits = new GroupCommit(db, datasyncFile)
  const started = Date.now()
  const mine = tracked(commits.run(() => insert.run(2).changes))
  // SQLite's busy handler would sleep in this thread up to the busy timeout: no timer could fire.
  await tick()
  t.equal(mine.state.settled, false, 'still waiting for the lock')
  t.ok(Date.now() - started < 1000, 'and the event loop ran meanwhile')
  other.prepare('COMMIT').run()
  await mine.done
  t.equal(mine.state.value, 1, 'committed once the lock was free')
  t.same(db.prepare('SELECT n FROM rows ORDER BY n').pluck().all(), [1, 2])
  // The connection's own busy timeout is back for every other statement.
  t.equal(db.pragma('busy_timeout', { simple: true }), 5000)
})
