// @suites: sqlite
// COFFER_WRITE_STATS (#29): the group commit's per-stage counters, with which the cross-worker
// write path of `--workers N` was measured (scripts/bench/README.md), count what happened.
import t, { type Test } from 'tap'
import path from 'node:path'
import { openDatabase } from '../src/db/database'
import { GroupCommit } from '../src/db/group-commit'
import { datasyncFile } from '../src/lib/durable'
import { tempDir } from './helper'

const ROWS = [{ version: 1, name: 'rows', sql: 'CREATE TABLE rows (n INTEGER NOT NULL) STRICT' }]

function withStatsEnv(t: Test, value: string | undefined): void {
  const before = process.env.COFFER_WRITE_STATS
  if (value === undefined) delete process.env.COFFER_WRITE_STATS
  else process.env.COFFER_WRITE_STATS = value
  t.teardown(() => {
    if (before === undefined) delete process.env.COFFER_WRITE_STATS
    else process.env.COFFER_WRITE_STATS = before
  })
}

t.test('unset, the group commit keeps no counters', async (t) => {
  withStatsEnv(t, undefined)
  const dir = tempDir(t)
  const db = openDatabase(path.join(dir, 'test.db'), dir, ROWS)
  t.teardown(() => db.close())
  const commits = new GroupCommit(db, datasyncFile)
  t.teardown(() => commits.close())
  t.equal(commits.writeStats, undefined)
})

t.test("batches, flushes and the wait for another connection's write lock are counted", async (t) => {
  withStatsEnv(t, '3600')
  const dir = tempDir(t)
  const file = path.join(dir, 'test.db')
  const db = openDatabase(file, dir, ROWS)
  t.teardown(() => db.close())
  const insert = db.prepare('INSERT INTO rows (n) VALUES (?)')
  const commits = new GroupCommit(db, datasyncFile)
  t.teardown(() => commits.close())
  const stats = commits.writeStats!
  t.ok(stats, 'on')

  // Three commits of one turn: one batch, one flush.
  await Promise.all([1, 2, 3].map((n) => commits.run(() => insert.run(n))))
  const first = stats.snapshot(1)
  t.match(first, { batches: 1, jobsPerBatch: 3, flushes: 1, jobsPerFlush: 3, busy: 0, busyWaits: 0 })
  t.ok(first.walBytes! > 0, 'the WAL size is reported')

  // Another worker (a second connection here) holds the write lock for 150 ms.
  const other = openDatabase(file, dir, ROWS)
  t.teardown(() => other.close())
  other.prepare('BEGIN IMMEDIATE').run()
  other.prepare('INSERT INTO rows (n) VALUES (0)').run()
  const mine = commits.run(() => insert.run(4))
  // The 150 ms count from the batch's first refused BEGIN, which the stats time from: counted from
  // the call instead, a loaded machine's delay before that BEGIN was taken off the wait measured.
  for (let turns = 0; stats.busy < 1; turns++) {
    if (turns > 10_000) throw new Error('the batch never tried to take the lock')
    await new Promise((r) => setImmediate(r))
  }
  await new Promise((r) => setTimeout(r, 150))
  other.prepare('COMMIT').run()
  await mine
  const second = stats.snapshot(1)
  t.equal(second.batches, 1)
  t.ok(second.busy! >= 1, `the BEGIN found the lock held (${second.busy} times)`)
  t.equal(second.busyWaits, 1, 'one batch waited')
  t.ok(second.busyWaitMsAvg! >= 140, `for as long as the lock was held (${second.busyWaitMsAvg} ms)`)
  t.match(stats.snapshot(1), { batches: 0, flushes: 0, busy: 0 }, 'a snapshot resets the counters')
})
