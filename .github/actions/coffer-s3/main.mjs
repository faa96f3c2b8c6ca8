// The coffer-s3 action's main step (see action.yml): download, verify, start, export. Failures are
// one `::error::` line and exit code 1, after which the runner still runs post.mjs.
/* global AbortSignal */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { execFile, spawn } from 'node:child_process'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'

/** An input as the runner passes it: INPUT_<NAME>, upper-cased, spaces as underscores. */
const input = (name) => (process.env[`INPUT_${name.replace(/ /g, '_').toUpperCase()}`] ?? '').trim()
/** Appends `name=value` lines to one of the runner's command files ($GITHUB_ENV, $GITHUB_OUTPUT, …). */
const appendTo = (variable, lines) => {
  if (!process.env[variable]) throw new Error(`$${variable} is not set: this runs as a GitHub Actions step`)
  fs.appendFileSync(process.env[variable], lines.map((l) => `${l}\n`).join(''))
}
class Failure extends Error {}

/** Downloads `url` into `file` (streamed) and returns its SHA-256 in hex. */
async function download(url, file) {
  const res = await fetch(url, { signal: AbortSignal.timeout(300_000) })
  if (!res.ok || !res.body) throw new Failure(`downloading ${url}: HTTP ${res.status}`)
  const hash = createHash('sha256')
  const body = Readable.fromWeb(res.body)
  body.on('data', (chunk) => hash.update(chunk))
  await pipeline(body, fs.createWriteStream(file, { mode: 0o600 }))
  return hash.digest('hex')
}

/** Where the release is: base-url, or this action's repository's GitHub release of `version`. */
function releaseBase(version) {
  const base = input('base-url')
  if (base) return base.replace(/\/+$/, '')
  // Set by the runner for an action used from a repository, unset for a local one (uses: ./…; actions/runner#585, #804).
  const repo = process.env.GITHUB_ACTION_REPOSITORY
  if (!repo) throw new Failure('cannot tell which repository this action comes from: set the base-url input')
  const server = process.env.GITHUB_SERVER_URL || 'https://github.com'
  return version ? `${server}/${repo}/releases/download/v${version}` : `${server}/${repo}/releases/latest/download`
}

