import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { BUNDLE, buildBundle, runCoffer, startCoffer } from './process-helper'
import { tempDir } from './helper'

buildBundle()

t.test('the bundle is one CommonJS file without dynamic requires, the addon beside it', async (t) => {
  const code = fs.readFileSync(BUNDLE, 'utf8')
  t.notMatch(code, /\brequire\((?!["'`])/, 'every require() takes a string literal')
  t.notMatch(code, /require\.resolve\(/)
  t.ok(fs.existsSync(path.join(path.dirname(BUNDLE), 'better_sqlite3.node')))
})

t.test('node dist/coffer.cjs serve works from any directory and speaks real HTTP', async (t) => {
  const cwd = tempDir(t)
  const server = await startCoffer(['serve', '--port', '0', '--data-dir', 'store'], { cwd, env: { COFFER_ADMIN_API_KEY: 'bundle-admin-key-0123456789' } })
  t.teardown(() => {
    server.child.kill('SIGKILL')
  })
  t.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/)
  t.ok(fs.existsSync(path.join(cwd, 'store', 'coffer.db')), 'relative --data-dir resolves against the working directory')
  const health = await fetch(`${server.url}/health`)
  t.equal(health.status, 200)
  t.same(await health.json(), { status: 'ok' })
  const created = await fetch(`${server.url}/api/v1/admin/tenants`, {
    method: 'POST',
    headers: { authorization: 'Bearer bundle-admin-key-0123456789', 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Real HTTP' }),
  })
  t.equal(created.status, 201)
  const { apiKey } = (await created.json()) as { apiKey: string }
  const info = await fetch(`${server.url}/api/v1/tenant/info`, { headers: { authorization: `Bearer ${apiKey}` } })
  t.equal(info.status, 200)
  t.equal(((await info.json()) as { name: string }).name, 'Real HTTP')
  t.notOk(
    server.lines.some((l) => l.includes(apiKey)),
    'the key is never logged',
  )
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0, 'SIGTERM exits 0')
})

t.test('the start-up log says how to enable the admin API when no key is set', async (t) => {
  const cwd = tempDir(t)
  const server = await startCoffer(['serve', '--port', '0', '--data-dir', cwd], { cwd, ready: /(admin API disabled)/ })
  const line = server.lines.find((l) => l.includes('admin API disabled')) ?? ''
  t.match(line, /COFFER_ADMIN_API_KEY/)
  t.match(line, /coffer tenant create --name NAME/)
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})

t.test('CLI: --help, version, bad config, unknown command', async (t) => {
  const cwd = tempDir(t)
  const help = runCoffer(['--help'], { cwd })
  t.equal(help.status, 0)
  t.match(help.stdout, /Usage: coffer <command>/)
  t.match(help.stdout, /COFFER_ADMIN_API_KEY/)
  const version = runCoffer(['version'], { cwd })
  t.equal(version.status, 0)
  t.equal(version.stdout.trim(), JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')).version)
  const badPort = runCoffer(['serve', '--port', 'abc'], { cwd })
  t.equal(badPort.status, 2)
  t.equal(badPort.stderr.trim().split('\n').length, 1, 'one line')
  t.match(badPort.stderr, /--port="abc" must be an integer from 0 to 65535/)
  const badEnv = runCoffer(['serve'], { cwd, env: { COFFER_LOG_LEVEL: 'shouty' } })
  t.equal(badEnv.status, 2)
  t.match(badEnv.stderr, /COFFER_LOG_LEVEL/)
  const unknown = runCoffer(['frobnicate'], { cwd })
  t.equal(unknown.status, 2)
  t.match(unknown.stderr, /unknown command: frobnicate/)
  const serveHelp = runCoffer(['serve', '--help'], { cwd })
  t.equal(serveHelp.status, 0)
  t.match(serveHelp.stdout, /--data-dir/)
})

t.test('processes starting at once on a new data dir agree on one complete server secret', async (t) => {
  // CI once caught a racing process reading the secret between its creation and its write.
  const rounds = 4
  const racers = 5
  for (let round = 0; round < rounds; round++) {
    const cwd = tempDir(t)
    // What a crash in the middle of generating the secret leaves behind must not matter.
    fs.mkdirSync(path.join(cwd, 'data'))
    fs.writeFileSync(path.join(cwd, 'data', 'secret.999.deadbeef.tmp'), '')
    const runs = await Promise.all(
      Array.from(
        { length: racers },
        () =>
          new Promise<{ code: number | null; stderr: string }>((resolve) => {
            const child = spawn(process.execPath, [BUNDLE, 'tenant', 'list', '--json', '--data-dir', 'data'], { cwd, env: { PATH: process.env.PATH ?? '' } })
            let stderr = ''
            child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
            child.once('close', (code) => resolve({ code, stderr }))
          }),
      ),
    )
    t.same(
      runs.filter((r) => r.code !== 0),
      [],
      `round ${round}: all ${racers} processes started`,
    )
    const secret = path.join(cwd, 'data', 'secret')
    t.match(fs.readFileSync(secret, 'utf8'), /^[0-9a-f]{64}$/)
    t.equal(fs.statSync(secret).mode & 0o777, 0o600)
    t.same(
      fs.readdirSync(path.join(cwd, 'data')).filter((n) => n.startsWith('secret.') && n !== 'secret.999.deadbeef.tmp'),
      [],
      'no temporary file of theirs is left',
    )
  }
})
