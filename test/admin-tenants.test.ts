// @suites: pg-all
import t from 'tap'
import { databaseEnvOf, admin, bearer, createTenant, fileBytes, handshake, makeApp, upload } from './helper'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import type { App } from '../src/http/types'

const SUMMARY_KEYS = ['allowedFileTypes', 'createdAt', 'fileCount', 'id', 'name', 'quotaBytes', 'selfServiceS3Credentials', 'usedBytes']
const UNKNOWN_ID = '01890000-0000-7000-8000-000000000000'

const get = (app: App, url: string) => app.inject({ url, headers: admin })
const patch = (app: App, id: string, payload: unknown) =>
  app.inject({ method: 'PATCH', url: `/api/v1/admin/tenants/${id}`, headers: admin, payload: payload as object })
const del = (app: App, id: string) => app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${id}`, headers: admin })

t.test('GET /api/v1/admin/tenants pages newest first, visits each tenant once, lists usage and no secret', async (t) => {
  const { app, clock } = await makeApp(t)
  const empty = await get(app, '/api/v1/admin/tenants')
  t.equal(empty.statusCode, 200)
  t.same(empty.json(), { tenants: [], nextCursor: null })
  const ids: string[] = []
  for (let i = 0; i < 5; i++) {
    ids.push((await createTenant(app, { name: `t${i}` })).id)
    // Two tenants in the same millisecond too: the id breaks the tie.
    if (i !== 2) clock.advance(1000)
  }
  const first = await createTenant(app, { name: 'with-files', quotaBytes: 10_000 })
  await upload(app, first.headers, { bytes: fileBytes('image/png', 300) })
  await upload(app, first.headers, { bytes: fileBytes('image/png', 200, 2) })
  await handshake(app, first.headers, { fileType: 'application/pdf', fileName: 'a.pdf', fileSizeBytes: 50 })
  ids.push(first.id)

  const seen: Record<string, unknown>[] = []
  let cursor: string | null = null
  do {
    const res = await get(app, `/api/v1/admin/tenants?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
    t.equal(res.statusCode, 200)
    const body = res.json() as { tenants: Record<string, unknown>[]; nextCursor: string | null }
    t.ok(body.tenants.length <= 2)
    seen.push(...body.tenants)
    cursor = body.nextCursor
  } while (cursor !== null)
  t.same(
    seen.map((x) => x.id),
    [...ids].reverse(),
    'every tenant once, newest first',
  )
  for (const x of seen) t.same(Object.keys(x).sort(), SUMMARY_KEYS, 'no key or webhook secret in a listing')
  const withFiles = seen.find((x) => x.id === first.id)!
  t.match(withFiles, { name: 'with-files', quotaBytes: 10_000, usedBytes: 550, fileCount: 3, createdAt: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/ })
  t.match(
    seen.find((x) => x.id === ids[0]),
    { usedBytes: 0, fileCount: 0, quotaBytes: 524288000 },
  )
  const all = await get(app, '/api/v1/admin/tenants?limit=100')
  t.equal(all.json().tenants.length, 6)
  t.equal(all.json().nextCursor, null)
})

