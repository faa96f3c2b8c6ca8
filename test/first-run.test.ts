// @suites: sqlite
// The first hour of a newcomer: `coffer serve` on a new data dir with nothing set makes itself
// usable (a first tenant, its keys in a 0600 file, a banner on a terminal), logs readable lines on
// a terminal and JSON otherwise, without a key in either; one process by default, each named in ps;
// the --write-env file configures rclone.
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import readline from 'node:readline'
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { ListBucketsCommand, S3Client } from '@aws-sdk/client-s3'
import { BUNDLE, buildBundle, startCoffer } from './process-helper'
import { tempDir } from './helper'
import { bannerValue, PRETTY, serveOnTerminal, until } from './terminal'
import { TEST_LOG_DIR } from './log-scan/secrets'
import { createLogger, logFormatFor, prettyLine } from '../src/lib/logger'

buildBundle()

/** The NAME=value lines of an env file (comments skipped). */
function readEnv(file: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line)
    if (m) out[m[1]!] = m[2]!
  }
  return out
}

t.test('first start on a terminal: a banner with the console, the API key and the S3 keys, which work; readable logs without them', async (t) => {
  const cwd = tempDir(t, 'coffer-first-run-')
  const term = await serveOnTerminal(t, cwd, ['--port', '0', '--s3-port', '0'])
  await until(term, (l) => l.some((x) => x.startsWith('  set -a;')), 'the banner')
  const consoleUrl = bannerValue(term.lines, 'Console')
  const apiKey = bannerValue(term.lines, 'API key')
  const endpoint = bannerValue(term.lines, 'S3 endpoint')
  const accessKeyId = bannerValue(term.lines, 'Access key')
  const secretAccessKey = bannerValue(term.lines, 'Secret key')
  t.match(consoleUrl, /^http:\/\/127\.0\.0\.1:\d+\/console\/$/, 'the console address')
  t.match(apiKey, /^sk_live_/, 'a tenant API key')

  // The console's page answers, and signs in with the key as it does (the tenant's profile).
  const page = await fetch(consoleUrl)
  t.equal(page.status, 200, 'the console page')
  t.match(page.headers.get('content-type'), /text\/html/)
  const base = consoleUrl.replace(/\/console\/$/, '')
  const info = await fetch(`${base}/api/v1/tenant/info`, { headers: { authorization: `Bearer ${apiKey}` } })
  t.equal(info.status, 200, 'the API takes the key')
  t.match(await info.json(), { name: 'default' }, 'the tenant "default"')
  const unknown = await fetch(`${base}/api/v1/tenant/info`, { headers: { authorization: `Bearer ${apiKey.slice(0, -1)}x` } })
  t.equal(unknown.status, 401, 'and only that key')

  // The S3 keys list the tenant's (no) buckets.
  const s3 = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } })
  t.teardown(() => s3.destroy())
  const listed = await s3.send(new ListBucketsCommand({}))
  t.equal(listed.$metadata.httpStatusCode, 200, 'ListBuckets with the S3 keys')
  t.same(listed.Buckets ?? [], [], 'a new tenant has no bucket')

  // The same keys in the data dir's file, readable by this user only.
  const file = path.join(cwd, 'data', 'first-run.env')
  t.equal(fs.statSync(file).mode & 0o777, 0o600, 'first-run.env is 0600')
  t.match(readEnv(file), {
    COFFER_API_KEY: apiKey,
    COFFER_URL: base,
    AWS_ACCESS_KEY_ID: accessKeyId,
    AWS_SECRET_ACCESS_KEY: secretAccessKey,
    AWS_ENDPOINT_URL: endpoint,
    RCLONE_CONFIG_COFFER_SECRET_ACCESS_KEY: secretAccessKey,
    COFFER_TENANT_ID: /^[0-9a-f-]{36}$/,
  })
  t.ok(
    term.lines.some((l) => l.includes(`Saved in ${file}`)),
    'the banner names the file',
  )

  // The logs on a terminal are readable lines, and hold no key: only the banner does.
  const logLines = term.lines.filter((l) => PRETTY.test(l))
  t.ok(
    logLines.some((l) => /^\S+ INFO {2}coffer listening on http:\/\/127\.0\.0\.1:\d+$/.test(l)),
    `readable log lines:\n${logLines.join('\n')}`,
  )
  t.notOk(
    term.lines.some((l) => l.startsWith('{')),
    'no JSON line on a terminal',
  )
  t.ok(
    logLines.some((l) => l.includes(`first start: created the tenant "default"`) && l.includes(file)),
    'a log line names the file',
  )
  for (const secret of [apiKey, secretAccessKey])
    t.notOk(
      logLines.some((l) => l.includes(secret)),
      'no key in a log line',
    )
  fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
  fs.appendFileSync(path.join(TEST_LOG_DIR, `first-run-${term.pid}.log`), logLines.map((l) => `${l}\n`).join(''))

  // A second start of the same data dir: no new tenant, no banner, the same key.
  process.kill(term.pid, 'SIGTERM')
  t.equal(await term.exited, 0, 'stopped cleanly')
  const before = fs.readFileSync(file, 'utf8')
  // COFFER_LOG_FORMAT=json: JSON lines even on a terminal.
  const again = await serveOnTerminal(t, cwd, ['--port', '0', '--s3-port', '0'], { COFFER_LOG_FORMAT: 'json' })
  await until(again, (l) => l.some((x) => x.includes('coffer S3 listening on')), 'the second start')
  await new Promise((r) => setTimeout(r, 500))
  t.notOk(
    again.lines.some((l) => l.includes('Coffer is ready') || l.includes(apiKey)),
    'no banner at a later start',
  )
  t.equal(fs.readFileSync(file, 'utf8'), before, 'the file is left as it was')
  const started = again.lines.filter((l) => l.includes('coffer listening on'))
  t.ok(started.length === 1 && started[0]!.startsWith('{"level":30,'), `JSON when forced: ${started[0]}`)
  const url = /coffer listening on (http:\/\/[^\s"]+)/.exec(again.lines.join('\n'))![1]!
  const still = await fetch(`${url}/api/v1/tenant/info`, { headers: { authorization: `Bearer ${apiKey}` } })
  t.equal(still.status, 200, 'the first key still signs in')
  const list = spawnSync(process.execPath, [BUNDLE, 'tenant', 'list', '--json', '--data-dir', path.join(cwd, 'data')], { encoding: 'utf8' })
  t.equal((JSON.parse(list.stdout) as unknown[]).length, 1, 'one tenant')
})