async function main() {
  const arch = { x64: 'x64', arm64: 'arm64' }[process.arch]
  if (process.platform !== 'linux' || !arch) throw new Failure(`Coffer's releases are for Linux on x64 and arm64, not ${process.platform}-${process.arch}`)
  // The version asked for, else the tag this action was used at (uses: …@v0.1.0), else the latest.
  const ref = process.env.GITHUB_ACTION_REF ?? ''
  const version = input('version').replace(/^v/, '') || (/^v\d+\.\d+\.\d+/.test(ref) ? ref.slice(1) : '')
  const base = releaseBase(version)
  const dir = fs.mkdtempSync(path.join(process.env.RUNNER_TEMP || os.tmpdir(), 'coffer-s3-'))
  appendTo('GITHUB_STATE', [`dir=${dir}`])

  // SHA256SUMS names the executable: with the latest release the version is only known from it.
  const sums = path.join(dir, 'SHA256SUMS')
  await download(`${base}/SHA256SUMS`, sums)
  const wanted = version ? `coffer-${version}-linux-${arch}` : null
  const entry = fs
    .readFileSync(sums, 'utf8')
    .split('\n')
    .map((line) => /^([0-9a-f]{64}) [ *](coffer-[0-9A-Za-z.+-]+-linux-(x64|arm64))$/.exec(line))
    .find((m) => m && m[3] === arch && (!wanted || m[2] === wanted))
  if (!entry) throw new Failure(`${base}/SHA256SUMS lists no ${wanted ?? `coffer-*-linux-${arch}`}`)
  const [, expected, name] = entry
  const exe = path.join(dir, 'coffer')
  const actual = await download(`${base}/${name}`, exe)
  const pinned = input('sha256').toLowerCase()
  if (actual !== expected || (pinned && actual !== pinned)) {
    fs.rmSync(exe, { force: true })
    throw new Failure(
      `${name}: its SHA-256 is ${actual}, but ${actual !== expected ? 'SHA256SUMS says' : 'the sha256 input says'} ${actual !== expected ? expected : pinned}: refused`,
    )
  }
  fs.chmodSync(exe, 0o755)
  console.log(`${name}: SHA-256 ${actual} verified`)

  const envFile = path.join(dir, 'coffer.env')
  const jsonFile = path.join(dir, 'coffer.json')
  const logFile = path.join(dir, 'coffer.log')
  const args = ['serve', '--ephemeral', '--write-env', envFile, '--json-file', jsonFile, '--port', input('port') || '0', '--s3-port', input('s3-port') || '0']
  const workspace = process.env.GITHUB_WORKSPACE || process.cwd()
  for (const bucket of input('buckets').split(/[,\n]/)) {
    const [bucketName, seed] = bucket.trim().split(/=(.*)/s)
    if (bucketName) args.push('--bucket', seed === undefined ? bucketName : `${bucketName}=${path.resolve(workspace, seed)}`)
  }
  // Keys through the environment, not the command line, which `ps` shows to every user.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('INPUT_')))
  const keys = {
    COFFER_S3_ACCESS_KEY_ID: 'access-key-id',
    COFFER_S3_SECRET_ACCESS_KEY: 'secret-access-key',
    COFFER_TENANT_API_KEY: 'tenant-api-key',
    COFFER_ADMIN_API_KEY: 'admin-api-key',
  }
  for (const [variable, name] of Object.entries(keys)) if (input(name)) env[variable] = input(name)
  const log = fs.openSync(logFile, 'w', 0o600)
  // Detached: it outlives this step, and the runner's post step (post.mjs) stops it.
  const child = spawn(exe, args, { cwd: workspace, env, detached: true, stdio: ['ignore', 'ignore', log] })
  fs.closeSync(log)
  child.unref()
  appendTo('GITHUB_STATE', [`pid=${child.pid}`])

  // Not spawnSync: while this process is blocked, nothing reaps a coffer that exited at once, and
  // `coffer wait --pid` would take its zombie for a live process until the timeout.
  const waitArgs = ['wait', envFile, '--pid', String(child.pid), '--timeout', input('timeout') || '60']
  const waited = await new Promise((resolve) => execFile(exe, waitArgs, (err, _stdout, stderr) => resolve({ failed: Boolean(err), stderr })))
  if (waited.failed) {
    console.log(`Coffer's log:\n${fs.readFileSync(logFile, 'utf8')}`)
    throw new Failure(`Coffer did not start: ${waited.stderr.trim()}`)
  }

  const ready = JSON.parse(fs.readFileSync(jsonFile, 'utf8'))
  for (const secret of [ready.adminApiKey, ready.tenant.apiKey, ready.s3?.secretAccessKey]) if (secret) console.log(`::add-mask::${secret}`)
  // The env file's lines need no quoting (coffer's --write-env), so they go to $GITHUB_ENV as they are.
  appendTo('GITHUB_ENV', fs.readFileSync(envFile, 'utf8').trim().split('\n'))
  appendTo('GITHUB_PATH', [dir])
  appendTo('GITHUB_OUTPUT', [
    `url=${ready.url}`,
    `api-key=${ready.tenant.apiKey}`,
    `admin-api-key=${ready.adminApiKey}`,
    `executable=${exe}`,
    ...(ready.s3
      ? [
          `s3-endpoint=${ready.s3.endpoint}`,
          `region=${ready.s3.region}`,
          `access-key-id=${ready.s3.accessKeyId}`,
          `secret-access-key=${ready.s3.secretAccessKey}`,
        ]
      : []),
  ])
  console.log(`Coffer ${name.replace(/^coffer-|-linux-\w+$/g, '')} is up: API ${ready.url}${ready.s3 ? `, S3 ${ready.s3.endpoint}` : ''} (pid ${child.pid})`)
}

main().catch((err) => {
  // A message for the job's log; anything unexpected keeps its stack.
  const message = err instanceof Failure ? err.message : err.stack
  console.log(`::error::${message.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A')}`)
  process.exitCode = 1
})
