// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { tempDir } from './helper'

// coffer.db holds small files' content and webhook secrets: it and the files SQLite keeps beside
// it are 0600, like `secret`, whatever the umask and the data dir's own mode (#24).

const modeOf = (file: string) => fs.statSync(file).mode & 0o777
const DB_FILES = ['coffer.db', 'coffer.db-wal', 'coffer.db-shm']

t.test('a new database and its -wal and -shm are created 0600, in a data dir made 0755 beforehand', async (t) => {
  const umask = process.umask(0o022)
  t.teardown(() => process.umask(umask))
  const dir = path.join(tempDir(t), 'data')
  fs.mkdirSync(dir, { mode: 0o755 })
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  t.teardown(() => core.close())
  // A write, so the WAL has content while the server runs.
  core.sqlite!.exec('CREATE TABLE IF NOT EXISTS probe (n INTEGER)')
  for (const name of DB_FILES) t.equal(modeOf(path.join(dir, name)), 0o600, name)
  t.equal(modeOf(path.join(dir, 'secret')), 0o600, 'secret')
})

t.test('a database an older coffer left readable by others is tightened when it is opened', async (t) => {
  const dir = path.join(tempDir(t), 'data')
  const first = createCore(loadConfig({}, { 'data-dir': dir }))
  t.teardown(() => first.close())
  for (const name of DB_FILES) fs.chmodSync(path.join(dir, name), 0o664)
  // A second process on the same data dir (the CLI beside a running server) opens it too.
  const second = createCore(loadConfig({}, { 'data-dir': dir }))
  t.teardown(() => second.close())
  for (const name of DB_FILES) t.equal(modeOf(path.join(dir, name)), 0o600, name)
  second.close()
  first.close()
  // Closed: the -wal and -shm are gone; the database file stays private on the next open.
  fs.chmodSync(path.join(dir, 'coffer.db'), 0o644)
  const third = createCore(loadConfig({}, { 'data-dir': dir }))
  t.teardown(() => third.close())
  t.equal(modeOf(path.join(dir, 'coffer.db')), 0o600)
})
