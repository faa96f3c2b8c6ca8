// @suites: pg
// COFFER_FILE_TYPES widens the API's supported types beyond the spec's six: the real `coffer upload`
// stores a .txt only when the server allows it (the spec's INVALID_FILE_TYPE otherwise), tenants'
// allowedFileTypes are chosen from the server's set (admin API and `coffer tenant update --types`),
// and the handshake, the PUT's signature check and the listing agree. On SQLite and, with
// COFFER_TEST_DATABASE=postgres, on PostgreSQL.
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { PassThrough } from 'node:stream'
import t, { type Test } from 'tap'
import { tenantCommand } from '../src/cli/tenant'
import { UsageError } from '../src/cli/io'
import { ConfigError, loadConfig } from '../src/config'
import { admin, bearer, createTenant, databaseEnvOf, makeApp, putContent, tempDir, testDatabaseEnv } from './helper'
import { BUNDLE, buildBundle, startCoffer } from './process-helper'

buildBundle()

// Three servers and the CLI on a loaded machine.
t.setTimeout(300_000)

const ADMIN = 'file-types-admin-key-0123456789'
const KEY = 'sk_live_filetypesfixturekey0123456789'

/** A server on a new data dir whose tenant has the fixed key KEY (on the test's database), with `env`. */
async function serve(t: Test, env: Record<string, string> = {}, flags: string[] = []) {
  const cwd = tempDir(t)
  const dataDir = path.join(cwd, 'data')
  const server = await startCoffer(['serve', '--port', '0', '--s3-port', 'off', '--data-dir', dataDir, '--tenant-api-key', KEY, ...flags], {
    cwd,
    timeoutMs: 60_000,
    env: { COFFER_ADMIN_API_KEY: ADMIN, ...(await testDatabaseEnv(t, dataDir)), ...env },
  })
  t.teardown(() => void server.child.kill('SIGKILL'))
  return { url: server.url, cwd }
}

function coffer(args: string[], cwd: string, env: Record<string, string>) {
  const r = spawnSync(process.execPath, [BUNDLE, ...args], { cwd, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 })
  return { status: r.status, out: r.stdout.toString('utf8'), err: r.stderr.toString('utf8') }
}

const api = (url: string, p: string, init: RequestInit = {}) =>
  fetch(`${url}${p}`, { ...init, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...init.headers } })

t.test('coffer upload of a .txt: the spec INVALID_FILE_TYPE by default, stored as text/plain when COFFER_FILE_TYPES allows it', async (t) => {
  const text = 'meeting notes: nothing decided\n'
  const refused = await serve(t)
  fs.writeFileSync(path.join(refused.cwd, 'notes.txt'), text)
  const r = coffer(['upload', 'notes.txt'], refused.cwd, { COFFER_URL: refused.url, COFFER_API_KEY: KEY })
  t.equal(r.status, 1, r.err)
  t.equal(r.out, '', 'nothing uploaded')
  t.match(r.err, /^coffer: notes\.txt: File type "text\/plain" is not allowed \(INVALID_FILE_TYPE\)\n$/)
  const hs = await api(refused.url, '/api/v1/upload/request', { method: 'POST', body: JSON.stringify({ fileType: 'text/plain', fileName: 'n.txt' }) })
  t.equal(hs.status, 400)
  t.match(await hs.json(), { error: { code: 'INVALID_FILE_TYPE', details: { fileType: 'text/plain' } } })
  t.equal((await (await api(refused.url, '/api/v1/files')).json()).total, 0)

  for (const setting of ['*', 'text/plain']) {
    // The setting from the environment, and as serve's flag.
    const open = setting === '*' ? await serve(t, { COFFER_FILE_TYPES: setting }) : await serve(t, {}, ['--file-types', setting])
    const env = { COFFER_URL: open.url, COFFER_API_KEY: KEY }
    fs.writeFileSync(path.join(open.cwd, 'notes.txt'), text)
    const ok = coffer(['upload', 'notes.txt', '--json'], open.cwd, env)
    t.equal(ok.status, 0, ok.err)
    const [file] = JSON.parse(ok.out) as { id: string; fileType: string; sizeBytes: number; processingStatus: string }[]
    t.match(file, { fileType: 'text/plain', sizeBytes: Buffer.byteLength(text), processingStatus: 'completed' }, setting)
    const down = await api(open.url, `/api/v1/files/${file!.id}/download`)
    t.equal(down.status, 200)
    t.equal(down.headers.get('content-type')?.split(';')[0], 'text/plain')
    t.equal(await down.text(), text, 'the bytes stored are the file')
    const listed = await (await api(open.url, '/api/v1/files?fileType=text/plain')).json()
    t.equal(listed.total, 1, `${setting}: the listing's fileType filter takes the type`)
    t.equal(listed.files[0].id, file!.id)
    // The tenant made on this server allows what the server supports.
    const info = await (await api(open.url, '/api/v1/tenant/info')).json()
    t.same(
      info.allowedFileTypes,
      setting === '*' ? ['*'] : ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf', 'text/plain'],
    )

    // A file whose extension says nothing goes as application/octet-stream: stored under `*`,
    // the spec's error where only text/plain was added.
    fs.writeFileSync(path.join(open.cwd, 'blob.bin'), Buffer.from([0, 1, 2, 3, 250]))
    fs.writeFileSync(path.join(open.cwd, 'data.raw'), 'no known extension')
    const bin = coffer(['upload', 'blob.bin', 'data.raw', '--json'], open.cwd, env)
    if (setting === '*') {
      t.equal(bin.status, 0, bin.err)
      t.same(
        (JSON.parse(bin.out) as { fileType: string }[]).map((f) => f.fileType),
        ['application/octet-stream', 'application/octet-stream'],
      )
    } else {
      t.equal(bin.status, 1)
      t.match(bin.err, /^coffer: blob\.bin: File type "application\/octet-stream" is not allowed \(INVALID_FILE_TYPE\)\n/)
    }
  }
})