t.test('GET /api/v1/admin/tenants: bad limit and cursor are 400, no admin key is 401', async (t) => {
  const { app } = await makeApp(t)
  for (const q of ['limit=0', 'limit=101', 'limit=x', 'cursor=bogus', `cursor=${Buffer.from('1.x').toString('base64url')}`, 'other=1']) {
    const res = await get(app, `/api/v1/admin/tenants?${q}`)
    t.equal(res.statusCode, 400, q)
    t.equal(res.json().error.code, 'VALIDATION_ERROR', q)
  }
  const tenant = await createTenant(app)
  t.equal((await app.inject({ url: '/api/v1/admin/tenants' })).statusCode, 401)
  t.equal((await app.inject({ url: '/api/v1/admin/tenants', headers: tenant.headers })).statusCode, 401, 'a tenant key is not the admin key')
  t.equal((await app.inject({ url: `/api/v1/admin/tenants/${tenant.id}`, headers: tenant.headers })).statusCode, 401)
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${tenant.id}`, headers: tenant.headers })).statusCode, 401)
  t.equal((await get(app, `/api/v1/admin/tenants/${tenant.id}`)).statusCode, 200, 'and nothing was deleted')
})

t.test('GET /api/v1/admin/tenants/:id shows one tenant; unknown and malformed ids are 404 TENANT_NOT_FOUND', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app, { name: 'Shown', quotaBytes: 5000, allowedFileTypes: ['application/pdf'] })
  await upload(app, tenant.headers, { type: 'application/pdf', name: 'a.pdf', bytes: fileBytes('application/pdf', 100) })
  const res = await get(app, `/api/v1/admin/tenants/${tenant.id}`)
  t.equal(res.statusCode, 200)
  t.same(Object.keys(res.json()).sort(), SUMMARY_KEYS)
  t.match(res.json(), { id: tenant.id, name: 'Shown', quotaBytes: 5000, usedBytes: 100, fileCount: 1, allowedFileTypes: ['application/pdf'] })
  t.equal((await get(app, `/api/v1/admin/tenants/${tenant.id.toUpperCase()}`)).json().id, tenant.id, 'UUIDs are case-insensitive')
  for (const id of [UNKNOWN_ID, 'not-a-uuid']) {
    const r = await get(app, `/api/v1/admin/tenants/${id}`)
    t.equal(r.statusCode, 404)
    t.equal(r.json().error.code, 'TENANT_NOT_FOUND')
  }
})

t.test('PATCH /api/v1/admin/tenants/:id changes name, quota and types, which count at the next request', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app, { name: 'Home', quotaBytes: 1000 })
  await upload(app, tenant.headers, { bytes: fileBytes('image/png', 600) })
  t.equal((await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'b.png', fileSizeBytes: 900 })).statusCode, 403, 'full before')

  const grown = await patch(app, tenant.id, { quotaBytes: 1_000_000 })
  t.equal(grown.statusCode, 200)
  t.match(grown.json(), { id: tenant.id, name: 'Home', quotaBytes: 1_000_000, usedBytes: 600, fileCount: 1 })
  t.same(Object.keys(grown.json()).sort(), SUMMARY_KEYS)
  t.equal((await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'b.png', fileSizeBytes: 900 })).statusCode, 200, 'fits after growing')
  t.equal((await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json().quotaBytes, 1_000_000)

  const shrunk = await patch(app, tenant.id, { quotaBytes: 100 })
  t.equal(shrunk.statusCode, 200, 'a quota below usage is allowed')
  t.equal(shrunk.json().usedBytes, 1500)
  const refused = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'c.png', fileSizeBytes: 1 })
  t.equal(refused.statusCode, 403)
  t.match(refused.json().error, { code: 'QUOTA_EXCEEDED', details: { scope: 'tenant', quotaBytes: 100, usedBytes: 1500 } })

  const typed = await patch(app, tenant.id, {
    name: 'Home Library',
    allowedFileTypes: ['application/pdf', 'image/jpeg', 'application/pdf'],
    quotaBytes: 1_000_000,
  })
  t.equal(typed.statusCode, 200)
  t.match(typed.json(), { name: 'Home Library', allowedFileTypes: ['image/jpeg', 'application/pdf'] })
  const png = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'd.png' })
  t.equal(png.statusCode, 400, 'the authenticated tenant is not served from a stale cache')
  t.equal(png.json().error.code, 'INVALID_FILE_TYPE')
  t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })).json().name, 'Home Library')
  t.equal((await app.inject({ url: '/api/v1/files', headers: tenant.headers })).json().total, 2, 'stored files keep their type')
  t.equal((await patch(app, tenant.id, { name: 'home library' })).statusCode, 200, 'its own name in another case is not a conflict')
})

t.test('PATCH validation, conflicts and unknown tenants', async (t) => {
  const { app } = await makeApp(t)
  const a = await createTenant(app, { name: 'Alpha' })
  await createTenant(app, { name: 'Beta' })
  const bad: [unknown, string][] = [
    [{}, '/'],
    [{ quotaBytes: -1 }, '/quotaBytes'],
    [{ quotaBytes: 1.5 }, '/quotaBytes'],
    [{ quotaBytes: '10' }, '/quotaBytes'],
    [{ name: '' }, '/name'],
    [{ name: 'a\u0007b' }, '/name'],
    [{ name: 'x'.repeat(101) }, '/name'],
    [{ allowedFileTypes: [] }, '/allowedFileTypes'],
    [{ allowedFileTypes: ['text/html'] }, '/allowedFileTypes/0'],
    [{ apiKey: 'sk_live_x' }, '/apiKey'],
  ]
  for (const [body, path] of bad) {
    const res = await patch(app, a.id, body)
    t.equal(res.statusCode, 400, JSON.stringify(body))
    t.equal(res.json().error.code, 'VALIDATION_ERROR')
    t.equal(res.json().error.details.errors[0].path, path, JSON.stringify(body))
  }
  const taken = await patch(app, a.id, { name: 'BETA' })
  t.equal(taken.statusCode, 409)
  t.match(taken.json().error, { code: 'CONFLICT', details: { field: 'name' } })
  t.equal((await get(app, `/api/v1/admin/tenants/${a.id}`)).json().name, 'Alpha', 'nothing changed')
  const missing = await patch(app, UNKNOWN_ID, { name: 'x' })
  t.equal(missing.statusCode, 404)
  t.equal(missing.json().error.code, 'TENANT_NOT_FOUND')
})

t.test('DELETE /api/v1/admin/tenants/:id: key, signed and presigned URLs stop at once; files, workspaces and pending webhooks go', async (t) => {
  const { app, core, clock } = await makeApp(t, { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true', COFFER_DELETED_RETENTION_SECONDS: '60' })
  const doomed = await createTenant(app, { name: 'Doomed' })
  const other = await createTenant(app, { name: 'Other' })
  const shared = fileBytes('image/png', 2000, 7)
  const own = fileBytes('image/png', 3000, 8)
  const ws = await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers: doomed.headers, payload: { name: 'W', slug: 'w' } })
  t.equal(ws.statusCode, 201)
  const kept = await upload(app, doomed.headers, { bytes: own, extra: { workspaceId: ws.json().id, webhookUrl: 'http://127.0.0.1:9/hook' } })
  t.equal(kept.put.statusCode, 200)
  await upload(app, doomed.headers, { bytes: shared })
  const othersFile = await upload(app, other.headers, { bytes: shared })
  const pending = (await handshake(app, doomed.headers, { fileType: 'image/png', fileName: 'p.png', fileSizeBytes: 10 })).json()
  const signed = (await app.inject({ url: `/api/v1/files/${kept.fileId}/signed-url`, headers: doomed.headers })).json()
  const signedPath = new URL(signed.url).pathname + new URL(signed.url).search
  t.equal((await app.inject({ url: signedPath })).statusCode, 200, 'the signed URL works before')
  t.equal(core.outbox.counts().pending, 1, 'a webhook waits for delivery (the scheduler is not running)')
  const s3 = core.s3Credentials.create(doomed.id)
  t.ok(core.s3Credentials.lookup(s3.accessKeyId), 'an S3 credential works before')

  const res = await del(app, doomed.id)
  t.equal(res.statusCode, 204)
  t.equal(res.body, '')

  const info = await app.inject({ url: '/api/v1/tenant/info', headers: doomed.headers })
  t.equal(info.statusCode, 401, 'the key stops at once')
  const viaSigned = await app.inject({ url: signedPath })
  t.equal(viaSigned.statusCode, 401, 'a deleted tenant verifies no signed URL')
  t.equal(viaSigned.json().error.code, 'UNAUTHORIZED')
  const put = await app.inject({ method: 'PUT', url: pending.presignedUrl, payload: fileBytes('image/png', 10) })
  t.equal(put.statusCode, 401, 'nor a presigned upload URL')
  t.equal((await get(app, `/api/v1/admin/tenants/${doomed.id}`)).statusCode, 404)
  t.equal((await del(app, doomed.id)).statusCode, 404, 'a second delete finds nothing')
  t.same(
    (await get(app, '/api/v1/admin/tenants')).json().tenants.map((x: { id: string }) => x.id),
    [other.id],
  )
  t.equal(core.outbox.counts().pending, 0, 'pending webhook dropped')
  t.notOk(core.s3Credentials.lookup(s3.accessKeyId), 'its S3 credentials stop too')
  const live = core.db.prepare('SELECT count(*) AS n FROM files WHERE tenant_id = ? AND deleted_at IS NULL').get(doomed.id) as { n: number }
  t.equal(live.n, 0, 'every file deleted')
  const wsLive = core.db.prepare('SELECT count(*) AS n FROM workspaces WHERE tenant_id = ? AND deleted_at IS NULL').get(doomed.id) as { n: number }
  t.equal(wsLive.n, 0, 'every workspace deleted')

  // The name is free again, and the other tenant is untouched.
  const again = await createTenant(app, { name: 'doomed' })
  t.equal((await app.inject({ url: '/api/v1/files', headers: again.headers })).json().total, 0, 'a new tenant of that name sees nothing of the old')
  t.equal((await app.inject({ url: `/api/v1/files/${othersFile.fileId}/download`, headers: other.headers })).statusCode, 200)

  // Blobs go like any deleted file's: after the retention, unless another tenant's file holds them.
  t.same(await core.gc.collect(), { filesPurged: 0, blobsRemoved: 0, bytesFreed: 0, tenantsPurged: 0 }, 'nothing before the retention')
  clock.advance(61_000)
  t.same(await core.gc.collect(), { filesPurged: 3, blobsRemoved: 1, bytesFreed: 3000, tenantsPurged: 1 })
  const download = await app.inject({ url: `/api/v1/files/${othersFile.fileId}/download`, headers: other.headers })
  t.equal(download.statusCode, 200)
  t.ok(download.rawPayload.equals(shared), 'the shared content stays for the other tenant')
  for (const table of ['tenants', 'workspaces', 'files', 'outbox', 's3_credentials', 's3_uploads']) {
    const col = table === 'tenants' ? 'id' : 'tenant_id'
    const n = core.db.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${col} = ?`).get(doomed.id) as { n: number }
    t.equal(n.n, 0, `no ${table} row of the deleted tenant remains`)
  }
  const verify = await core.gc.verify()
  t.same({ missing: verify.missing, corrupt: verify.corrupt, orphans: verify.orphans }, { missing: [], corrupt: [], orphans: [] })
})

