// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { BUNDLE, buildBundle, initDataDir } from './process-helper'
import { openConnection } from '../src/db/database'
import { ADDON_ASSET } from '../src/db/sqlite-addon'

buildBundle()

// As root every permission check passes, so the permission cases run the command as `nobody`.
const asRoot = process.getuid?.() === 0
const NOBODY = 65534
const drop = (unprivileged: boolean | undefined) => (unprivileged && asRoot ? { uid: NOBODY, gid: NOBODY } : {})

/** True when every user may enter `dir` and each directory above it (others' x bit all the way up). */
function reachableByAll(dir: string): boolean {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    if ((fs.statSync(d).mode & 0o001) === 0) return false
    if (d === path.dirname(d)) return true
  }
}

/**
 * Runs `command` through sh, without the NODE_OPTIONS tap adds to every child (spawn's `env`
 * included): its hooks load from the checkout and write into it, which `nobody` may not.
 */
function withoutTap(command: string[], opts: { cwd: string; env?: Record<string, string>; unprivileged?: boolean }) {
  return spawnSync('sh', ['-c', 'unset NODE_OPTIONS; exec "$@"', 'sh', ...command], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '', ...opts.env },
    encoding: 'utf8',
    timeout: 30_000,
    ...drop(opts.unprivileged),
  })
}

/**
 * Where these tests run the command: a directory `nobody` can reach, 0755 all the way up, holding
 * its own node, bundle and SQLite addon. The checkout may sit where `nobody` cannot go (root's
 * home, any `mktemp -d`: 0700), and a command that cannot even be read fails for another reason
 * than the one under test (#32). The cases' own directories go here too.
 */
function reachableRoot(): { root: string; node: string; bundle: string } {
  const base = [os.tmpdir(), '/tmp', '/var/tmp', '/dev/shm'].find((d) => fs.existsSync(d) && reachableByAll(d))
  if (base === undefined) throw new Error(`no directory every user can reach among ${os.tmpdir()}, /tmp, /var/tmp, /dev/shm`)
  const root = fs.mkdtempSync(path.join(base, 'coffer-startup-'))
  fs.chmodSync(root, 0o755)
  const place = (from: string, mode: number) => {
    const to = path.join(root, path.basename(from))
    try {
      // The 120 MB node binary: a hard link when on the same filesystem, else a copy.
      fs.linkSync(from, to)
    } catch {
      fs.copyFileSync(from, to)
      fs.chmodSync(to, mode)
    }
    return to
  }
  const node = place(process.execPath, 0o755)
  const bundle = place(BUNDLE, 0o644)
  place(path.join(path.dirname(BUNDLE), ADDON_ASSET), 0o755)
  const probe = withoutTap([node, '-e', ''], { cwd: root, unprivileged: true })
  if (probe.status !== 0) {
    fs.rmSync(root, { recursive: true, force: true })
    throw new Error(`${node} does not run as ${asRoot ? 'nobody' : 'this user'} (${probe.error?.message ?? probe.stderr}): is ${base} mounted noexec?`)
  }
  return { root, node, bundle }
}

const RUN = reachableRoot()
t.teardown(() => fs.rmSync(RUN.root, { recursive: true, force: true }))

