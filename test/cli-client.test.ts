// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { BUNDLE, buildBundle, startCoffer, type Running } from './process-helper'
import { fileBytes, tempDir } from './helper'

buildBundle()

/** A real server (ephemeral mode) and its tenant, shared by the tests of this file. */
interface Fixture {
  server: Running
  url: string
  key: string
  adminKey: string
}

async function serve(t: Test): Promise<Fixture> {
  const tmp = tempDir(t)
  const server = await startCoffer(['serve', '--ephemeral', '--port', '0'], { cwd: tmp, env: { TMPDIR: tmp }, ready: /^\{"url":"(http:\/\/[^"]+)"/ })
  t.teardown(() => server.child.kill('SIGKILL'))
  const info = JSON.parse(server.stdout[0]!) as { url: string; adminApiKey: string; tenant: { apiKey: string } }
  return { server, url: info.url, key: info.tenant.apiKey, adminKey: info.adminApiKey }
}

/** Runs `coffer ARGS` in `cwd` with only the given environment; stdout as bytes. */
function coffer(args: string[], cwd: string, env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [BUNDLE, ...args], { cwd, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 })
  return { status: r.status, stdout: r.stdout, out: r.stdout.toString('utf8'), err: r.stderr.toString('utf8') }
}

const api = async (f: Fixture, p: string, init: RequestInit = {}) =>
  fetch(`${f.url}${p}`, { ...init, headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json', ...init.headers } })

t.test('coffer upload: type from the content, one id per file, context, tags, workspace; --json the file objects', async (t) => {
  const f = await serve(t)
  const dir = tempDir(t)
  const png = fileBytes('image/png', 5000)
  const pdf = fileBytes('application/pdf', 3000, 2)
  // Names that lie about the type: the content decides.
  fs.writeFileSync(path.join(dir, 'holiday.pdf'), png)
  fs.writeFileSync(path.join(dir, 'report.txt'), pdf)
  const ws = (await (await api(f, '/api/v1/workspaces', { method: 'POST', body: JSON.stringify({ name: 'Photos', slug: 'photos' }) })).json()) as { id: string }

  const r = coffer(
    [
      'upload',
      'holiday.pdf',
      'report.txt',
      '--url',
      f.url,
      '--key',
      f.key,
      '--workspace',
      ws.id,
      '--context',
      'trip',
      '--tag',
      'year=2026',
      '--tag',
      'who=me=you',
    ],
    dir,
  )
  t.equal(r.status, 0, r.err)
  t.equal(r.err, '', 'nothing on stderr off a terminal')
  const ids = r.out.trim().split('\n')
  t.equal(ids.length, 2, 'one id per file')
  const expect = [
    { name: 'holiday.pdf', type: 'image/png', bytes: png },
    { name: 'report.txt', type: 'application/pdf', bytes: pdf },
  ]
  for (const [i, e] of expect.entries()) {
    const meta = (await (await api(f, `/api/v1/files/${ids[i]}`)).json()) as Record<string, unknown>
    t.match(meta, {
      id: ids[i],
      originalName: e.name,
      fileType: e.type,
      sizeBytes: e.bytes.length,
      processingStatus: 'completed',
      context: 'trip',
      workspaceId: ws.id,
    })
    t.same(meta.tags, { year: '2026', who: 'me=you' })
    const body = Buffer.from(await (await api(f, `/api/v1/files/${ids[i]}/download`)).arrayBuffer())
    t.ok(body.equals(e.bytes), `${e.name}: the stored bytes are the file's`)
  }

  // COFFER_URL / COFFER_API_KEY instead of flags, and --json.
  const j = coffer(['upload', 'report.txt', '--json'], dir, { COFFER_URL: f.url, COFFER_API_KEY: f.key })
  t.equal(j.status, 0, j.err)
  const objects = JSON.parse(j.out) as { id: string }[]
  t.equal(objects.length, 1)
  const fetched = await (await api(f, `/api/v1/files/${objects[0]!.id}`)).json()
  t.same(objects[0], fetched, '--json prints the file objects as the API returns them')
})

t.test('coffer upload failures: each bad file is one line naming it, the others still upload; exit codes', async (t) => {
  const f = await serve(t)
  const dir = tempDir(t)
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'just text, no magic bytes')
  fs.writeFileSync(path.join(dir, 'ok.png'), fileBytes('image/png', 100))
  fs.writeFileSync(path.join(dir, 'empty.png'), '')
  fs.mkdirSync(path.join(dir, 'folder'))
  const env = { COFFER_URL: f.url, COFFER_API_KEY: f.key }

  const mixed = coffer(['upload', 'notes.txt', 'missing.png', 'ok.png', 'empty.png', 'folder'], dir, env)
  t.equal(mixed.status, 1)
  t.equal(mixed.out.trim().split('\n').length, 1, 'the good file uploaded')
  const lines = mixed.err.trim().split('\n')
  t.equal(lines.length, 4, mixed.err)
  // Sent as text/plain (its extension), which the spec's six do not include: the server's error.
  t.match(lines[0], /^coffer: notes\.txt: File type "text\/plain" is not allowed \(INVALID_FILE_TYPE\)$/)
  t.match(lines[1], /^coffer: missing\.png: no such file$/)
  t.match(lines[2], /^coffer: empty\.png: the file is empty$/)
  t.match(lines[3], /^coffer: folder: not a regular file$/)
  t.notMatch(mixed.err, /\n\s+at /, 'no stack trace')

  const badKey = coffer(['upload', 'ok.png'], dir, { ...env, COFFER_API_KEY: 'sk_live_wrongwrongwrongwrongwrongwrongwrong' })
  t.equal(badKey.status, 1)
  t.match(badKey.err, /^coffer: ok\.png: Invalid or revoked API key \(UNAUTHORIZED\)\n$/)

  const noUrl = coffer(['upload', 'ok.png', '--key', f.key], dir)
  t.equal(noUrl.status, 2)
  t.match(noUrl.err, /^coffer: no server: pass --url URL or set COFFER_URL .*\n$/)
  const noKey = coffer(['ls', '--url', f.url], dir)
  t.equal(noKey.status, 2)
  t.match(noKey.err, /no API key: pass --key KEY or set COFFER_API_KEY/)
  const down = coffer(['upload', 'ok.png', '--url', 'http://127.0.0.1:1'], dir, { COFFER_API_KEY: f.key })
  t.equal(down.status, 2)
  t.match(down.err, /^coffer: cannot reach http:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\): is coffer serve running there\? Set --url or COFFER_URL\n$/)
  t.equal(coffer(['upload', '--url', f.url, '--key', f.key], dir).status, 2, 'no FILE')
  t.match(coffer(['upload', 'ok.png', '--tag', 'novalue'], dir, env).err, /--tag "novalue" must be KEY=VALUE/)

  // The quota is the server's to refuse, and the message says so.
  const admin = { authorization: `Bearer ${f.adminKey}`, 'content-type': 'application/json' }
  const small = (await (
    await fetch(`${f.url}/api/v1/admin/tenants`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'small', quotaBytes: 50 }) })
  ).json()) as { apiKey: string }
  const full = coffer(['upload', 'ok.png'], dir, { ...env, COFFER_API_KEY: small.apiKey })
  t.equal(full.status, 1)
  t.match(full.err, /^coffer: ok\.png: The tenant storage quota is exceeded \(QUOTA_EXCEEDED\)\n$/)
})