t.test('first start piped (as under systemd): JSON logs naming the file, no banner, no key anywhere; rclone works from the file', async (t) => {
  const cwd = tempDir(t, 'coffer-first-run-')
  const server = await startCoffer(['serve', '--port', '0', '--data-dir', 'data'], { cwd, ready: /(first start: created)/ })
  t.teardown(async () => {
    server.child.kill('SIGTERM')
    await server.exited
  })
  const file = path.join(cwd, 'data', 'first-run.env')
  const env = readEnv(file)
  t.equal(fs.statSync(file).mode & 0o777, 0o600, 'first-run.env is 0600')
  for (const line of server.stdout) t.doesNotThrow(() => JSON.parse(line), `stdout is JSON lines: ${line}`)
  const named = server.stdout.map((l) => JSON.parse(l) as { msg: string; file?: string }).find((l) => l.msg.startsWith('first start'))
  t.equal(named?.file, file, 'the log line names the file')
  const all = server.lines.join('\n')
  t.notMatch(all, /Coffer is ready/, 'no banner')
  for (const name of ['COFFER_API_KEY', 'AWS_SECRET_ACCESS_KEY'] as const) {
    t.ok(env[name]!.length >= 20, `${name} in the file`)
    t.notOk(all.includes(env[name]!), `${name} in no output`)
  }

  // The file alone configures rclone: a bucket made, a file copied in, listed.
  const home = tempDir(t, 'coffer-rclone-')
  fs.writeFileSync(path.join(home, 'hello.txt'), 'hello\n')
  const sh = (cmd: string) =>
    spawnSync('bash', ['-c', `set -a; . ${file}; set +a; ${cmd}`], {
      cwd: home,
      env: { PATH: '/usr/bin:/bin', HOME: home, RCLONE_CONFIG: path.join(home, 'none.conf') },
      encoding: 'utf8',
      timeout: 60_000,
    })
  const mk = sh('rclone mkdir coffer:first && rclone copy hello.txt coffer:first && rclone lsf coffer:first')
  t.equal(mk.status, 0, mk.stderr)
  t.equal(mk.stdout, 'hello.txt\n', 'rclone lsf coffer:first')
  const cat = sh('rclone cat coffer:first/hello.txt')
  t.equal(cat.stdout, 'hello\n', 'the bytes back through rclone')
})

t.test('serve --ephemeral --write-env: rclone works from the file alone', async (t) => {
  const cwd = tempDir(t, 'coffer-write-env-')
  const envFile = path.join(cwd, 'coffer.env')
  fs.mkdirSync(path.join(cwd, 'seed'))
  fs.writeFileSync(path.join(cwd, 'seed', 'a.txt'), 'seeded\n')
  const server = await startCoffer(['serve', '--ephemeral', '--write-env', envFile, '--bucket', `fixtures=${path.join(cwd, 'seed')}`], {
    cwd,
    ready: /("url":"(?:http[^"]+)")/,
  })
  t.teardown(async () => {
    server.child.kill('SIGTERM')
    await server.exited
  })
  t.match(readEnv(envFile), {
    RCLONE_CONFIG_COFFER_TYPE: 's3',
    RCLONE_CONFIG_COFFER_PROVIDER: 'Other',
    RCLONE_CONFIG_COFFER_ENDPOINT: /^http:\/\/127\.0\.0\.1:\d+$/,
    RCLONE_CONFIG_COFFER_REGION: 'us-east-1',
  })
  const r = spawnSync('bash', ['-c', `set -a; . ${envFile}; set +a; rclone lsf coffer:fixtures && rclone cat coffer:fixtures/a.txt`], {
    cwd,
    env: { PATH: '/usr/bin:/bin', HOME: cwd, RCLONE_CONFIG: path.join(cwd, 'none.conf') },
    encoding: 'utf8',
    timeout: 60_000,
  })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stdout, 'a.txt\nseeded\n', 'rclone lists and reads the seeded bucket')
})

