// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { initDataDir, ROOT, runCoffer, startCoffer } from './process-helper'
import { fileBytes, tempDir } from './helper'
import { withPg } from './pg/fixture'
import { checkBridge, PROBE_PRELOAD } from './pg/artifact'

// The one test file that builds the single executable (about 5 s); the others use the bundle.
const SEA = path.join(ROOT, 'dist', 'coffer')
const built = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'build-sea.mjs'), '--if-stale'], { cwd: ROOT, encoding: 'utf8', timeout: 180_000 })
if (built.status !== 0) throw new Error(`npm run build:sea failed:\n${built.stderr}`)

/** Names of the sections of an ELF64 little-endian file (enough to see whether it is stripped). */
function elfSections(file: string): string[] {
  const fd = fs.openSync(file, 'r')
  try {
    const read = (offset: number, length: number) => {
      const b = Buffer.alloc(length)
      fs.readSync(fd, b, 0, length, offset)
      return b
    }
    const h = read(0, 64)
    if (h.toString('latin1', 1, 4) !== 'ELF' || h[4] !== 2) throw new Error('not an ELF64 file')
    const shoff = Number(h.readBigUInt64LE(0x28))
    const [shentsize, shnum, shstrndx] = [h.readUInt16LE(0x3a), h.readUInt16LE(0x3c), h.readUInt16LE(0x3e)]
    const headers = Array.from({ length: shnum }, (_, i) => read(shoff + i * shentsize, shentsize))
    const strtab = headers[shstrndx]!
    const names = read(Number(strtab.readBigUInt64LE(0x18)), Number(strtab.readBigUInt64LE(0x20)))
    return headers.map((sh) => {
      const start = sh.readUInt32LE(0)
      return names.toString('latin1', start, names.indexOf(0, start))
    })
  } finally {
    fs.closeSync(fd)
  }
}

/** The fenced code block that follows `<!-- ci-recipe: NAME` in the README. */
function readmeRecipe(name: string): string {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const m = new RegExp(`<!-- ci-recipe: ${name}[^>]*-->\\n\`\`\`\\w+\\n([\\s\\S]*?)\\n\`\`\``).exec(readme)
  if (!m) throw new Error(`no ci-recipe ${name} in the README`)
  return m[1]!
}

/** Reads the seeded fixture with the AWS SDK v3 configured by the environment alone (`node -e`, in single quotes). */
const SEEDED_READ = `const { S3Client, GetObjectCommand } = require("@aws-sdk/client-s3");
new S3Client({}).send(new GetObjectCommand({ Bucket: "fixtures", Key: "users.json" })).then(async (o) => process.stdout.write(await o.Body.transformToString()))`

/** A directory holding nothing but a copy of the executable (and what a test puts there). */
function aloneIn(t: Test): string {
  const dir = tempDir(t)
  fs.copyFileSync(SEA, path.join(dir, 'coffer'))
  fs.chmodSync(path.join(dir, 'coffer'), 0o755)
  return dir
}

t.test('dist/coffer is stripped, and runs alone from an empty directory', async (t) => {
  const sections = elfSections(SEA)
  t.notOk(sections.includes('.symtab'), 'no symbol table')
  t.ok(sections.includes('.dynsym'), 'the dynamic symbols addons link against are kept')
  const dir = aloneIn(t)
  const env = { TMPDIR: dir }
  const version = runCoffer(['version'], { cwd: dir, command: './coffer', env })
  t.equal(version.status, 0)
  t.equal(version.stdout.trim(), JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version)
  t.equal(version.stderr, '', 'no experimental-feature warning')
  t.match(runCoffer(['--help'], { cwd: dir, command: './coffer', env }).stdout, /coffer serve --help|backup DEST/)
})

t.test('the smoke test passes: health, CLI tenant, upload, download, ephemeral JSON line', async (t) => {
  const r = spawnSync('bash', [path.join(ROOT, 'scripts', 'smoke-sea.sh'), SEA], { encoding: 'utf8', timeout: 60_000 })
  t.equal(r.status, 0, r.stderr)
  t.match(r.stderr, /smoke: all passed/)
})

