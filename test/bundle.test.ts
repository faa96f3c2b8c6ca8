// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { BUNDLE, buildBundle, runCoffer, startCoffer } from './process-helper'
import { tempDir } from './helper'

buildBundle()

t.test('the bundle is one CommonJS file without dynamic requires, the addon beside it', async (t) => {
  const code = fs.readFileSync(BUNDLE, 'utf8')
  // `require(\'…` is text inside a string (the docs pages' Markdown is inlined, and one shows Node code).
  t.notMatch(code, /\brequire\((?!\\?["'`])/, 'every require() takes a string literal')
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

t.test('the start-up log says how to enable the admin API, with a tenant command that runs as written', async (t) => {
  const cwd = tempDir(t)
  const server = await startCoffer(['serve', '--port', '0', '--data-dir', cwd], { cwd, ready: /(admin API disabled)/ })
  const line = (JSON.parse(server.lines.find((l) => l.includes('admin API disabled'))!) as { msg: string }).msg
  t.match(line, /COFFER_ADMIN_API_KEY/)
  // No `coffer` on this PATH: the hint names node and the bundle by their full paths.
  const hint = /create a tenant with: (.*)$/.exec(line)?.[1] ?? ''
  t.equal(hint, `${process.execPath} ${BUNDLE} tenant create --name NAME --data-dir ${cwd}`)
  const words = hint.replace('NAME', 'hinted').split(' ')
  const ran = spawnSync(words[0]!, words.slice(1), { cwd, encoding: 'utf8' })
  t.equal(ran.status, 0, ran.stderr)
  t.match(ran.stdout, /Created tenant "hinted"/)
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)

  // With a `coffer` on the PATH that is this program, the hint says just that.
  const bin = tempDir(t)
  fs.symlinkSync(BUNDLE, path.join(bin, 'coffer'))
  const onPath = await startCoffer(['serve', '--port', '0', '--data-dir', cwd], {
    cwd,
    env: { PATH: `${bin}:${process.env.PATH}` },
    ready: /(admin API disabled)/,
  })
  t.match(
    onPath.lines.find((l) => l.includes('admin API disabled')),
    /create a tenant with: coffer tenant create --name NAME --data-dir /,
  )
  onPath.child.kill('SIGTERM')
  t.equal(await onPath.exited, 0)
})

t.test('dist/coffer.cjs runs as a command: shebang and executable bit (package.json bin)', async (t) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { bin: { coffer: string }; version: string }
  t.equal(path.resolve(__dirname, '..', pkg.bin.coffer), BUNDLE)
  t.equal(fs.readFileSync(BUNDLE, 'utf8').split('\n')[0], '#!/usr/bin/env node')
  t.ok(fs.statSync(BUNDLE).mode & 0o111, 'executable')
  // Run directly, with Node 24 first on the PATH as npm puts it for a package's bin.
  const r = spawnSync(BUNDLE, ['-v'], { encoding: 'utf8', env: { PATH: `${path.dirname(process.execPath)}:${process.env.PATH}` } })
  t.equal(r.status, 0, r.stderr)
  t.equal(r.stdout.trim(), pkg.version)
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
    // Only serve creates a data dir (#13): the racers are servers, stopped once they listen.
    const runs = await Promise.all(
      Array.from({ length: racers }, async () => {
        try {
          const server = await startCoffer(['serve', '--port', '0', '--data-dir', 'data', '--log-level', 'warn'], { cwd, ready: /(admin API disabled)/ })
          server.child.kill('SIGTERM')
          return { code: await server.exited, error: '' }
        } catch (err) {
          return { code: -1, error: (err as Error).message }
        }
      }),
    )
    t.same(
      runs.filter((r) => r.code !== 0),
      [],
      `round ${round}: all ${racers} processes started`,
    )
    // The first start's tenant: one was made, by one of them, whose key its file holds.
    const tenants = JSON.parse(runCoffer(['tenant', 'list', '--json', '--data-dir', 'data'], { cwd }).stdout) as { id: string; name: string }[]
    t.same(
      tenants.map((x) => x.name),
      ['default'],
      `round ${round}: one first tenant`,
    )
    t.match(fs.readFileSync(path.join(cwd, 'data', 'first-run.env'), 'utf8'), `COFFER_TENANT_ID=${tenants[0]?.id}`)
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