t.test('coffer download streams to the original name, -o PATH or stdout, and checks the SHA-256', async (t) => {
  const f = await serve(t)
  const dir = tempDir(t)
  const bytes = fileBytes('image/jpeg', 300_000, 3)
  fs.writeFileSync(path.join(dir, 'in.jpg'), bytes)
  const env = { COFFER_URL: f.url, COFFER_API_KEY: f.key }
  const id = coffer(['upload', 'in.jpg'], dir, env).out.trim()
  const out = path.join(dir, 'out')
  fs.mkdirSync(out)

  const byName = coffer(['download', id], out, env)
  t.equal(byName.status, 0, byName.err)
  t.ok(fs.readFileSync(path.join(out, 'in.jpg')).equals(bytes), 'saved under its original name')
  const again = coffer(['download', id], out, env)
  t.equal(again.status, 2, 'never overwrites a file it was not told to')
  t.match(again.err, /in\.jpg already exists: choose another name with -o PATH/)
  t.same(fs.readdirSync(out), ['in.jpg'], 'no partial file left')

  t.equal(coffer(['download', id, '-o', 'copy.jpg'], out, env).status, 0)
  t.ok(fs.readFileSync(path.join(out, 'copy.jpg')).equals(bytes))
  const piped = coffer(['download', id, '-o', '-'], out, env)
  t.equal(piped.status, 0)
  t.ok(piped.stdout.equals(bytes), '-o - writes the bytes to stdout')

  const unknown = coffer(['download', '01890000-0000-7000-8000-000000000000'], out, env)
  t.equal(unknown.status, 1)
  t.match(unknown.err, /File not found \(FILE_NOT_FOUND\)/)
  const unwritable = coffer(['download', id, '-o', path.join(dir, 'no', 'such', 'dir.jpg')], out, env)
  t.equal(unwritable.status, 2)
  t.match(unwritable.err, /^coffer: cannot write .*dir\.jpg \(ENOENT\): choose another place with -o PATH\n$/)
})

