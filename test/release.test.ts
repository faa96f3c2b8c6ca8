// @suites: sqlite
// The release (#28): `npm run release`'s assets, and the coffer-s3 action run as a GitHub runner
// runs a node24 action (inputs as INPUT_* variables, $GITHUB_ENV/$GITHUB_OUTPUT/$GITHUB_STATE/
// $GITHUB_PATH files, GITHUB_ACTION_PATH, then the post step with STATE_*), its downloads served
// from a local directory holding a real release build. No runner can be reached from here.
import t, { type Test } from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import http from 'node:http'
import zlib from 'node:zlib'
import { createHash } from 'node:crypto'
import { execFile, spawn, spawnSync } from 'node:child_process'
import type { AddressInfo } from 'node:net'
// yaml comes with @fastify/swagger; the runner's own YAML reading is what it stands in for.
import YAML from 'yaml'
import { ROOT } from './process-helper'
import { TEST_LOG_DIR } from './log-scan/secrets'
import { tempDir } from './helper'

const VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version as string
const NAME = `coffer-${VERSION}-linux-x64`
const ACTION_DIR = path.join(ROOT, '.github', 'actions', 'coffer-s3')
const AWS = '/usr/bin/aws'

// Above the suite's per-file default only when the machine is loaded: alone it takes about a minute,
// and the container image's runs under chroot (as root) about one more.
t.setTimeout(600_000)

// The x64 half of `npm run release`, once for this file (about 30 s), into a directory of its own.
const RELEASE = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-release-test-'))
t.teardown(() => fs.rmSync(RELEASE, { recursive: true, force: true }))
// The repository a GitHub Actions run names, which the image's source label takes.
const built = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'release.mjs'), '--arch', 'x64', '--out', RELEASE], {
  cwd: ROOT,
  encoding: 'utf8',
  timeout: 300_000,
  env: { ...process.env, GITHUB_SERVER_URL: 'https://github.com', GITHUB_REPOSITORY: 'OWNER/coffer' },
})
if (built.status !== 0) throw new Error(`npm run release -- --arch x64 failed:\n${built.stderr}`)

interface Run {
  code: number
  stdout: string
  stderr: string
}

/** Runs a command without blocking this process's event loop, which serves the downloads. */
function run(cmd: string, args: string[], opts: { cwd: string; env: Record<string, string>; timeout?: number }): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 60_000, ...opts, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) })
    })
  })
}