t.test('with COFFER_FILE_TYPES=*, the six keep their signature check and other types are taken as declared', async (t) => {
  const { app } = await makeApp(t, { COFFER_FILE_TYPES: '*' })
  const tenant = await createTenant(app)
  const hs = (body: Record<string, unknown>) => app.inject({ method: 'POST', url: '/api/v1/upload/request', headers: tenant.headers, payload: body })
  const png = await hs({ fileType: 'image/png', fileName: 'fake.png' })
  t.equal(png.statusCode, 200)
  const fake = await putContent(app, png, 'not a png at all', 'image/png')
  t.equal(fake.statusCode, 400)
  t.equal(fake.json().error.code, 'INVALID_FILE_TYPE', 'a declared PNG must still carry the PNG signature')

  const csv = await hs({ fileType: 'text/csv', fileName: 'a.csv' })
  t.equal(csv.statusCode, 200)
  t.same(csv.json().uploadMetadata.allowedTypes, ['*'])
  const put = await putContent(app, csv, 'a,b\n1,2\n', 'text/csv')
  t.equal(put.statusCode, 200, put.body)
  t.match(put.json(), { fileType: 'text/csv', processingStatus: 'completed', sizeBytes: 8 })
  const mismatch = await putContent(app, await hs({ fileType: 'text/csv', fileName: 'b.csv' }), 'x', 'text/plain')
  t.equal(mismatch.statusCode, 400)
  t.equal(mismatch.json().error.code, 'INVALID_FILE_TYPE', 'the Content-Type must still be the declared type')

  for (const bad of ['Text/Plain', 'text', 'text/plain; charset=utf-8', '*']) {
    const res = await hs({ fileType: bad, fileName: 'x.txt' })
    t.equal(res.statusCode, 400, bad)
    t.equal(res.json().error.code, 'INVALID_FILE_TYPE', bad)
  }
  const badFilter = await app.inject({ url: '/api/v1/files?fileType=nope', headers: tenant.headers })
  t.equal(badFilter.statusCode, 400)
  t.equal(badFilter.json().error.details.errors[0].path, '/query/fileType')
})