t.test('coffer ls and rm', async (t) => {
  const f = await serve(t)
  const dir = tempDir(t)
  const env = { COFFER_URL: f.url, COFFER_API_KEY: f.key }
  fs.writeFileSync(path.join(dir, 'a.png'), fileBytes('image/png', 100))
  fs.writeFileSync(path.join(dir, 'b.pdf'), fileBytes('application/pdf', 200))
  const ids = coffer(['upload', 'a.png', 'b.pdf'], dir, env).out.trim().split('\n')
  t.equal(ids.length, 2)

  const ls = coffer(['ls'], dir, env)
  t.equal(ls.status, 0)
  const rows = ls.out.trim().split('\n')
  t.match(rows[0], /^ID\s+SIZE\s+STATUS\s+TYPE\s+CREATED\s+NAME$/)
  t.match(rows[1], new RegExp(`^${ids[1]}\\s+200\\s+completed\\s+application/pdf\\s+\\S+\\s+b\\.pdf$`), 'newest first')
  t.match(rows[2], new RegExp(`^${ids[0]}\\s+100\\s+completed\\s+image/png\\s+\\S+\\s+a\\.png$`))
  t.same(
    (JSON.parse(coffer(['ls', '--json'], dir, env).out) as { id: string }[]).map((x) => x.id),
    [ids[1], ids[0]],
  )
  t.same(
    (JSON.parse(coffer(['ls', '--json', '--type', 'image/png'], dir, env).out) as { id: string }[]).map((x) => x.id),
    [ids[0]],
  )
  const limited = coffer(['ls', '--limit', '1'], dir, env).out
  t.match(limited, /\(1 of 2\)/)
  t.equal(coffer(['ls', '--limit', '0'], dir, env).status, 2)

  const rm = coffer(['rm', ids[0]!], dir, env)
  t.equal(rm.status, 0)
  t.equal(rm.out, `deleted ${ids[0]}\n`)
  t.equal((await api(f, `/api/v1/files/${ids[0]}`)).status, 404, 'gone on the server')
  const twice = coffer(['rm', ids[0]!, ids[1]!], dir, env)
  t.equal(twice.status, 1, 'one of two could not be deleted')
  t.match(twice.err, new RegExp(`^coffer: ${ids[0]}: File not found \\(FILE_NOT_FOUND\\)\\n$`))
  t.equal(twice.out, `deleted ${ids[1]}\n`)
  t.equal(coffer(['ls'], dir, env).out, 'No files.\n')
})

const hasScript = !spawnSync('script', ['--version']).error

t.test(
  'coffer upload shows progress for large files on a terminal only',
  { skip: hasScript ? false : 'util-linux `script` is not installed: cannot give the CLI a terminal' },
  async (t) => {
    const f = await serve(t)
    const dir = tempDir(t)
    fs.writeFileSync(path.join(dir, 'big.png'), fileBytes('image/png', 3 * 1024 * 1024))
    const env = { PATH: process.env.PATH ?? '', COFFER_URL: f.url, COFFER_API_KEY: f.key }
    // `script` runs the command on a pseudo-terminal: its stderr is a TTY there.
    const tty = spawnSync('script', ['-qec', `${process.execPath} ${BUNDLE} upload big.png`, '/dev/null'], { cwd: dir, env, timeout: 30_000 })
    const text = tty.stdout.toString('utf8')
    t.equal(tty.status, 0, text)
    t.match(text, /big\.png\s+100%\s+3\.0\/3\.0 MiB\s+[\d.]+ MiB\/s/, 'a progress line on a terminal')
    const plain = coffer(['upload', 'big.png'], dir, env)
    t.equal(plain.err, '', 'none when stderr is not a terminal')
    t.notMatch(plain.out, /\r|%/)
  },
)
