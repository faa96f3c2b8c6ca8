// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { ListBucketsCommand, S3Client } from '@aws-sdk/client-s3'
import { BUNDLE, buildBundle } from './process-helper'
import { tempDir } from './helper'
import { TEST_LOG_DIR } from './log-scan/secrets'

// `coffer serve --detach` (#28): a background server, ready when the command returns.

buildBundle()

interface Detached {
  code: number | null
  stdout: string
  /** What the command and its child wrote on stderr (a file, since the child keeps it open). */
  stderr: () => string
}

/** Runs `coffer serve --detach …` to its end; stderr goes to a file in the log mirror (the child keeps writing there). */
function runDetached(args: string[], opts: { cwd: string; env?: Record<string, string> }): Promise<Detached> {
  fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
  const logFile = path.join(TEST_LOG_DIR, `detach-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.log`)
  const fd = fs.openSync(logFile, 'a')
  const child = spawn(process.execPath, [BUNDLE, 'serve', '--detach', ...args], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '', TMPDIR: opts.cwd, ...opts.env },
    stdio: ['ignore', 'pipe', fd],
  })
  fs.closeSync(fd)
  let stdout = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d))
  return new Promise((resolve) => {
    // 'close': the command has exited and its stdout is at its end (the child holds no copy of it).
    child.once('close', (code) => resolve({ code, stdout, stderr: () => fs.readFileSync(logFile, 'utf8') }))
  })
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function waitGone(pid: number, ms = 15_000): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (!alive(pid)) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}

/**
 * Processes working in `dir` (a directory unique to one test, the detached server's cwd). Not
 * found by their command line: a coffer process names itself there (`coffer`, process.title).
 */
function processesIn(dir: string): number[] {
  const real = fs.realpathSync(dir)
  const pids: number[] = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      if (fs.readlinkSync(`/proc/${name}/cwd`) === real) pids.push(Number(name))
    } catch {
      // gone meanwhile
    }
  }
  return pids
}

t.test('serve --ephemeral --detach: returns once ready with the JSON line and the pid; kill PID stops it and removes its data dir', async (t) => {
  const tmp = tempDir(t)
  const json = path.join(tmp, 'coffer.json')
  const started = Date.now()
  const r = await runDetached(['--ephemeral', '--port', '0', '--json-file', json, '--bucket', 'fixtures'], { cwd: tmp })
  t.equal(r.code, 0, r.code === 0 ? 'exit 0' : r.stderr())
  const lines = r.stdout.trim().split('\n')
  t.equal(lines.length, 1, 'exactly one line on stdout')
  const info = JSON.parse(lines[0]!) as { url: string; pid: number; s3: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string } }
  t.teardown(() => {
    if (alive(info.pid)) process.kill(info.pid, 'SIGKILL')
  })
  t.same(Object.keys(info), ['url', 'adminApiKey', 'tenant', 's3', 'pid'])
  t.ok(Number.isSafeInteger(info.pid) && alive(info.pid), `the server runs in the background as pid ${info.pid}`)
  t.same(JSON.parse(fs.readFileSync(json, 'utf8')), info, '--json-file holds the same line, pid included')
  // Ready means ready: the answers come at once, without polling, and the bucket exists.
  t.equal((await fetch(`${info.url}/health`)).status, 200)
  const s3 = new S3Client({ endpoint: info.s3.endpoint, region: info.s3.region, forcePathStyle: true, credentials: info.s3 })
  const buckets = await s3.send(new ListBucketsCommand({}))
  s3.destroy()
  t.same(
    buckets.Buckets?.map((b) => b.Name),
    ['fixtures'],
  )
  // Its own session: not in the process group of whoever started it (a Ctrl-C there misses it).
  const stat = fs.readFileSync(`/proc/${info.pid}/stat`, 'utf8')
  const [, , pgrp, session] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  t.equal(Number(session), info.pid, 'a session leader (setsid)')
  t.equal(Number(pgrp), info.pid)
  const dataDir = (
    JSON.parse(
      r
        .stderr()
        .split('\n')
        .find((l) => l.includes('"coffer starting"'))!,
    ) as { dataDir: string }
  ).dataDir
  t.ok(fs.existsSync(dataDir), 'its data dir exists while it runs')
  t.ok(Date.now() - started < 60_000)

  process.kill(info.pid, 'SIGTERM')
  t.ok(await waitGone(info.pid), 'kill PID stops it')
  t.notOk(fs.existsSync(dataDir), 'and its ephemeral data dir is removed')
  t.match(r.stderr(), /"shutdown complete"/, 'its logs went to the stderr of the command that started it')
})

