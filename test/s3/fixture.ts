// The Ceph RGW fixture (scripts/ceph-fixture.sh) as the tests see it: started once per `tap` run by
// the `before` hook (test/log-scan/before.ts calls startFixtureForRun), stopped by the `after` hook
// when that run started it and no other run still uses it. Test files read its env from a file.
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'

const ROOT = path.resolve(__dirname, '..', '..')
const SCRIPT = path.join(ROOT, 'scripts', 'ceph-fixture.sh')
/** Per-worktree run state: where this run's hooks leave the env, or the reason there is none. */
const STATE = path.join(ROOT, '.tap', 'ceph-fixture')
const ENV_FILE = path.join(STATE, 'env')
const SKIP_FILE = path.join(STATE, 'unavailable')
const STARTED_FILE = path.join(STATE, 'started-by-this-run')
/** Runs (any worktree) using the one fixture: a file per run, named by the tap runner's pid. */
const USERS = `${process.env.COFFER_CEPH_DIR ?? '/tmp/coffer-ceph'}.users`

function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const line of text.split('\n')) {
    const m = /^(COFFER_BLOB_S3_[A-Z_]+)=(.*)$/.exec(line)
    if (m) env[m[1]!] = m[2]!
  }
  return env
}

/** `before` hook: starts (or finds) the fixture and records its env, or why it cannot be had. */
export function startFixtureForRun(): void {
  fs.rmSync(STATE, { recursive: true, force: true })
  fs.mkdirSync(STATE, { recursive: true })
  if (process.env.COFFER_TEST_S3 === 'off') {
    fs.writeFileSync(SKIP_FILE, 'COFFER_TEST_S3=off')
    return
  }
  const wasRunning = spawnSync('bash', [SCRIPT, 'status'], { encoding: 'utf8' }).status === 0
  const started = Date.now()
  const r = spawnSync('bash', [SCRIPT, 'start'], { encoding: 'utf8', timeout: 15 * 60_000 })
  const env = parseEnv(r.stdout ?? '')
  if (r.status !== 0 || env.COFFER_BLOB_S3_ENDPOINT === undefined) {
    const why = `scripts/ceph-fixture.sh start failed (exit ${r.status ?? r.signal}): ${(r.stderr ?? '').trim().split('\n').slice(-3).join(' | ')}`
    fs.writeFileSync(SKIP_FILE, why)
    console.error(`\n#### S3 blob store tests cannot get their Ceph gateway: ${why}\n`)
    return
  }
  fs.writeFileSync(ENV_FILE, r.stdout)
  if (!wasRunning) {
    fs.writeFileSync(STARTED_FILE, '')
    console.log(`# ceph fixture started in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  }
  fs.mkdirSync(USERS, { recursive: true })
  fs.writeFileSync(path.join(USERS, String(process.ppid)), '')
}

/** `after` hook: stops the fixture if this run started it and no other live run uses it. */
export function stopFixtureAfterRun(): void {
  fs.rmSync(path.join(USERS, String(process.ppid)), { force: true })
  if (!fs.existsSync(STARTED_FILE)) return
  const others = (fs.existsSync(USERS) ? fs.readdirSync(USERS) : []).filter((pid) => {
    try {
      process.kill(Number(pid), 0)
      return true
    } catch {
      fs.rmSync(path.join(USERS, pid), { force: true })
      return false
    }
  })
  if (others.length > 0) return
  spawnSync('bash', [SCRIPT, 'stop'], { stdio: 'ignore' })
}

/**
 * The fixture's COFFER_BLOB_S3_* env, or the reason it is unavailable. A test file that needs it
 * skips visibly with that reason, except under CI=true, where a missing fixture is a failure.
 */
export function fixtureEnv(): { env: Record<string, string> } | { unavailable: string } {
  if (fs.existsSync(ENV_FILE)) return { env: parseEnv(fs.readFileSync(ENV_FILE, 'utf8')) }
  const why = fs.existsSync(SKIP_FILE) ? fs.readFileSync(SKIP_FILE, 'utf8') : 'the tap before hook did not run (run the tests with npm test or tap)'
  return { unavailable: why }
}