t.test('allowedFileTypes beyond the six: refused naming the setting by default, accepted when the server supports them', async (t) => {
  const spec = await makeApp(t)
  const a = await createTenant(spec.app)
  const res = await spec.app.inject({
    method: 'PATCH',
    url: `/api/v1/admin/tenants/${a.id}`,
    headers: admin,
    payload: { allowedFileTypes: ['image/png', 'text/plain'] },
  })
  t.equal(res.statusCode, 400)
  t.equal(res.json().error.code, 'VALIDATION_ERROR')
  t.equal(res.json().error.details.errors[0].path, '/allowedFileTypes/1')
  t.match(res.json().error.details.errors[0].message, /COFFER_FILE_TYPES/)
  const star = await spec.app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'star', allowedFileTypes: ['*'] } })
  t.equal(star.statusCode, 400, '* only where the server supports any type')
  t.equal(star.json().error.details.errors[0].path, '/allowedFileTypes/0')

  const wide = await makeApp(t, { COFFER_FILE_TYPES: 'text/plain,application/zip' })
  const created = await wide.app.inject({
    method: 'POST',
    url: '/api/v1/admin/tenants',
    headers: admin,
    payload: { name: 'wide', allowedFileTypes: ['application/zip', 'image/png', 'text/plain', 'image/png'] },
  })
  t.equal(created.statusCode, 201)
  t.same(created.json().allowedFileTypes, ['image/png', 'application/zip', 'text/plain'], "the spec's types first, then the others as given, no duplicates")
  const key = bearer(created.json().apiKey)
  const zip = await wide.app.inject({
    method: 'POST',
    url: '/api/v1/upload/request',
    headers: key,
    payload: { fileType: 'application/zip', fileName: 'a.zip' },
  })
  t.equal(zip.statusCode, 200)
  const pdf = await wide.app.inject({
    method: 'POST',
    url: '/api/v1/upload/request',
    headers: key,
    payload: { fileType: 'application/pdf', fileName: 'a.pdf' },
  })
  t.equal(pdf.statusCode, 400, "the tenant's list still narrows the server's")
  t.match(pdf.json().error, { code: 'INVALID_FILE_TYPE', details: { allowedTypes: ['image/png', 'application/zip', 'text/plain'] } })
  const gz = await wide.app.inject({
    method: 'PATCH',
    url: `/api/v1/admin/tenants/${created.json().id}`,
    headers: admin,
    payload: { allowedFileTypes: ['application/gzip'] },
  })
  t.equal(gz.statusCode, 400, 'a type the server does not list')
})

function cliIo(env: Record<string, string>) {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  return { io: { env, stdout, stderr }, out: () => (stdout.read() as Buffer | null)?.toString('utf8') ?? '' }
}

t.test('coffer tenant update --types text/plain: refused by default naming the setting, accepted when the server allows it', async (t) => {
  const { app, dir, core } = await makeApp(t)
  const tenant = await createTenant(app)
  const env = { COFFER_DATA_DIR: dir, ...databaseEnvOf(dir) }
  const plain = cliIo(env)
  await t.rejects(tenantCommand(['update', tenant.id, '--types', 'text/plain'], plain.io), UsageError)
  await t.rejects(tenantCommand(['update', tenant.id, '--types', 'text/plain'], plain.io), {
    message:
      /^--types: must be among: image\/jpeg, .*application\/pdf \(not "text\/plain"\); the server setting COFFER_FILE_TYPES \(--file-types\) widens them$/,
  })
  t.same(core.tenants.show(tenant.id).allowedFileTypes.length, 6, 'nothing changed')

  const widened = cliIo({ ...env, COFFER_FILE_TYPES: 'text/plain' })
  t.equal(await tenantCommand(['update', tenant.id, '--types', 'text/plain', '--json'], widened.io), 0)
  t.same(JSON.parse(widened.out()).allowedFileTypes, ['text/plain'])
  const flag = cliIo(env)
  t.equal(await tenantCommand(['update', tenant.id, '--types', '*', '--file-types', '*', '--json'], flag.io), 0)
  t.same(JSON.parse(flag.out()).allowedFileTypes, ['*'], '--file-types as the server is given it')
  t.same(core.tenants.show(tenant.id).allowedFileTypes, ['*'])
  const create = cliIo({ ...env, COFFER_FILE_TYPES: 'text/plain' })
  t.equal(await tenantCommand(['create', '--name', 'made offline', '--json'], create.io), 0)
  t.same(JSON.parse(create.out()).allowedFileTypes, ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf', 'text/plain'])
})

t.test('COFFER_FILE_TYPES values', async (t) => {
  t.same(loadConfig({ COFFER_FILE_TYPES: ' Text/Plain , application/zip ' }).fileTypes, ['text/plain', 'application/zip'])
  t.same(loadConfig({}, { 'file-types': '*' }).fileTypes, ['*'])
  t.equal(loadConfig({}).fileTypes, undefined)
  for (const bad of ['text', 'text/plain;charset=utf-8', ',', 'a/b c']) {
    t.throws(() => loadConfig({ COFFER_FILE_TYPES: bad }), ConfigError, bad)
    t.throws(() => loadConfig({ COFFER_FILE_TYPES: bad }), { message: /^invalid configuration: COFFER_FILE_TYPES=.* must be lower-case MIME types/ }, bad)
  }
})