t.test('a tenant deleted by another process (the CLI) is refused at the next request, its URLs too', async (t) => {
  const { app, dir } = await makeApp(t)
  const tenant = await createTenant(app)
  const { fileId } = await upload(app, tenant.headers)
  const signed = (await app.inject({ url: `/api/v1/files/${fileId}/signed-url`, headers: tenant.headers })).json()
  const path = new URL(signed.url).pathname + new URL(signed.url).search
  t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })).statusCode, 200, 'authenticated once: remembered')
  t.equal((await app.inject({ url: path })).statusCode, 200)
  const cli = createCore(loadConfig(databaseEnvOf(dir), { 'data-dir': dir }))
  cli.tenants.delete(tenant.id)
  cli.close()
  t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })).statusCode, 401)
  t.equal((await app.inject({ url: path })).statusCode, 401)
  t.equal((await app.inject({ url: `/api/v1/files/${fileId}`, headers: bearer(tenant.apiKey) })).statusCode, 401)
})

t.test('several tenants can be deleted, each answering 204 (their placeholders do not collide), and their names are free again', async (t) => {
  const { app } = await makeApp(t)
  const names = ['First', 'Second', 'Third']
  const tenants = await Promise.all(names.map((name) => createTenant(app, { name })))
  for (const tenant of tenants) {
    const res = await del(app, tenant.id)
    t.equal(res.statusCode, 204, res.body)
    t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })).statusCode, 401)
  }
  const list = await app.inject({ url: '/api/v1/admin/tenants', headers: admin })
  t.same(list.json().tenants, [], 'no deleted tenant is listed')
  for (const name of names) t.equal((await createTenant(app, { name })).id.length, 36, `the name ${name} can be taken again`)
})
