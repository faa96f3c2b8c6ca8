// @suites: pg
import t from 'tap'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { databaseEnvOf, admin, createTenant, handshake, type Handshake, makeApp, putContent, TEST_DATABASE, upload } from './helper'
import { tenantCommand } from '../src/cli/tenant'
import { datasyncFile } from '../src/lib/durable'
import { INLINE_MAX_BYTES } from '../src/blobs/disk-blob-store'

// #12 item 1: what the old key made dies with it. Signed download URLs and presigned upload paths
// are keyed by the tenant's signing generation, which key regeneration bumps.

t.test('regenerating a key revokes the signed URLs and upload paths made before', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const other = await createTenant(app)
  const done = await upload(app, tenant.headers)
  const otherDone = await upload(app, other.headers)
  const signedUrl = async (headers: Record<string, string>, fileId: string) => {
    const u = new URL((await app.inject({ url: `/api/v1/files/${fileId}/signed-url?expiresIn=86400`, headers })).json().url)
    return u.pathname + u.search
  }
  const link = await signedUrl(tenant.headers, done.fileId)
  const otherLink = await signedUrl(other.headers, otherDone.fileId)
  const pending = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'later.png' })).json() as Handshake
  t.equal((await app.inject({ url: link })).statusCode, 200, 'the link works before')

  const regen = await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${tenant.id}/regenerate-key`, headers: admin })
  t.equal(regen.statusCode, 200)
  const newHeaders = { authorization: `Bearer ${regen.json().apiKey}` }

  const dead = await app.inject({ url: link })
  t.equal(dead.statusCode, 401, 'the old signed download URL is refused at once')
  t.equal(dead.json().error.code, 'UNAUTHORIZED')
  const put = await putContent(app, pending, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))
  t.equal(put.statusCode, 401, 'the old presigned upload path is refused')
  t.equal((await app.inject({ url: otherLink })).statusCode, 200, "another tenant's links are untouched")

  const fresh = await signedUrl(newHeaders, done.fileId)
  t.not(fresh, link)
  t.equal((await app.inject({ url: fresh })).statusCode, 200, 'links made with the new key work')
  t.equal((await app.inject({ url: `/api/v1/files/${done.fileId}/download`, headers: newHeaders })).statusCode, 200)
})

t.test("the CLI regenerating the key (another connection) revokes a running server's URLs too", async (t) => {
  const { app, dir } = await makeApp(t)
  const tenant = await createTenant(app)
  const done = await upload(app, tenant.headers)
  const u = new URL((await app.inject({ url: `/api/v1/files/${done.fileId}/signed-url`, headers: tenant.headers })).json().url)
  t.equal((await app.inject({ url: u.pathname + u.search })).statusCode, 200)
  const sink = new PassThrough()
  t.equal(await tenantCommand(['regenerate-key', tenant.id, '--json'], { env: { COFFER_DATA_DIR: dir, ...databaseEnvOf(dir) }, stdout: sink, stderr: sink }), 0)
  t.equal((await app.inject({ url: u.pathname + u.search })).statusCode, 401)
})

t.test('a signed URL for a missing file costs the same HMAC as one for an existing file (#12 item 6)', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const done = await upload(app, tenant.headers)
  const hmacs = t.capture(crypto, 'createHmac', crypto.createHmac)
  const token = 'ab'.repeat(32)
  const expires = Date.now() + 3_600_000
  const missing = '01890000-0000-7000-8000-000000000000'
  for (const [label, url] of [
    ['download, existing id', `/api/v1/files/${done.fileId}/download?expires=${expires}&token=${token}`],
    ['download, missing id', `/api/v1/files/${missing}/download?expires=${expires}&token=${token}`],
  ] as const) {
    const before = hmacs.args().length
    const res = await app.inject({ url })
    t.equal(res.statusCode, 401, label)
    t.equal(hmacs.args().length - before, 1, `${label}: one HMAC computed`)
  }
  for (const [label, id] of [
    ['upload, existing id', done.fileId],
    ['upload, missing id', missing],
  ] as const) {
    const before = hmacs.args().length
    const res = await app.inject({
      method: 'PUT',
      url: `/api/v1/upload/${id}?expires=${expires}&token=${token}`,
      headers: { 'content-type': 'image/png' },
      payload: 'x',
    })
    t.equal(res.statusCode, 401, label)
    t.equal(hmacs.args().length - before, 1, `${label}: one HMAC computed`)
  }
})

t.test('storing content another tenant already stored does the same durable work (dedup timing, #12 item 6)', async (t) => {
  let flushes = 0
  const { app, core } = await makeApp(t, {}, { walSync: (file) => (flushes++, datasyncFile(file)) })
  const a = await createTenant(app)
  const b = await createTenant(app)
  const png = (size: number) => Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), crypto.randomBytes(size)])
  // Content stored as a file: its directory is synced whether the content is new or not.
  const bytes = png(INLINE_MAX_BYTES + 5000)
  const sha = crypto.createHash('sha256').update(bytes).digest('hex')
  const blobDir = path.join(core.dataDir.blobs, sha.slice(0, 2), sha.slice(2, 4))
  const opens = t.capture(fs.promises, 'open', fs.promises.open)
  // args() hands over the calls made since it was last called.
  const dirSyncs = () => opens.args().filter(([p]) => p === blobDir).length
  t.equal((await upload(app, a.headers, { bytes })).put.statusCode, 200)
  t.ok(dirSyncs() >= 1, 'new content: its directory is synced')
  t.equal((await upload(app, b.headers, { bytes })).put.statusCode, 200)
  t.equal(dirSyncs(), 1, 'content stored before: its directory is synced as well')
  // Small content kept inline: new or not, the upload's durable work is the WAL flush of its commit.
  // On PostgreSQL it is the server's commit, the same either way, with no flush of ours to count (#30).
  if (TEST_DATABASE === 'postgres') {
    t.test('inline content', { skip: "its WAL flushes are SQLite's; on PostgreSQL the durable work is the server's commit" }, () => {})
    return
  }
  const small = png(5000)
  flushes = 0
  t.equal((await upload(app, a.headers, { bytes: small })).put.statusCode, 200)
  t.ok(flushes >= 1, 'new inline content: a WAL flush makes it durable')
  flushes = 0
  t.equal((await upload(app, b.headers, { bytes: small })).put.statusCode, 200)
  t.ok(flushes >= 1, 'content stored inline before: a WAL flush as well (no file work either way)')
})

t.test('the authentication cache: a key checked a moment ago stops at once when rotated or its tenant deleted, by either path', async (t) => {
  const { app, dir } = await makeApp(t)
  const sink = new PassThrough()
  const cli = (args: string[]) => tenantCommand(args, { env: { COFFER_DATA_DIR: dir, ...databaseEnvOf(dir) }, stdout: sink, stderr: sink })
  const info = (headers: Record<string, string>) => app.inject({ url: '/api/v1/tenant/info', headers }).then((r) => r.statusCode)
  const bearer = (key: string) => ({ authorization: `Bearer ${key}` })
  const a = await createTenant(app)
  const b = await createTenant(app)
  // Warm: each key has just been verified, so it is in the cache.
  t.equal(await info(a.headers), 200)
  t.equal(await info(b.headers), 200)
  // A key of the right shape that is nobody's, and a key one character off, are refused.
  t.equal(await info(bearer(`sk_live_${'A'.repeat(43)}`)), 401)
  const key = a.headers.authorization.slice('Bearer '.length)
  t.equal(await info(bearer(key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'))), 401, 'a near miss of a cached key is refused')

  // Rotation through the admin API (this server's own connection).
  const regen = await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${a.id}/regenerate-key`, headers: admin })
  t.equal(regen.statusCode, 200)
  t.equal(await info(a.headers), 401, 'the old key is refused on the very next request')
  const a2 = bearer(regen.json().apiKey)
  t.equal(await info(a2), 200)
  t.equal(await info(b.headers), 200, "another tenant's key still works")

  // Rotation through the CLI (another connection, seen through data_version).
  t.equal(await info(a2), 200)
  t.equal(await cli(['regenerate-key', a.id, '--json']), 0)
  t.equal(await info(a2), 401, 'a key rotated by the CLI is refused on the very next request')

  // Deletion through the CLI and through the admin API.
  t.equal(await info(b.headers), 200)
  t.equal(await cli(['delete', b.id, '--yes']), 0)
  t.equal(await info(b.headers), 401, 'the key of a tenant the CLI deleted is refused on the very next request')
  const c = await createTenant(app)
  t.equal(await info(c.headers), 200)
  const deleted = await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${c.id}`, headers: admin })
  t.equal(deleted.statusCode, 204, deleted.body)
  t.equal(await info(c.headers), 401, 'the key of a tenant the admin API deleted is refused on the very next request')
})
