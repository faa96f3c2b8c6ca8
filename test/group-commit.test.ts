// Group commit: an acknowledgement waits for the WAL flush that covers its commit, concurrent
// commits share flushes, and a failed flush fails the acknowledgement (and every later one).
import t, { type Test } from 'tap'
import path from 'node:path'
import { openDatabase } from '../src/db/database'
import { GroupCommit } from '../src/db/group-commit'
import { datasyncFile } from '../src/lib/durable'
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

t.test('concurrent commits share WAL flushes, and none resolves before the flush that covers it', async (t) => {
  const { db, insert, count } = openTestDb(t)
  const { sync, calls } = gatedSync()
  const commits = new GroupCommit(db, sync)
  const runs = Array.from({ length: 20 }, (_, i) => tracked(commits.run(() => insert.run(i))))
  await tick()
  t.equal(count(), 20, 'every transaction is committed at once')
  t.equal(calls.length, 1, 'one flush is running, for the first commit')
  t.ok(calls[0]!.file.endsWith('test.db-wal'), 'it flushes the WAL')
  t.equal(runs.filter((r) => r.state.settled).length, 0, 'nothing is acknowledged before a flush has finished')
  t.equal(db.pragma('synchronous', { simple: true }), 2, 'the connection is back to synchronous=FULL for other writes')

  calls[0]!.release()
  await runs[0]!.done
  await tick()
  t.equal(runs.filter((r) => r.state.settled).length, 1, 'the first flush acknowledges only the commit made before it started')
  t.equal(calls.length, 2, 'the 19 commits made while it ran share one second flush')
  calls[1]!.release()
  await Promise.all(runs.map((r) => r.done))
  t.ok(
    runs.every((r) => r.state.error === undefined),
    'all acknowledged',
  )
  t.equal(calls.length, 2, 'two flushes for twenty commits')
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
  // Polled, not a fixed wait: on a loaded machine the PUT takes a while to reach its commit.
  for (let i = 0; i < 250 && core.db.prepare('SELECT status FROM files WHERE id = ?').pluck().get(h.fileId) !== 'completed'; i++) await tick()
  await tick()
  t.equal(gate.calls.length, 1, "the PUT's flush waits for the one running, which may have started before its commit")
  t.notOk(put.state.settled, 'no 200 while the flush running does not cover the commit')
  gate.calls[0]!.release()
  for (let i = 0; i < 250 && gate.calls.length < 2; i++) await tick()
  t.equal(gate.calls.length, 2, 'the PUT waits for its own flush')
  await tick()
  t.notOk(put.state.settled, 'no 200 before the flush has finished')
  const row = core.db.prepare('SELECT status FROM files WHERE id = ?').get(h.fileId) as { status: string }
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