/** /proc's view of a process: its comm (15 characters at most) and its command line as ps shows it. */
function named(pid: number): { comm: string; args: string } {
  return {
    comm: fs.readFileSync(`/proc/${pid}/comm`, 'utf8').replace(/\n$/, ''),
    args: fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').replace(/\0/g, ' '),
  }
}

const childrenOf = (pid: number): number[] => {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter(Boolean)
      .map(Number)
  } catch {
    return []
  }
}

t.test('one process by default, named coffer; with --workers 2 a primary and workers named by role', async (t) => {
  const cwd = tempDir(t, 'coffer-titles-')
  // No COFFER_WORKERS: the helper sets 1, a person sets nothing.
  const child = spawn(process.execPath, [BUNDLE, 'serve', '--port', '0', '--s3-port', 'off', '--data-dir', 'data'], {
    cwd,
    env: { PATH: process.env.PATH ?? '', COFFER_LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(async () => {
    child.kill('SIGTERM')
    await exited
  })
  const lines: string[] = []
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready:\n${lines.join('\n')}`)), 20_000)
    readline.createInterface({ input: child.stdout! }).on('line', (l) => {
      lines.push(l)
      if (!l.includes('first start: created')) return
      clearTimeout(timer)
      resolve()
    })
  })
  fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
  fs.appendFileSync(path.join(TEST_LOG_DIR, `titles-${child.pid}.log`), lines.map((l) => `${l}\n`).join(''))
  t.same(named(child.pid!), { comm: 'coffer', args: 'coffer' }, 'ps shows coffer')
  t.same(childrenOf(child.pid!), [], 'one process: no workers')
  t.notOk(
    lines.some((l) => l.includes('coffer starting workers')),
    'no primary',
  )
  child.kill('SIGTERM')
  t.equal(await exited, 0)

  const cluster = await startCoffer(['serve', '--port', '0', '--s3-port', 'off', '--data-dir', 'data', '--workers', '2'], {
    cwd,
    ready: /coffer ready: 2 workers listening on (http:\/\/[^\s"]+)/,
    timeoutMs: 30_000,
  })
  t.teardown(async () => {
    cluster.child.kill('SIGTERM')
    await cluster.exited
  })
  t.same(named(cluster.child.pid!), { comm: 'coffer: primary', args: 'coffer: primary' }, 'the primary')
  const workers = childrenOf(cluster.child.pid!).map(named)
  t.same(workers.map((w) => w.args).sort(), ['coffer: worker 1', 'coffer: worker 2'], 'the workers, by id')
  t.same(
    workers.map((w) => w.comm),
    ['coffer: worker ', 'coffer: worker '],
    "comm: the title's first 15 characters",
  )
})

t.test('readable log lines: time, level, message, fields; control characters escaped, secrets redacted as in JSON', async (t) => {
  const out: string[] = []
  const sink = { write: (s: string) => void out.push(s) }
  const logger = createLogger('info', sink as unknown as NodeJS.WritableStream, 'pretty')
  logger.info({ tenantId: 't1', apiKey: 'sk_live_abcdefghijklmnopqrstuvwxyz', url: '/a b' }, 'hello\u001b[31m\nforged line')
  logger.error({ err: new Error('boom') }, 'failed')
  t.match(out[0], /^\d\d:\d\d:\d\d\.\d{3} INFO {2}hello\\u\{1b\}\[31m\\u\{a\}forged line tenantId=t1 apiKey="\[REDACTED\]" url="\/a b"\n$/)
  t.equal(out[0]!.split('\n').length, 2, 'one line')
  t.match(out[1], /^\S+ ERROR failed err=boom\n {4}Error: boom\n {8}at /)
  t.equal(prettyLine('not json\n'), 'not json\n', 'a line that is not JSON passes')
  t.equal(logFormatFor('auto', { isTTY: true } as unknown as NodeJS.WritableStream), 'pretty')
  t.equal(logFormatFor('auto', {} as NodeJS.WritableStream), 'json')
  t.equal(logFormatFor('json', { isTTY: true } as unknown as NodeJS.WritableStream), 'json')
})