/** Runs the bundle (RUN's copy); `unprivileged` drops to nobody when the tests run as root. */
function coffer(args: string[], opts: { cwd: string; env?: Record<string, string>; unprivileged?: boolean }) {
  const r = withoutTap([RUN.node, RUN.bundle, ...args], opts)
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** A temp dir in RUN's root that anyone may enter and, with `mode` 0o777, write (the unprivileged runs need to). */
function openDir(t: Test, mode = 0o755): string {
  const dir = fs.mkdtempSync(path.join(RUN.root, 'case-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.chmodSync(dir, mode)
  return dir
}

/** Exit code 2 and exactly one line on stderr, with no stack trace. */
function oneLine(t: Test, r: { status: number | null; stderr: string }, pattern: RegExp, what: string): void {
  t.equal(r.status, 2, `${what}: exit code 2`)
  t.equal(r.stderr.trimEnd().split('\n').length, 1, `${what}: one line: ${r.stderr}`)
  t.match(r.stderr, pattern, what)
  t.notMatch(r.stderr, /\n\s+at |Error:/, `${what}: no stack trace`)
}

t.test('serve: a port in use is one line naming the port and the setting', async (t) => {
  const dir = openDir(t)
  const blocker = net.createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => blocker.close())
  const port = (blocker.address() as net.AddressInfo).port
  const r = coffer(['serve', '--port', String(port), '--s3-port', '0', '--data-dir', 'data'], { cwd: dir })
  oneLine(t, r, new RegExp(`^coffer: the API port ${port} on 127\\.0\\.0\\.1 is already in use .*: set --port or COFFER_PORT to a free port`), 'port in use')
  // serve opens a second port, the S3 front's (9000 by default): when that one is taken, the
  // message names it and its setting, not the API's (#24).
  const s3 = coffer(['serve', '--port', '0', '--s3-port', String(port), '--data-dir', 'data'], { cwd: dir })
  oneLine(
    t,
    s3,
    new RegExp(
      `^coffer: the S3 port ${port} on 127\\.0\\.0\\.1 is already in use .*: set --s3-port or COFFER_S3_PORT to a free port \\(0 picks one, off turns`,
    ),
    'S3 port in use',
  )
  t.notMatch(s3.stderr, /--port or COFFER_PORT/, 'not the API port setting')
  const s3env = coffer(['serve', '--port', '0', '--data-dir', 'data'], { cwd: dir, env: { COFFER_S3_PORT: String(port) } })
  oneLine(t, s3env, new RegExp(`^coffer: the S3 port ${port} .*set --s3-port or COFFER_S3_PORT`), 'S3 port in use, set in the environment')
})

t.test('serve: permission denied on a low port names the port and the setting', async (t) => {
  const dir = openDir(t, 0o777)
  const r = coffer(['serve', '--port', '80', '--data-dir', 'data'], { cwd: dir, unprivileged: true })
  oneLine(
    t,
    r,
    /^coffer: permission denied listening on 127\.0\.0\.1:80 \(the API port; ports below 1024 need root or CAP_NET_BIND_SERVICE\): set --port or COFFER_PORT \(the default is 8080\)/,
    'port 80',
  )
  const s3 = coffer(['serve', '--port', '0', '--s3-port', '81', '--data-dir', 'data'], { cwd: dir, unprivileged: true })
  oneLine(
    t,
    s3,
    /^coffer: permission denied listening on 127\.0\.0\.1:81 \(the S3 port; ports below 1024 need root or CAP_NET_BIND_SERVICE\): set --s3-port or COFFER_S3_PORT \(the default is 9000\)/,
    'S3 port 81',
  )
  const host = coffer(['serve', '--port', '0', '--host', '192.0.2.1', '--data-dir', 'data'], { cwd: dir })
  oneLine(t, host, /^coffer: cannot listen on 192\.0\.2\.1: no such address on this machine: set --host or COFFER_HOST/, 'address not on this machine')
})

t.test('serve: a data dir it cannot create or write is one line naming it and the setting', async (t) => {
  const dir = openDir(t)
  const locked = path.join(dir, 'locked')
  fs.mkdirSync(locked, { mode: 0o555 })
  fs.chmodSync(locked, 0o555)
  const r = coffer(['serve', '--port', '0', '--data-dir', path.join(locked, 'data')], { cwd: dir, unprivileged: true })
  oneLine(
    t,
    r,
    /^coffer: cannot use the data dir .*locked\/data: permission denied \(.*\): set --data-dir or COFFER_DATA_DIR to a directory \S+ can write/,
    'unwritable parent',
  )
  t.notOk(fs.existsSync(path.join(locked, 'data')))

  // An existing data dir of another user's that this one cannot write.
  const theirs = initDataDir(path.join(dir, 'theirs'))
  if (asRoot) {
    const r2 = coffer(['serve', '--port', '0', '--data-dir', theirs], { cwd: dir, unprivileged: true })
    oneLine(t, r2, /^coffer: cannot use the data dir .*theirs: .*: set --data-dir or COFFER_DATA_DIR/, "another user's data dir")
  }
  fs.writeFileSync(path.join(dir, 'afile'), '')
  const r3 = coffer(['serve', '--port', '0', '--data-dir', path.join(dir, 'afile', 'data')], { cwd: dir })
  oneLine(t, r3, /^coffer: cannot use the data dir .*afile\/data: a part of the path is a file, not a directory/, 'a file in the path')
})

t.test('a database from a newer version: serve and the CLI refuse with one line', async (t) => {
  const dir = openDir(t)
  const data = initDataDir(path.join(dir, 'data'))
  const db = openConnection(path.join(data, 'coffer.db'), data)
  db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'from the future', 0)").run()
  db.close()
  for (const args of [
    ['serve', '--port', '0', '--data-dir', data],
    ['tenant', 'list', '--data-dir', data],
    ['verify', '--data-dir', data],
  ]) {
    const r = coffer(args, { cwd: dir })
    oneLine(
      t,
      r,
      /^coffer: the database in .*data was written by a newer coffer \(schema 999; this one knows up to \d+\): run that newer version, or set --data-dir or COFFER_DATA_DIR/,
      args[0]!,
    )
  }
})

t.test('serve --ephemeral with an unwritable TMPDIR: one line naming TMPDIR', async (t) => {
  const dir = openDir(t)
  const missing = coffer(['serve', '--ephemeral', '--port', '0'], { cwd: dir, env: { TMPDIR: path.join(dir, 'nope') } })
  oneLine(
    t,
    missing,
    /^coffer: cannot create a temporary data dir in .*nope: no such file or directory: set TMPDIR to a directory \S+ can write/,
    'missing TMPDIR',
  )
  const ro = path.join(dir, 'ro')
  fs.mkdirSync(ro)
  fs.chmodSync(ro, 0o555)
  const denied = coffer(['serve', '--ephemeral', '--port', '0'], { cwd: dir, env: { TMPDIR: ro }, unprivileged: true })
  oneLine(t, denied, /^coffer: cannot create a temporary data dir in .*ro: permission denied: set TMPDIR/, 'read-only TMPDIR')
})

t.test('every command but serve refuses a data dir that does not exist, and creates nothing', async (t) => {
  const dir = openDir(t)
  const missing = path.join(dir, 'missing')
  const commands = [
    ['verify'],
    ['gc'],
    ['tenant', 'list'],
    ['tenant', 'create', '--name', 'x'],
    ['tenant', 'show', '01890000-0000-7000-8000-000000000000'],
    ['webhooks', 'list'],
    ['backup', path.join(dir, 'bk')],
  ]
  for (const args of commands) {
    const r = coffer([...args, '--data-dir', missing], { cwd: dir })
    oneLine(t, r, /^coffer: data dir .*missing does not exist: set --data-dir or COFFER_DATA_DIR/, args.join(' '))
    // The same through the environment.
    t.equal(coffer(args, { cwd: dir, env: { COFFER_DATA_DIR: missing } }).status, 2)
  }
  t.same(fs.readdirSync(dir), [], 'nothing was created')
})

t.test(
  "a data dir this user may not read: permission denied, with the path and whom to run as (not 'holds no Coffer data')",
  { skip: !asRoot ? 'needs root to run the command as another user' : false },
  async (t) => {
    const dir = openDir(t)
    // A service's data dir: its user's alone (0700), here root's.
    const data = initDataDir(path.join(dir, 'data'))
    fs.chmodSync(data, 0o700)
    for (const args of [['tenant', 'list'], ['verify']]) {
      const r = coffer([...args, '--data-dir', data], { cwd: dir, unprivileged: true })
      oneLine(
        t,
        r,
        /^coffer: permission denied: nobody cannot read \S+\/data\/coffer\.db \(the data dir \S+\/data belongs to root\): run the command as root, e\.g\. sudo -u root coffer … --data-dir \S+\/data\n/,
        `${args.join(' ')} on a 0700 data dir`,
      )
      t.notMatch(r.stderr, /holds no Coffer data/, 'not taken for an empty directory')
    }
    // The directory may be entered, the database not read.
    fs.chmodSync(data, 0o755)
    const db = coffer(['tenant', 'list', '--data-dir', data], { cwd: dir, unprivileged: true })
    oneLine(t, db, /^coffer: permission denied: nobody cannot read \S+\/data\/coffer\.db \(the data dir \S+ belongs to root\)/, 'an unreadable coffer.db')
    // A parent that may not be entered: whose the data dir is, nobody can tell.
    const hidden = path.join(dir, 'private')
    fs.mkdirSync(hidden, { mode: 0o700 })
    const inside = initDataDir(path.join(hidden, 'data'))
    const r = coffer(['tenant', 'list', '--data-dir', inside], { cwd: dir, unprivileged: true })
    oneLine(
      t,
      r,
      /^coffer: permission denied: nobody cannot read \S+\/private\/data \(the data dir \S+\/private\/data\): run the command as the user coffer serve runs as, e\.g\. sudo -u coffer coffer/,
      'a data dir behind a private directory',
    )
  },
)

t.test(
  'coffer backup into a directory it cannot write: one line, exit 2',
  { skip: !asRoot ? 'needs root to run the command as another user' : false },
  async (t) => {
    const dir = openDir(t)
    const data = initDataDir(path.join(dir, 'data'))
    // nobody may read the data dir for this case: it is the destination that must fail.
    fs.chmodSync(data, 0o777)
    for (const f of fs.readdirSync(data, { recursive: true }) as string[]) fs.chmodSync(path.join(data, f), 0o777)
    const dest = path.join(dir, 'backups')
    fs.mkdirSync(dest, { mode: 0o755 })
    const r = coffer(['backup', path.join(dest, 'today'), '--data-dir', data], { cwd: dir, unprivileged: true })
    oneLine(t, r, /^coffer: cannot write the backup into .*backups \(EACCES\): choose a DEST in a directory this user \(nobody\) can write/, 'unwritable DEST')
    t.same(fs.readdirSync(dest), [], 'nothing left in DEST')
  },
)

t.test('the stack trace goes to the debug log only', async (t) => {
  const dir = openDir(t)
  const r = coffer(['verify', '--data-dir', path.join(dir, 'missing')], { cwd: dir, env: { COFFER_LOG_LEVEL: 'debug' } })
  t.equal(r.status, 2)
  const lines = r.stderr.trimEnd().split('\n')
  t.equal(lines.length, 2)
  const log = JSON.parse(lines[0]!) as { level: number; msg: string; err: { stack: string } }
  t.equal(log.msg, 'command failed')
  t.match(log.err.stack, /\n\s+at /)
  t.match(lines[1], /^coffer: data dir .* does not exist/)
})