/** An HTTP server on 127.0.0.1 serving the files of `dir` by name, as a release's download URL does. */
async function serveDir(t: Test, dir: string): Promise<{ url: string; requests: string[] }> {
  const requests: string[] = []
  const server = http.createServer((req, res) => {
    const name = decodeURIComponent((req.url ?? '').split('?')[0]!.slice(1))
    requests.push(name)
    const file = path.join(dir, name)
    if (name.includes('/') || !fs.existsSync(file)) return void res.writeHead(404).end('not found')
    res.writeHead(200, { 'Content-Length': fs.statSync(file).size })
    fs.createReadStream(file).pipe(res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests }
}

/** A runner's command file: `name=value` lines and `name<<DELIMITER` blocks. */
function readCommandFile(file: string): Record<string, string> {
  const out: Record<string, string> = {}
  const lines = fs.readFileSync(file, 'utf8').split('\n')
  for (let i = 0; i < lines.length; i++) {
    const heredoc = /^([^=]+)<<(.+)$/.exec(lines[i]!)
    if (heredoc) {
      const end = lines.indexOf(heredoc[2]!, i + 1)
      out[heredoc[1]!] = lines.slice(i + 1, end).join('\n')
      i = end
    } else if (lines[i]!.includes('=')) {
      const [name, value] = lines[i]!.split(/=(.*)/s)
      out[name!] = value!
    }
  }
  return out
}

interface Runner {
  workspace: string
  runnerTemp: string
  tmp: string
  files: { GITHUB_ENV: string; GITHUB_OUTPUT: string; GITHUB_STATE: string; GITHUB_PATH: string }
  env: Record<string, string>
}

/** A job's directories and files as a runner lays them out, and the environment every step gets. */
function runnerFor(t: Test, ref = `v${VERSION}`): Runner {
  const dir = tempDir(t, 'coffer-runner-')
  const [workspace, runnerTemp, tmp, home] = ['workspace', 'runner-temp', 'tmp', 'home'].map((d) => path.join(dir, d))
  for (const d of [workspace!, runnerTemp!, tmp!, home!]) fs.mkdirSync(d)
  const files = Object.fromEntries(
    ['GITHUB_ENV', 'GITHUB_OUTPUT', 'GITHUB_STATE', 'GITHUB_PATH'].map((name) => {
      const file = path.join(runnerTemp!, `${name.toLowerCase()}.txt`)
      fs.writeFileSync(file, '')
      return [name, file]
    }),
  ) as Runner['files']
  const env = {
    PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`,
    HOME: home!,
    TMPDIR: tmp!,
    CI: 'true',
    GITHUB_ACTIONS: 'true',
    GITHUB_WORKSPACE: workspace!,
    RUNNER_TEMP: runnerTemp!,
    GITHUB_SERVER_URL: 'https://github.com',
    GITHUB_ACTION_REPOSITORY: 'OWNER/coffer',
    GITHUB_ACTION_REF: ref,
    ...files,
  }
  return { workspace: workspace!, runnerTemp: runnerTemp!, tmp: tmp!, files, env }
}

const action = YAML.parse(fs.readFileSync(path.join(ACTION_DIR, 'action.yml'), 'utf8')) as {
  inputs: Record<string, { default?: string }>
  runs: { using: string; main: string; post: string }
}

/**
 * Runs the action's `main` or `post` as the runner does for `using: node24`: `node FILE` from the
 * workspace, each declared input as INPUT_<NAME> (given, else its default), and for post the
 * main step's saved state as STATE_<name>.
 */
function runAction(r: Runner, phase: 'main' | 'post', given: Record<string, string>): Promise<Run> {
  for (const name of Object.keys(given)) if (!(name in action.inputs)) throw new Error(`the action has no input ${name}`)
  const inputs = Object.fromEntries(
    Object.entries(action.inputs).map(([name, spec]) => [`INPUT_${name.replace(/ /g, '_').toUpperCase()}`, given[name] ?? spec.default ?? '']),
  )
  const state = phase === 'post' ? Object.fromEntries(Object.entries(readCommandFile(r.files.GITHUB_STATE)).map(([k, v]) => [`STATE_${k}`, v])) : {}
  const env = { ...r.env, ...inputs, ...state, GITHUB_ACTION_PATH: ACTION_DIR }
  return run(process.execPath, [path.join(ACTION_DIR, action.runs[phase])], { cwd: r.workspace, env })
}

/** A `run:` step as the runner runs it: bash with the env files' effects applied. */
function runStep(r: Runner, script: string): Promise<Run> {
  const added = fs.readFileSync(r.files.GITHUB_PATH, 'utf8').trim().split('\n').filter(Boolean).reverse()
  const env = { ...r.env, ...readCommandFile(r.files.GITHUB_ENV), PATH: [...added, r.env.PATH].join(':') }
  return run('bash', ['--noprofile', '--norc', '-eo', 'pipefail', '-c', script], { cwd: r.workspace, env })
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The fenced code block that follows `<!-- ci-recipe: NAME` in the README. */
function readmeRecipe(name: string): string {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const m = new RegExp(`<!-- ci-recipe: ${name}[^>]*-->\\n\`\`\`\\w+\\n([\\s\\S]*?)\\n\`\`\``).exec(readme)
  if (!m) throw new Error(`no ci-recipe ${name} in the README`)
  return m[1]!
}

t.test('npm run release: the executable, a tarball with README, unit and licences, SHA256SUMS that sha256sum accepts', async (t) => {
  t.same(fs.readdirSync(RELEASE).sort(), ['SHA256SUMS', NAME, `${NAME}.oci.tar`, `${NAME}.tar.gz`])
  const check = spawnSync('sha256sum', ['-c', 'SHA256SUMS'], { cwd: RELEASE, encoding: 'utf8' })
  t.equal(check.status, 0, check.stderr)
  t.equal(check.stdout, `${NAME}: OK\n${NAME}.tar.gz: OK\n${NAME}.oci.tar: OK\n`)
  t.equal(spawnSync(path.join(RELEASE, NAME), ['version'], { cwd: os.tmpdir(), encoding: 'utf8' }).stdout, `${VERSION}\n`)

  const unpacked = tempDir(t)
  const listing = spawnSync('tar', ['-tvzf', path.join(RELEASE, `${NAME}.tar.gz`)], { encoding: 'utf8' })
  t.match(listing.stdout, /^drwxr-xr-x 0\/0 /, 'owned by root, not the builder')
  t.equal(spawnSync('tar', ['-xzf', path.join(RELEASE, `${NAME}.tar.gz`), '-C', unpacked]).status, 0)
  const dir = path.join(unpacked, NAME)
  t.same(fs.readdirSync(dir).sort(), ['LICENSE', 'README.md', 'THIRD-PARTY-NOTICES', 'coffer', 'coffer.service'])
  t.ok(fs.readFileSync(path.join(dir, 'coffer')).equals(fs.readFileSync(path.join(RELEASE, NAME))), 'the same executable')
  t.equal(fs.statSync(path.join(dir, 'coffer')).mode & 0o777, 0o755)
  t.equal(fs.readFileSync(path.join(dir, 'README.md'), 'utf8'), fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'))
  t.equal(fs.readFileSync(path.join(dir, 'coffer.service'), 'utf8'), fs.readFileSync(path.join(ROOT, 'scripts', 'coffer.service'), 'utf8'))
  t.match(fs.readFileSync(path.join(dir, 'LICENSE'), 'utf8'), /^MIT License\n/)
  const notices = fs.readFileSync(path.join(dir, 'THIRD-PARTY-NOTICES'), 'utf8')
  for (const pkg of ['fastify', 'better-sqlite3', 'pino', '@aws-sdk/client-s3', 'swagger-ui-dist', 'preact', 'pg', 'pg-protocol']) {
    t.match(notices, new RegExp(`^${pkg.replace(/[/.]/g, '\\$&')} \\d+\\.\\d+\\.\\d+ \\(`, 'm'), `${pkg}'s licence`)
  }
  t.match(notices, new RegExp(`^Node\\.js ${process.version}\\n\\nNode\\.js is licensed`, 'm'), "Node's licence")
})

t.test("the README's GitHub Actions job with the coffer-s3 action, run as the runner would", async (t) => {
  const job = readmeRecipe('coffer-s3-action')
  t.ok(job.split('\n').length <= 6, 'at most 6 lines')
  t.ok(readmeRecipe('shell').split('\n').length <= 4, 'the shell recipe: at most 4 lines')
  const steps = (YAML.parse(job) as { steps: { uses?: string; with?: Record<string, string>; run?: string }[] }).steps
  const uses = steps.find((s) => s.uses?.includes('/.github/actions/coffer-s3@'))!
  const [, repo, actionPath, ref] = /^([^/]+\/[^/]+)\/(.+)@(.+)$/.exec(uses.uses!)!
  t.equal(repo, 'OWNER/coffer')
  t.equal(path.join(ROOT, actionPath!), ACTION_DIR, 'the action of this repository')
  t.equal(ref, `v${VERSION}`, "the README's tag is this version")
  const runs = steps.filter((s) => s.run)
  t.equal(runs.length, 1)

  const r = runnerFor(t, ref)
  fs.mkdirSync(path.join(r.workspace, 'test', 'fixtures'), { recursive: true })
  fs.writeFileSync(path.join(r.workspace, 'test', 'fixtures', 'users.json'), '[{"id":1}]\n')
  const assets = await serveDir(t, RELEASE)
  // The one input the README's job does not give: the release comes from here, not GitHub.
  const inputs = { ...uses.with, 'base-url': assets.url }
  const main = await runAction(r, 'main', inputs)
  const state = readCommandFile(r.files.GITHUB_STATE)
  const pid = Number(state.pid)
  t.teardown(() => {
    if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL')
  })
  t.equal(main.code, 0, main.stdout + main.stderr)
  t.same(assets.requests, ['SHA256SUMS', NAME], 'the sums first, then the executable they name')
  t.match(main.stdout, `${NAME}: SHA-256 `)
  t.match(main.stdout, '::add-mask::test1234secret\n', 'the secret is masked in the job log')

  const exported = readCommandFile(r.files.GITHUB_ENV)
  t.match(exported, {
    AWS_ACCESS_KEY_ID: 'test1234',
    AWS_SECRET_ACCESS_KEY: 'test1234secret',
    AWS_REGION: 'us-east-1',
    AWS_ENDPOINT_URL: /^http:\/\/127\.0\.0\.1:\d+$/,
    COFFER_URL: /^http:\/\/127\.0\.0\.1:\d+$/,
    COFFER_API_KEY: /^sk_test_/,
    COFFER_PID: String(pid),
  })
  const outputs = readCommandFile(r.files.GITHUB_OUTPUT)
  t.match(outputs, { url: exported.COFFER_URL, 's3-endpoint': exported.AWS_ENDPOINT_URL, 'access-key-id': 'test1234', 'api-key': exported.COFFER_API_KEY })
  t.equal(fs.readFileSync(r.files.GITHUB_PATH, 'utf8'), `${path.dirname(outputs.executable!)}\n`)
  t.ok(fs.existsSync(AWS), `the AWS CLI at ${AWS} (bash scripts/s3-clients.sh installs it)`)

  // The job's own step, as written, with what the action exported.
  const listed = await runStep(r, runs[0]!.run!)
  t.equal(listed.code, 0, listed.stderr)
  t.match(listed.stdout, /\s11 users\.json\n$/, 'the seeded bucket, listed by the AWS CLI')
  const viaPath = await runStep(r, 'coffer version')
  t.equal(viaPath.stdout, `${VERSION}\n`, 'coffer is on the PATH of later steps')

  // The end of the job: the runner runs the post step.
  const post = await runAction(r, 'post', inputs)
  t.equal(post.code, 0, post.stderr)
  t.match(post.stdout, `Coffer (pid ${pid}) stopped`)
  t.match(post.stdout, /::group::Coffer's log\n[\s\S]*coffer listening on[\s\S]*::endgroup::/)
  // The log the action shows in the job's log, mirrored for the run's scan for keys and secrets.
  const shown = /::group::Coffer's log\n([\s\S]*)::endgroup::/.exec(post.stdout)?.[1] ?? ''
  fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
  fs.writeFileSync(
    path.join(TEST_LOG_DIR, `coffer-s3-action-${pid}.log`),
    shown
      .split('\n')
      .filter((l) => l.startsWith('{"level":'))
      .map((l) => `${l}\n`)
      .join(''),
  )
  t.notOk(alive(pid), 'the process is gone')
  t.same(
    fs.readdirSync(r.runnerTemp).filter((f) => f.startsWith('coffer-s3-')),
    [],
    'the download is removed',
  )
  t.same(fs.readdirSync(r.tmp), [], "coffer's ephemeral data dir is removed")
})

/** A release directory like RELEASE whose executable differs from SHA256SUMS in one byte. */
function tampered(t: Test): string {
  const dir = tempDir(t)
  fs.copyFileSync(path.join(RELEASE, 'SHA256SUMS'), path.join(dir, 'SHA256SUMS'))
  const exe = path.join(dir, NAME)
  fs.copyFileSync(path.join(RELEASE, NAME), exe)
  const fd = fs.openSync(exe, 'r+')
  const byte = Buffer.alloc(1)
  fs.readSync(fd, byte, 0, 1, 1_000_000)
  fs.writeSync(fd, Buffer.from([byte[0]! ^ 0x01]), 0, 1, 1_000_000)
  fs.closeSync(fd)
  return dir
}

/** Main failed: nothing exported, no process, no executable left; post then succeeds quietly. */
async function refused(t: Test, r: Runner, main: Run, error: RegExp, inputs: Record<string, string>) {
  t.equal(main.code, 1)
  t.match(main.stdout, error)
  t.equal(fs.readFileSync(r.files.GITHUB_ENV, 'utf8'), '', 'nothing exported')
  t.equal(fs.readFileSync(r.files.GITHUB_OUTPUT, 'utf8'), '', 'no outputs')
  t.notOk('pid' in readCommandFile(r.files.GITHUB_STATE), 'nothing started')
  const dirs = fs.readdirSync(r.runnerTemp).filter((f) => f.startsWith('coffer-s3-'))
  t.same(
    dirs.map((d) => fs.readdirSync(path.join(r.runnerTemp, d))),
    [['SHA256SUMS']],
    'the refused executable is deleted',
  )
  const post = await runAction(r, 'post', inputs)
  t.equal(post.code, 0, post.stderr)
  t.same(
    fs.readdirSync(r.runnerTemp).filter((f) => f.startsWith('coffer-s3-')),
    [],
    'post removes the download directory',
  )
}

t.test('the checksum step refuses a tampered executable', async (t) => {
  const r = runnerFor(t)
  const assets = await serveDir(t, tampered(t))
  const inputs = { 'base-url': assets.url }
  const main = await runAction(r, 'main', inputs)
  await refused(t, r, main, new RegExp(`^::error::${NAME}: its SHA-256 is [0-9a-f]{64}, but SHA256SUMS says [0-9a-f]{64}: refused$`, 'm'), inputs)
})

t.test('a sha256 input that the executable does not match is refused too', async (t) => {
  const r = runnerFor(t)
  const assets = await serveDir(t, RELEASE)
  const inputs = { 'base-url': assets.url, sha256: '0'.repeat(64) }
  const main = await runAction(r, 'main', inputs)
  await refused(t, r, main, /^::error::.*, but the sha256 input says 0{64}: refused$/m, inputs)
})

t.test('when coffer cannot start: its log, a failed step, and post cleans up', async (t) => {
  const r = runnerFor(t)
  const assets = await serveDir(t, RELEASE)
  const inputs = { 'base-url': assets.url, 'access-key-id': 'x', 'secret-access-key': 'long-enough' }
  const main = await runAction(r, 'main', inputs)
  t.equal(main.code, 1)
  t.match(main.stdout, /Coffer's log:\ncoffer: invalid configuration: COFFER_S3_ACCESS_KEY_ID="x" must be 3 to 128 characters/)
  t.match(main.stdout, /^::error::Coffer did not start: coffer: coffer \(pid \d+\) exited before it was ready$/m)
  t.equal(fs.readFileSync(r.files.GITHUB_ENV, 'utf8'), '', 'nothing exported')
  const post = await runAction(r, 'post', inputs)
  t.equal(post.code, 0)
  t.match(post.stdout, /::warning::Coffer \(pid \d+\) had already exited/)
  t.same(
    fs.readdirSync(r.runnerTemp).filter((f) => f.startsWith('coffer-s3-')),
    [],
  )
  t.same(fs.readdirSync(r.tmp), [])
})

const IMAGE = path.join(RELEASE, `${NAME}.oci.tar`)
const sha256 = (buf: Buffer) => createHash('sha256').update(buf).digest('hex')

interface Descriptor {
  mediaType: string
  digest: string
  size: number
  platform?: Record<string, string>
  annotations?: Record<string, string>
}
interface ImageConfig {
  architecture: string
  os: string
  config: {
    User: string
    ExposedPorts: Record<string, object>
    Env: string[]
    Entrypoint: string[]
    Cmd: string[]
    Volumes: Record<string, object>
    Labels: Record<string, string>
    Healthcheck: { Test: string[]; Interval: number; Timeout: number; Retries: number }
  }
  rootfs: { type: string; diff_ids: string[] }
}

/** The image archive's layout: its files, index and the blob a descriptor names, checked against it. */
function readLayout(t: Test) {
  const dir = tempDir(t)
  t.equal(spawnSync('tar', ['-xf', IMAGE, '-C', dir]).status, 0)
  const blob = (d: Descriptor) => {
    const buf = fs.readFileSync(path.join(dir, 'blobs', 'sha256', d.digest.replace(/^sha256:/, '')))
    t.equal(buf.length, d.size, `${d.mediaType}: its size`)
    t.equal(`sha256:${sha256(buf)}`, d.digest, `${d.mediaType}: its digest`)
    return buf
  }
  const json = (file: string) => JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))
  return { dir, blob, json }
}

t.test('the container image: an OCI image layout of one linux/amd64 image, tagged coffer:<version>, run as a non-root user', async (t) => {
  const listing = spawnSync('tar', ['-tvf', IMAGE], { encoding: 'utf8' }).stdout.trim().split('\n')
  const names = listing.map((l) => l.split(/\s+/).pop()!)
  t.same(names, [...names].sort(), 'entries sorted')
  t.ok(
    listing.every((l) => l.startsWith('-rw-r--r-- 0/0') || l.startsWith('drwxr-xr-x 0/0')),
    'owned by root',
  )
  const { blob, json } = readLayout(t)
  t.same(json('oci-layout'), { imageLayoutVersion: '1.0.0' })
  const index = json('index.json') as { schemaVersion: number; mediaType: string; manifests: Descriptor[] }
  t.equal(index.schemaVersion, 2)
  t.equal(index.mediaType, 'application/vnd.oci.image.index.v1+json')
  t.equal(index.manifests.length, 1)
  const desc = index.manifests[0]!
  t.equal(desc.mediaType, 'application/vnd.oci.image.manifest.v1+json')
  t.same(desc.platform, { architecture: 'amd64', os: 'linux' })
  t.same(desc.annotations, { 'org.opencontainers.image.ref.name': `coffer:${VERSION}`, 'io.containerd.image.name': `docker.io/library/coffer:${VERSION}` })
  const manifest = JSON.parse(blob(desc).toString()) as { schemaVersion: number; config: Descriptor; layers: Descriptor[] }
  t.equal(manifest.schemaVersion, 2)
  t.equal(manifest.config.mediaType, 'application/vnd.oci.image.config.v1+json')
  t.same(
    manifest.layers.map((l) => l.mediaType),
    ['application/vnd.oci.image.layer.v1.tar+gzip'],
  )
  const config = JSON.parse(blob(manifest.config).toString()) as ImageConfig
  const layer = blob(manifest.layers[0]!)
  t.ok(layer.length < 60 * 1024 * 1024, `the layer is under 60 MB compressed (${(layer.length / 1024 / 1024).toFixed(1)} MiB)`)
  t.same(config.rootfs, { type: 'layers', diff_ids: [`sha256:${sha256(zlib.gunzipSync(layer))}`] })
  // What docker load reads when it does not read the OCI index: the same blobs under the same name.
  t.same(json('manifest.json'), [
    {
      Config: `blobs/${manifest.config.digest.replace(':', '/')}`,
      RepoTags: [`coffer:${VERSION}`],
      Layers: [`blobs/${manifest.layers[0]!.digest.replace(':', '/')}`],
    },
  ])

  t.match(config, { architecture: 'amd64', os: 'linux' })
  const c = config.config
  t.equal(c.User, '10001:10001', 'not root')
  t.same(c.ExposedPorts, { '8080/tcp': {}, '9000/tcp': {} }, 'the API and S3 ports')
  t.same(c.Volumes, { '/data': {} })
  t.same(c.Entrypoint, ['/coffer'])
  t.same(c.Cmd, ['serve'])
  t.same(c.Env, ['PATH=/', 'COFFER_HOST=0.0.0.0', 'COFFER_PORT=8080', 'COFFER_S3_PORT=9000', 'COFFER_DATA_DIR=/data'])
  t.match(c.Healthcheck, { Test: ['CMD', '/coffer', 'health'], Timeout: 10e9, Retries: 3 })
  const revision = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim()
  t.match(c.Labels, {
    'org.opencontainers.image.title': 'Coffer',
    'org.opencontainers.image.version': VERSION,
    'org.opencontainers.image.revision': revision,
    'org.opencontainers.image.licenses': 'MIT',
    'org.opencontainers.image.source': 'https://github.com/OWNER/coffer',
  })

  // The layer: the executable, its C runtime in /lib, the user's files, /data the user's own, /tmp for anyone.
  const files = spawnSync('tar', ['-tvzf', '-'], { input: layer, encoding: 'utf8' }).stdout.trim().split('\n')
  const entry = (name: string) => files.find((l) => l.endsWith(` ${name}`))
  t.match(entry('coffer'), /^-rwxr-xr-x 0\/0 /)
  t.match(entry('data/'), /^drwxr-xr-x 10001\/10001 /)
  t.match(entry('tmp/'), /^drwxrwxrwt 0\/0 /)
  for (const lib of ['lib64/ld-linux-x86-64.so.2', 'lib/libc.so.6', 'lib/libstdc++.so.6', 'lib/libm.so.6', 'lib/libgcc_s.so.1']) t.ok(entry(lib), lib)
  t.ok(entry('etc/ssl/certs/ca-certificates.crt'), 'the CA bundle')
  const unpacked = tempDir(t)
  t.equal(spawnSync('tar', ['-xzf', '-', '-C', unpacked, 'etc/passwd', 'coffer'], { input: layer }).status, 0)
  t.match(fs.readFileSync(path.join(unpacked, 'etc', 'passwd'), 'utf8'), /^coffer:x:10001:10001:/m)
  t.ok(fs.readFileSync(path.join(unpacked, 'coffer')).equals(fs.readFileSync(path.join(RELEASE, NAME))), "the release's executable")
})

const asRoot = process.getuid?.() === 0
const NOT_ROOT = 'running the image under chroot needs root (chroot, mount); run the tests as root to run it'

t.test('the container image runs: its ENTRYPOINT and CMD under chroot as its USER (scripts/smoke-image.sh)', { skip: asRoot ? false : NOT_ROOT }, async (t) => {
  const smoke = await run('bash', [path.join(ROOT, 'scripts', 'smoke-image.sh'), IMAGE], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', SMOKE_TIMEOUT: '280' },
    timeout: 300_000,
  })
  t.equal(smoke.code, 0, smoke.stderr)
  t.match(smoke.stderr, /smoke-image: coffer health inside the image\n/)
  t.match(smoke.stderr, /smoke-image: all passed\n$/)
})

/** A port free a moment ago on 127.0.0.1. */
async function freePort(): Promise<number> {
  const s = http.createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const { port } = s.address() as AddressInfo
  await new Promise<void>((resolve) => s.close(() => resolve()))
  return port
}

/**
 * `argv` run in the unpacked image as a runtime would: chroot into `rootfs` as `user`, with exactly
 * `env`, in a mount namespace of its own with /proc mounted. The process keeps the spawned pid.
 */
function inImage(rootfs: string, user: string, argv: string[], env: string[]) {
  const script = 'root=$1; shift; mount -t proc proc "$root/proc" && exec "$@"'
  return spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      '/bin/sh',
      '-c',
      script,
      'sh',
      rootfs,
      '/usr/bin/env',
      '-i',
      ...env,
      '/usr/sbin/chroot',
      `--userspec=${user}`,
      rootfs,
      ...argv,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
}

t.test("the README's Compose file, run as the image would under it", { skip: asRoot ? false : NOT_ROOT }, async (t) => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const block = /<!-- container-recipe: compose[^>]*-->\n```yaml\n([\s\S]*?)\n```/.exec(readme)?.[1]
  if (!block) throw new Error('no container-recipe: compose in the README')
  const compose = YAML.parse(block) as {
    services: Record<
      string,
      {
        image: string
        restart?: string
        ports?: string[]
        volumes?: string[]
        environment?: Record<string, string>
        healthcheck?: unknown
        command?: string[]
        entrypoint?: string[]
        user?: string
      }
    >
    volumes?: Record<string, unknown>
  }
  const [service, ...others] = Object.values(compose.services)
  t.equal(others.length, 0, 'one service')
  t.equal(service!.image, `coffer:${VERSION}`, 'the name docker load gives the image')
  t.equal(service!.restart, 'unless-stopped')
  t.equal(service!.healthcheck, undefined, "the image's health check, not another")

  const dir = tempDir(t)
  const unpack = await run(process.execPath, [path.join(ROOT, 'scripts', 'oci-image.mjs'), 'unpack', IMAGE, dir], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '' },
  })
  t.equal(unpack.code, 0, unpack.stderr)
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as ImageConfig
  const rootfs = path.join(dir, 'rootfs')
  fs.mkdirSync(path.join(rootfs, 'proc'), { recursive: true })

  // Ports and volume: what the image exposes and declares. The container's ports become free ones
  // here through COFFER_PORT / COFFER_S3_PORT, as a mapping would put them on the host.
  const containerPorts = (service!.ports ?? []).map((p) => p.split(':').pop()!)
  t.same(containerPorts.map((p) => `${p}/tcp`).sort(), Object.keys(config.config.ExposedPorts).sort(), 'every exposed port published')
  const [volume, ...moreVolumes] = service!.volumes ?? []
  t.equal(moreVolumes.length, 0)
  const [volumeName, target] = volume!.split(':')
  t.ok(volumeName! in (compose.volumes ?? {}), `${volumeName} is a named volume of the file`)
  t.ok(target! in config.config.Volumes, `${target} is the image's volume`)

  // The file's environment over the image's, ${NAME:?…} taken from .env as Compose would.
  const adminKey = `compose-admin-${sha256(Buffer.from(String(Math.random()))).slice(0, 24)}`
  const dotEnv: Record<string, string> = { COFFER_ADMIN_API_KEY: adminKey }
  const fromFile = Object.entries(service!.environment ?? {}).map(([k, v]) => {
    const value = String(v).replace(/\$\{(\w+)(:\?[^}]*)?\}/g, (_, name: string) => {
      if (!(name in dotEnv)) throw new Error(`the Compose file needs ${name}, which the test's .env lacks`)
      return dotEnv[name]!
    })
    return `${k}=${value}`
  })
  const [port, s3Port] = [await freePort(), await freePort()]
  const env = [...config.config.Env, ...fromFile, `COFFER_PORT=${port}`, `COFFER_S3_PORT=${s3Port}`]
  const argv = service!.entrypoint ?? config.config.Entrypoint
  const args = service!.command ?? (service!.entrypoint ? [] : config.config.Cmd)
  const user = service!.user ?? config.config.User

  const server = inImage(rootfs, user, [...argv, ...args], env)
  let log = ''
  server.stdout.on('data', (d: Buffer) => (log += d.toString()))
  server.stderr.on('data', (d: Buffer) => (log += d.toString()))
  const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)))
  t.teardown(() => {
    if (server.exitCode === null) server.kill('SIGKILL')
  })
  let status = 0
  for (let i = 0; i < 600 && status !== 200 && server.exitCode === null; i++) {
    status = await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.status,
      () => 0,
    )
    if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 200))
  }
  t.equal(status, 200, `/health answers: ${log}`)

  // The health check Docker runs, in the same container.
  const [kind, ...check] = config.config.Healthcheck.Test
  t.equal(kind, 'CMD')
  const healthcheck = inImage(rootfs, user, check, env)
  let checkOut = ''
  healthcheck.stdout.on('data', (d: Buffer) => (checkOut += d.toString()))
  t.equal(await new Promise((resolve) => healthcheck.once('exit', resolve)), 0, 'the health check passes')
  t.equal(checkOut, `http://127.0.0.1:${port}/health: 200\n`)

  const admin = await fetch(`http://127.0.0.1:${port}/api/v1/admin/tenants`, { headers: { authorization: `Bearer ${adminKey}` } })
  t.equal(admin.status, 200, "the file's admin key is the server's")
  const s3 = await fetch(`http://127.0.0.1:${s3Port}/private/key`)
  t.equal(s3.status, 403, 'the S3 port answers: an anonymous read of a private object is refused')
  t.match(await s3.text(), '<Code>AccessDenied</Code>')
  t.equal(fs.statSync(path.join(rootfs, 'data', 'coffer.db')).uid, 10001, 'the data is in /data, owned by the image user')

  server.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM: exit 0')
  t.match(log, '"msg":"shutdown complete"')
  fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
  fs.writeFileSync(
    path.join(TEST_LOG_DIR, `compose-image-${server.pid}.log`),
    log
      .split('\n')
      .filter((l) => l.startsWith('{"level":'))
      .map((l) => `${l}\n`)
      .join(''),
  )
})