t.test('the SQLite addon is unpacked once per data dir, never into TMPDIR, and concurrent starts are safe', async (t) => {
  const dir = aloneIn(t)
  const tmp = path.join(dir, 'tmp')
  fs.mkdirSync(tmp)
  const env = { TMPDIR: tmp }
  // A data dir as serve makes it (the CLI works on existing ones), without the executable's addon cache.
  initDataDir(path.join(dir, 'data'))
  const first = ['tenant', 'list', '--json', '--data-dir', 'data']
  const results = await Promise.all(
    [0, 1, 2].map(
      () =>
        new Promise<number | null>((resolve) => {
          const child = spawn('./coffer', first, { cwd: dir, env, stdio: 'ignore' })
          child.once('exit', resolve)
        }),
    ),
  )
  t.same(results, [0, 0, 0], 'three processes unpacking it at once all start')
  const cache = path.join(dir, 'data', '.cache')
  const files = fs.readdirSync(cache)
  t.match(files, [/^better_sqlite3-[0-9a-f]{16}\.node$/], 'one addon file, no temp file left')
  // Named by the digest the build computed, of the very bytes unpacked.
  const unpacked = fs.readFileSync(path.join(cache, files[0]!))
  t.equal(files[0], `better_sqlite3-${createHash('sha256').update(unpacked).digest('hex').slice(0, 16)}.node`, 'the name is the digest of its content')
  t.ok(unpacked.equals(fs.readFileSync(path.join(ROOT, 'dist', 'better_sqlite3.node'))), 'the content is the addon the build embedded')
  const before = fs.statSync(path.join(cache, files[0]!))
  const server = await startCoffer(['serve', '--port', '0', '--data-dir', 'data'], { cwd: dir, env, command: './coffer' })
  t.teardown(() => server.child.kill('SIGKILL'))
  t.equal((await fetch(`${server.url}/health`)).status, 200)
  // Swagger UI rides as assets of the executable, beside its script (scripts/build.mjs, #28).
  const swagger = await fetch(`${server.url}/docs/swagger-ui-bundle.js`)
  t.equal(swagger.status, 200)
  t.ok(
    Buffer.from(await swagger.arrayBuffer()).equals(fs.readFileSync(path.join(ROOT, 'node_modules', 'swagger-ui-dist', 'swagger-ui-bundle.js'))),
    '/docs serves Swagger UI from the executable',
  )
  t.equal(((await (await fetch(`${server.url}/openapi.json`)).json()) as { openapi: string }).openapi, '3.1.0', 'the OpenAPI document is generated')
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  const after = fs.statSync(path.join(cache, files[0]!))
  t.same([after.ino, after.mtimeMs], [before.ino, before.mtimeMs], 'a later start reuses it')
  t.same(fs.readdirSync(tmp), [], 'nothing was written to TMPDIR')
})

withPg(t, 'the PostgreSQL bridge in the executable', (url) => {
  t.test('a lone executable starts the worker from its SEA asset: a query and transactions on PostgreSQL (#30)', async (t) => {
    const dir = aloneIn(t)
    fs.writeFileSync(path.join(dir, 'probe.cjs'), PROBE_PRELOAD)
    const env = { TMPDIR: dir, NODE_OPTIONS: `--require ${path.join(dir, 'probe.cjs')}` }
    const stderr = await checkBridge(t, url, { command: './coffer', args: [], cwd: dir, env })
    t.match(stderr, /^probe: asset pg-worker\.cjs$/m, "the worker's bundle is read from the executable")
    t.match(stderr, /^probe: thread coffer-pg$/m, "the bridge's thread ran")
  })
})

