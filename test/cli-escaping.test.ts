// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { PassThrough } from 'node:stream'
import { downloadCommand, lsCommand } from '../src/cli/files'
import { webhooksCommand } from '../src/cli/webhooks'
import { tenantCommand } from '../src/cli/tenant'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { tempDir } from './helper'

// #12 item 8: whatever a stored string holds (rows written before the handshake refused control
// characters, or by hand), the CLI's tables never print it raw: no terminal escapes, no forged rows.

t.test('webhooks list and tenant list escape control and bidi characters', async (t) => {
  const dir = tempDir(t)
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  const { tenant } = core.tenants.create({ name: 'plain' })
  // Legacy rows, as an older version accepted them.
  core.sqlite!.prepare('UPDATE tenants SET name = ? WHERE id = ?').run('evil\u001b[2J\u202eeman', tenant.id)
  core.outbox.insert({
    id: 'msg_legacy',
    tenantId: tenant.id,
    fileId: '01890000-0000-7000-8000-000000000000',
    event: 'file.uploaded',
    url: 'https://example.com/a\u001b[31m\r\n01890000-0000-7000-8000-00000000dead  file.uploaded  delivered',
    payload: '{}',
    now: Date.now(),
  })
  core.close()
  const stdout = new PassThrough()
  const io = { env: { COFFER_DATA_DIR: dir }, stdout, stderr: new PassThrough() }
  t.equal(await webhooksCommand(['list'], io), 0)
  t.equal(await tenantCommand(['list'], io), 0)
  const out = (stdout.read() as Buffer).toString('utf8')
  // eslint-disable-next-line no-control-regex -- the point: no control character may appear
  t.notMatch(out, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/, 'no raw control or bidi character reaches the terminal')
  t.match(out, 'https://example.com/a\\u{1b}[31m\\u{d}\\u{a}01890000', 'shown escaped')
  t.match(out, 'evil\\u{1b}[2J\\u{202e}eman')
  t.equal(out.trimEnd().split('\n').length, 4, 'two headers and two rows: no forged row')
})

// #24: names from the file API (S3 keys, rows older than the server's own sanitising, or a server
// that is not this version) reach `coffer ls`, `coffer download` and their messages; the CLI shows
// and writes them safely whatever the server sends.

/** A stand-in API that answers one file whose every string is hostile. */
async function hostileServer(t: Test, id: string, content: Buffer) {
  const name = 'evil\u001b[2J\u202eexe.txt\r\n01890000-0000-7000-8000-00000000dead  forged'
  const file = {
    id,
    url: `/api/v1/files/${id}/download`,
    originalName: name,
    fileType: 'text/html\u009b31m',
    sizeBytes: content.length,
    context: '',
    tags: {},
    metadata: null,
    processingStatus: 'completed',
    workspaceId: null,
    createdAt: '2026-11-25T00:00:00.000Z',
  }
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/api/v1/files?')) {
      res.setHeader('content-type', 'application/json')
      return res.end(JSON.stringify({ files: [file], nextCursor: null, total: 1 }))
    }
    if (req.url === `/api/v1/files/${id}/download`) {
      res.setHeader('content-type', 'text/plain')
      res.setHeader('etag', `"${createHash('sha256').update(content).digest('hex')}"`)
      res.setHeader('content-disposition', `attachment; filename="x"; filename*=UTF-8''${encodeURIComponent(`..\\../${name}`)}`)
      return res.end(content)
    }
    res.statusCode = 404
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ error: { code: 'FILE_NOT_FOUND\u001b[31m', message: `no file \u202e${req.url}`, details: {} } }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const addr = server.address() as { port: number }
  return `http://127.0.0.1:${addr.port}`
}

// eslint-disable-next-line no-control-regex -- the point: no control or bidi character may appear
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

t.test('coffer ls, ls --json and download show and write hostile names safely', async (t) => {
  const id = '01890000-0000-7000-8000-0000000000aa'
  const content = Buffer.from('<html>hello</html>')
  const url = await hostileServer(t, id, content)
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const io = { env: { COFFER_URL: url, COFFER_API_KEY: 'sk_test_x' }, stdout, stderr }

  t.equal(await lsCommand([], io), 0)
  const table = (stdout.read() as Buffer).toString('utf8')
  t.notMatch(table, RAW, 'coffer ls: no raw control or bidi character')
  t.equal(table.trimEnd().split('\n').length, 2, 'a header and one row: no forged row')
  t.match(table, 'evil\\u{1b}[2J\\u{202e}exe.txt\\u{d}\\u{a}01890000')
  t.match(table, 'text/html\\u{9b}31m')

  t.equal(await lsCommand(['--json'], io), 0)
  const json = (stdout.read() as Buffer).toString('utf8')
  t.notMatch(json, RAW, 'coffer ls --json: none either')
  t.match(
    JSON.parse(json),
    [{ originalName: 'evil\u001b[2J\u202eexe.txt\r\n01890000-0000-7000-8000-00000000dead  forged', fileType: 'text/html\u009b31m' }],
    'the same JSON value',
  )

  const dir = tempDir(t)
  const cwd = process.cwd()
  process.chdir(dir)
  t.teardown(() => process.chdir(cwd))
  t.equal(await downloadCommand([id], io), 0)
  const written = fs.readdirSync(dir)
  t.same(written, ['evil_[2J_exe.txt__01890000-0000-7000-8000-00000000dead  forged'], 'the last segment, each unsafe character a _')
  t.ok(fs.readFileSync(path.join(dir, written[0]!)).equals(content))
  t.notOk(fs.existsSync(path.join(dir, '..', written[0]!)), 'nothing written outside the directory')
  t.notMatch((stderr.read() as Buffer).toString('utf8'), RAW, 'its message shows the safe name')

  t.equal(await downloadCommand(['01890000-0000-7000-8000-0000000000bb'], io), 1)
  const failure = (stderr.read() as Buffer).toString('utf8')
  t.notMatch(failure, RAW, 'an error message from the server is escaped too')
  t.match(failure, 'FILE_NOT_FOUND\\u{1b}[31m')
})
