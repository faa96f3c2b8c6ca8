// @suites: sqlite
// Every test file says which runs it belongs to (npm run test:s3, test:pg, test:pg:all), on its
// first line; the runs' file lists are read from those lines, so a file without one would run in
// none of them without anyone noticing.
import t from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'

const script = path.join(__dirname, '..', 'scripts', 'test-files.mjs')
const run = (...args: string[]) => spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' })

t.test('every test file names its suites', async (t) => {
  const r = run('--check')
  t.equal(r.stderr, '')
  t.equal(r.status, 0)
})

t.test('the lists come from the files: the CI runs are non-empty and the database run includes the S3 run', async (t) => {
  const s3 = run('s3').stdout.trim().split(' ')
  const pg = run('pg').stdout.trim().split(' ')
  const all = run('pg', 'pg-all').stdout.trim().split(' ')
  t.ok(s3.length >= 20 && pg.length >= 23, `${s3.length} s3 files, ${pg.length} pg files`)
  t.ok(s3.includes('test/s3-roundtrip.test.ts') && pg.includes('test/crash.test.ts'))
  for (const f of pg) t.ok(all.includes(f), `${f} in test:pg:all`)
  t.notOk(all.includes('test/suites.test.ts'))
})

t.test('a file without the line, or with an unknown tag, is named and fails the check', async (t) => {
  // The check reads test/ beside the script: run a copy of the script beside a test dir of our own.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-suites-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.mkdirSync(path.join(dir, 'scripts'))
  fs.mkdirSync(path.join(dir, 'test'))
  fs.copyFileSync(script, path.join(dir, 'scripts', 'test-files.mjs'))
  fs.writeFileSync(path.join(dir, 'test', 'a.test.ts'), '// @suites: pg s3\nimport t from "tap"\n')
  fs.writeFileSync(path.join(dir, 'test', 'b.test.ts'), 'import t from "tap"\n')
  fs.writeFileSync(path.join(dir, 'test', 'c.test.ts'), '// @suites: postgres\n')
  const r = spawnSync(process.execPath, [path.join(dir, 'scripts', 'test-files.mjs'), '--check'], { encoding: 'utf8' })
  t.equal(r.status, 1)
  t.match(r.stderr, /test\/b\.test\.ts: its first line must be/)
  t.match(r.stderr, /test\/c\.test\.ts/)
  t.notMatch(r.stderr, /a\.test\.ts/)
  const listed = spawnSync(process.execPath, [path.join(dir, 'scripts', 'test-files.mjs'), 's3'], { encoding: 'utf8' })
  t.equal(listed.stdout.trim(), 'test/a.test.ts')
})