t.test('an idle executable neither reads the PostgreSQL worker nor starts its thread (#30)', async (t) => {
  const dir = aloneIn(t)
  fs.writeFileSync(path.join(dir, 'probe.cjs'), PROBE_PRELOAD)
  const env = { TMPDIR: dir, COFFER_S3_PORT: '', NODE_OPTIONS: `--require ${path.join(dir, 'probe.cjs')}` }
  const server = await startCoffer(['serve', '--ephemeral'], { cwd: dir, env, command: './coffer', ready: /^\{"url":"(http:\/\/[^"]+)"/ })
  t.teardown(() => server.child.kill('SIGKILL'))
  t.equal((await fetch(`${server.url}/health`)).status, 200)
  await new Promise((r) => setTimeout(r, 1500))
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  const probed = server.lines.filter((l) => l.startsWith('probe: '))
  t.ok(probed.includes('probe: on'), 'the probe ran in the server')
  t.notOk(
    probed.some((l) => /pg-worker|coffer-pg/.test(l)),
    `nothing of the bridge: ${JSON.stringify(probed)}`,
  )
})

t.test("the README's CI recipes work as written, and fail loudly when the fixture does not come up", async (t) => {
  /** A directory with the executable and a report.pdf, and an empty TMPDIR beside it. */
  const workspace = (t: Test) => {
    const dir = aloneIn(t)
    fs.writeFileSync(path.join(dir, 'report.pdf'), fileBytes('application/pdf', 3000))
    const tmp = path.join(dir, 'tmp')
    fs.mkdirSync(tmp)
    return { dir, tmp }
  }

  /** The recipe as written, then what a pipeline's tests would do with the environment it exports. */
  const shellScript = () =>
    `${readmeRecipe('shell')}
set -eu
test "$AWS_ACCESS_KEY_ID" != "" && test "$AWS_ENDPOINT_URL" = "$AWS_ENDPOINT_URL_S3"
FILE_ID=$(./coffer upload report.pdf)
./coffer download "$FILE_ID" -o downloaded.pdf
node -e '${SEEDED_READ}' > fixture-copy.json`

  t.test('the shell script', async (t) => {
    const { dir, tmp } = workspace(t)
    fs.mkdirSync(path.join(dir, 'test', 'fixtures'), { recursive: true })
    fs.writeFileSync(path.join(dir, 'test', 'fixtures', 'users.json'), '[{"id":1}]\n')
    // A stale env file of an earlier run, naming a server that is not there, must not be read.
    fs.writeFileSync(path.join(dir, 'coffer.env'), 'COFFER_URL=http://127.0.0.1:1\nCOFFER_API_KEY=sk_test_stale\nCOFFER_PID=1\n')
    const r = spawnSync('bash', ['-c', shellScript()], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 60_000,
      env: { PATH: `${path.dirname(process.execPath)}:${process.env.PATH}`, TMPDIR: tmp, NODE_PATH: path.join(ROOT, 'node_modules') },
    })
    t.equal(r.status, 0, r.stderr)
    t.ok(fs.readFileSync(path.join(dir, 'downloaded.pdf')).equals(fs.readFileSync(path.join(dir, 'report.pdf'))), 'uploaded and downloaded')
    t.equal(fs.readFileSync(path.join(dir, 'fixture-copy.json'), 'utf8'), '[{"id":1}]\n', 'the seeded bucket, read by the AWS SDK from the environment alone')
    for (let i = 0; i < 100 && fs.readdirSync(tmp).length > 0; i++) await new Promise((r) => setTimeout(r, 50))
    t.same(fs.readdirSync(tmp), [], 'the trap stopped coffer (its data dir is gone)')
  })

  t.test('the shell script when coffer cannot start: its log, a non-zero exit, nothing left', async (t) => {
    const { dir, tmp } = workspace(t)
    fs.mkdirSync(path.join(dir, 'test', 'fixtures'), { recursive: true })
    const r = spawnSync('bash', ['-c', shellScript()], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 30_000,
      env: { PATH: process.env.PATH, TMPDIR: tmp, COFFER_LOG_LEVEL: 'shouty' },
    })
    t.not(r.status, 0)
    t.match(r.stderr, /Coffer did not start; its log:\ncoffer: invalid configuration: COFFER_LOG_LEVEL="shouty"/)
    t.notOk(fs.existsSync(path.join(dir, 'downloaded.pdf')))
    t.same(fs.readdirSync(tmp), [], 'nothing left in TMPDIR')
  })

  /** Each step's `run: |` block, dedented. */
  const steps = () =>
    readmeRecipe('github-actions')
      .split(/^- name: .*$/m)
      .slice(1)
      .map((step) =>
        step
          .split('\n')
          .filter((l) => l.trim() !== '' && !/^\s+(run: \||if: .*)$/.test(l))
          .map((l) => l.replace(/^ {4}/, ''))
          .join('\n'),
      )

  t.test('the GitHub Actions steps', async (t) => {
    const { dir, tmp } = workspace(t)
    const runnerTemp = path.join(dir, 'runner-temp')
    fs.mkdirSync(runnerTemp)
    // What an earlier run on the same runner may have left behind.
    fs.writeFileSync(path.join(runnerTemp, 'coffer.env'), 'COFFER_URL=http://127.0.0.1:1\nCOFFER_API_KEY=sk_test_stale\nCOFFER_PID=1\n')
    const [start, upload, stop] = steps()
    t.ok(start && upload && stop, 'three steps')
    const githubEnv = path.join(dir, 'github-env')
    fs.writeFileSync(githubEnv, '')
    const env = { PATH: process.env.PATH, TMPDIR: tmp, GITHUB_ENV: githubEnv, RUNNER_TEMP: runnerTemp }
    const started = spawnSync('bash', ['-e', '-c', start!], { cwd: dir, encoding: 'utf8', timeout: 30_000, env, stdio: ['ignore', 'pipe', 'pipe'] })
    const pid = Number(fs.readFileSync(path.join(runnerTemp, 'coffer.pid'), 'utf8'))
    t.teardown(() => {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    })
    t.equal(started.status, 0, started.stderr)
    const exported = Object.fromEntries(
      fs
        .readFileSync(githubEnv, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(/=(.*)/s).slice(0, 2)),
    )
    t.match(exported.COFFER_URL, /^http:\/\/127\.0\.0\.1:\d+$/)
    t.not(exported.COFFER_URL, 'http://127.0.0.1:1', 'not the stale file')
    t.match(exported.COFFER_API_KEY, /^sk_test_/)
    const uploaded = spawnSync('bash', ['-e', '-c', upload!], { cwd: dir, encoding: 'utf8', timeout: 30_000, env: { ...env, ...exported } })
    t.equal(uploaded.status, 0, uploaded.stderr)
    t.match(uploaded.stdout, /^[0-9a-f-]{36}\n$/)
    const stopped = spawnSync('bash', ['-e', '-c', stop!], { cwd: dir, encoding: 'utf8', timeout: 30_000, env })
    t.equal(stopped.status, 0)
    t.match(stopped.stdout, /coffer listening on/, 'the log is shown')
    for (let i = 0; i < 100 && fs.readdirSync(tmp).length > 0; i++) await new Promise((r) => setTimeout(r, 50))
    t.same(fs.readdirSync(tmp), [], 'coffer stopped and removed its data dir')
  })

  t.test('the GitHub Actions start step when coffer cannot start', async (t) => {
    const { dir, tmp } = workspace(t)
    const runnerTemp = path.join(dir, 'runner-temp')
    fs.mkdirSync(runnerTemp)
    fs.writeFileSync(path.join(runnerTemp, 'coffer.env'), 'COFFER_URL=http://127.0.0.1:1\nCOFFER_API_KEY=sk_test_stale\nCOFFER_PID=1\n')
    const githubEnv = path.join(dir, 'github-env')
    fs.writeFileSync(githubEnv, '')
    const env = { PATH: process.env.PATH, TMPDIR: tmp, GITHUB_ENV: githubEnv, RUNNER_TEMP: runnerTemp, COFFER_LOG_LEVEL: 'shouty' }
    const started = spawnSync('bash', ['-e', '-c', steps()[0]!], { cwd: dir, encoding: 'utf8', timeout: 30_000, env })
    t.equal(started.status, 1)
    t.match(started.stdout, /Coffer did not start; its log:\ncoffer: invalid configuration: COFFER_LOG_LEVEL="shouty"/)
    t.equal(fs.readFileSync(githubEnv, 'utf8'), '', 'nothing exported from the stale file')
  })
})