t.test('serve --detach on a data dir: {"url","s3","pid"}, then kill PID', async (t) => {
  const tmp = tempDir(t)
  const dataDir = path.join(tmp, 'data')
  const r = await runDetached(['--data-dir', dataDir, '--port', '0', '--s3-port', '0'], { cwd: tmp })
  t.equal(r.code, 0, r.code === 0 ? 'exit 0' : r.stderr())
  const info = JSON.parse(r.stdout) as { url: string; s3: { endpoint: string; region: string }; pid: number }
  t.teardown(() => {
    if (alive(info.pid)) process.kill(info.pid, 'SIGKILL')
  })
  t.same(Object.keys(info), ['url', 's3', 'pid'])
  t.match(info, { url: /^http:\/\/127\.0\.0\.1:\d+$/, s3: { endpoint: /^http:\/\/127\.0\.0\.1:\d+$/, region: 'us-east-1' } })
  t.equal((await fetch(`${info.url}/health`)).status, 200)
  // The S3 front answers too, in S3's shape: an unsigned ListBuckets is an empty list (as Ceph RGW answers, #26).
  const res = await fetch(`${info.s3.endpoint}/`)
  t.equal(res.status, 200)
  t.match(await res.text(), /<ListAllMyBucketsResult[^>]*><Buckets><\/Buckets><\/ListAllMyBucketsResult>/)
  t.match(r.stderr(), /"coffer listening on/, 'logs on stderr, none on stdout')
  process.kill(info.pid, 'SIGTERM')
  t.ok(await waitGone(info.pid))
  t.ok(fs.existsSync(path.join(dataDir, 'coffer.db')), 'a persistent data dir stays')
})

t.test('serve --detach: a child that fails to start prints its error, the exit code is not 0, nothing is left running', async (t) => {
  const tmp = tempDir(t)
  const missing = path.join(tmp, 'no-such-fixtures-dir')
  const r = await runDetached(['--ephemeral', '--port', '0', '--bucket', `fixtures=${missing}`], { cwd: tmp })
  t.equal(r.code, 2, 'the child exit code (a setting to change) is passed on')
  t.equal(r.stdout, '', 'no JSON line')
  t.match(r.stderr(), new RegExp(`coffer: .*${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), 'the child error, as one line naming the directory')
  t.same(processesIn(tmp), [], 'no process left running')
  t.same(
    fs.readdirSync(tmp).filter((n) => n.startsWith('coffer-ephemeral-')),
    [],
    'no data dir left behind',
  )

  // A port in use, on a persistent data dir.
  const holder = net.createServer()
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve))
  t.teardown(() => holder.close())
  const port = (holder.address() as net.AddressInfo).port
  const dataDir = path.join(tmp, 'data-port-taken')
  const r2 = await runDetached(['--data-dir', dataDir, '--port', String(port), '--s3-port', '0'], { cwd: tmp })
  t.equal(r2.code, 2)
  t.equal(r2.stdout, '')
  t.match(r2.stderr(), new RegExp(`coffer: .*${port}`), 'the port is named')
  t.same(processesIn(tmp), [], 'no process left running')
})

t.test('serve --detach: a bad flag is refused before anything starts', async (t) => {
  const tmp = tempDir(t)
  const r = await runDetached(['--s3-sigv2', 'maybe', '--data-dir', path.join(tmp, 'never')], { cwd: tmp })
  t.equal(r.code, 2)
  t.match(r.stderr(), /--s3-sigv2="maybe" must be on or off/)
  t.notOk(fs.existsSync(path.join(tmp, 'never')), 'no data dir made')
})