/** Mounts a small noexec tmpfs at `dir` (needs root); false where that is not allowed. */
function mountNoexec(dir: string): boolean {
  return spawnSync('mount', ['-t', 'tmpfs', '-o', 'noexec,size=16m', 'tmpfs', dir]).status === 0
}

const noexecProbe = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-noexec-probe-'))
const canMountNoexec = mountNoexec(noexecProbe) && spawnSync('umount', [noexecProbe]).status === 0
fs.rmSync(noexecProbe, { recursive: true, force: true })

t.test('a data dir on a noexec filesystem: one clear line, exit 2', { skip: canMountNoexec ? false : 'mounting a noexec tmpfs needs root' }, async (t) => {
  const dir = aloneIn(t)
  const mnt = path.join(dir, 'noexec')
  fs.mkdirSync(mnt)
  t.ok(mountNoexec(mnt))
  t.teardown(() => void spawnSync('umount', [mnt]))
  const r = runCoffer(['serve', '--port', '0', '--data-dir', path.join(mnt, 'data')], { cwd: dir, command: './coffer' })
  t.equal(r.status, 2)
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line')
  t.match(r.stderr, /cannot load the SQLite addon unpacked at .*noexec\/data\/\.cache\/.*failed to map segment.*mounted noexec/)
  const eph = runCoffer(['serve', '--ephemeral', '--port', '0'], { cwd: dir, command: './coffer', env: { TMPDIR: mnt } })
  t.equal(eph.status, 2)
  t.match(eph.stderr, /point TMPDIR elsewhere/)
  t.equal(eph.stdout, '')
  t.same(
    fs.readdirSync(mnt).filter((f) => f.startsWith('coffer-ephemeral-')),
    [],
    'the ephemeral data dir is removed',
  )
})
