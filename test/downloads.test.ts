// @suites: pg s3
import t from 'tap'
import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { createTenant, fileBytes, makeApp, upload } from './helper'

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

t.test('download with the tenant key: bytes and headers', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const bytes = fileBytes('application/pdf', 5000)
  const r = await upload(app, tenant.headers, { type: 'application/pdf', name: "Résumé 'final'; 50% v2.pdf", bytes })
  const res = await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
  t.equal(res.statusCode, 200)
  t.ok(res.rawPayload.equals(bytes), 'byte for byte')
  t.equal(res.headers['content-type'], 'application/pdf')
  t.equal(res.headers['content-length'], '5000')
  t.equal(
    res.headers['content-disposition'],
    `attachment; filename="R_sum_ 'final'; 50_ v2.pdf"; filename*=UTF-8''R%C3%A9sum%C3%A9%20%27final%27%3B%2050%25%20v2.pdf`,
  )
  t.equal(res.headers.etag, `"${sha(bytes)}"`)
  t.equal(res.headers['accept-ranges'], 'bytes')
  t.equal(res.headers['x-content-type-options'], 'nosniff')
  t.equal(res.headers['cache-control'], 'private, no-cache')
  const inline = await app.inject({ url: `/api/v1/files/${r.fileId}/download?disposition=inline`, headers: tenant.headers })
  t.match(inline.headers['content-disposition'], /^inline; filename="/)
  const badDisposition = await app.inject({ url: `/api/v1/files/${r.fileId}/download?disposition=evil`, headers: tenant.headers })
  t.equal(badDisposition.statusCode, 400)
  const tracking = await app.inject({ url: `/api/v1/files/${r.fileId}/download?utm_source=chat`, headers: tenant.headers })
  t.equal(tracking.statusCode, 200, 'unknown query parameters on downloads are tolerated')
})

t.test('Range, If-None-Match, If-Range and HEAD', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const bytes = fileBytes('image/png', 1000)
  const r = await upload(app, tenant.headers, { bytes })
  const url = `/api/v1/files/${r.fileId}/download`
  const get = (headers: Record<string, string>, method: 'GET' | 'HEAD' = 'GET') => app.inject({ method, url, headers: { ...tenant.headers, ...headers } })
  const cases: [string, number, number][] = [
    ['bytes=0-9', 0, 9],
    ['bytes=990-', 990, 999],
    ['bytes=-10', 990, 999],
    ['bytes=500-5000', 500, 999],
    ['bytes=-5000', 0, 999],
    ['bytes=999-999', 999, 999],
  ]
  for (const [range, start, end] of cases) {
    const res = await get({ range })
    t.equal(res.statusCode, 206, range)
    t.equal(res.headers['content-range'], `bytes ${start}-${end}/1000`, range)
    t.equal(res.headers['content-length'], String(end - start + 1), range)
    t.ok(res.rawPayload.equals(bytes.subarray(start, end + 1)), `${range} bytes`)
  }
  for (const range of ['bytes=1000-', 'bytes=5000-6000', 'bytes=-0']) {
    const res = await get({ range })
    t.equal(res.statusCode, 416, range)
    t.equal(res.headers['content-range'], 'bytes */1000')
    t.equal(res.json().error.code, 'RANGE_NOT_SATISFIABLE')
  }
  for (const range of ['bytes=0-1,5-6', 'items=0-1', 'bytes=9-3', 'garbage']) {
    const res = await get({ range })
    t.equal(res.statusCode, 200, `${range} is ignored`)
    t.equal(res.rawPayload.length, 1000)
  }
  const etag = `"${sha(bytes)}"`
  for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
    const res = await get({ 'if-none-match': inm })
    t.equal(res.statusCode, 304, inm)
    t.equal(res.rawPayload.length, 0)
    t.equal(res.headers.etag, etag)
  }
  t.equal((await get({ 'if-none-match': '"other"' })).statusCode, 200)
  t.equal((await get({ range: 'bytes=0-9', 'if-range': etag })).statusCode, 206, 'If-Range matching: range honoured')
  t.equal((await get({ range: 'bytes=0-9', 'if-range': '"stale"' })).statusCode, 200, 'If-Range stale: whole file')
  const head = await get({}, 'HEAD')
  t.equal(head.statusCode, 200)
  t.equal(head.headers['content-length'], '1000')
  t.equal(head.headers['content-type'], 'image/png')
  t.equal(head.headers.etag, etag)
  t.equal(head.rawPayload.length, 0)
  const headRange = await get({ range: 'bytes=0-9' }, 'HEAD')
  t.equal(headRange.statusCode, 206)
  t.equal(headRange.headers['content-length'], '10')
})

t.test('If-None-Match with Cache-Control: no-cache, as every fetch() sends it, answers 304 (#24)', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const bytes = fileBytes('image/png', 1000)
  const r = await upload(app, tenant.headers, { bytes })
  const url = `/api/v1/files/${r.fileId}/download`
  const etag = `"${sha(bytes)}"`
  for (const cacheControl of ['no-cache', 'max-age=0', 'no-cache, no-store', 'no-store,no-cache']) {
    const res = await app.inject({ url, headers: { ...tenant.headers, 'if-none-match': etag, 'cache-control': cacheControl, pragma: 'no-cache' } })
    t.equal(res.statusCode, 304, `Cache-Control: ${cacheControl}`)
    t.equal(res.rawPayload.length, 0)
  }
  const other = await app.inject({ url, headers: { ...tenant.headers, 'if-none-match': '"other"', 'cache-control': 'no-cache' } })
  t.equal(other.statusCode, 200, 'a tag that does not match still gets the content')

  // Node's fetch (undici) adds `Cache-Control: no-cache` and `Pragma: no-cache` to a request with a
  // conditional header, as browsers do (Fetch standard, HTTP-network-or-cache fetch).
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const first = await fetch(`http://127.0.0.1:${port}${url}`, { headers: tenant.headers })
  t.equal(first.status, 200)
  const again = await fetch(`http://127.0.0.1:${port}${url}`, { headers: { ...tenant.headers, 'if-none-match': first.headers.get('etag')! } })
  t.equal(again.status, 304, 'fetch() revalidating with the ETag it was given')
  const signed = (await app.inject({ url: `/api/v1/files/${r.fileId}/signed-url`, headers: tenant.headers })).json<{ url: string }>()
  const u = new URL(signed.url)
  const viaLink = await fetch(`http://127.0.0.1:${port}${u.pathname}${u.search}`, { headers: { 'if-none-match': etag } })
  t.equal(viaLink.status, 304, 'and through a signed URL')
})

t.test('pending, failed and missing content answer 404', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app)
  const pending = (
    await app.inject({ method: 'POST', url: '/api/v1/upload/request', headers: tenant.headers, payload: { fileType: 'image/png', fileName: 'p.png' } })
  ).json()
  const failed = await upload(app, tenant.headers, { bytes: fileBytes('image/gif', 100) })
  for (const id of [pending.fileId, failed.fileId]) {
    const res = await app.inject({ url: `/api/v1/files/${id}/download`, headers: tenant.headers })
    t.equal(res.statusCode, 404)
    t.equal(res.json().error.code, 'FILE_NOT_FOUND')
    t.equal((await app.inject({ url: `/api/v1/files/${id}/signed-url`, headers: tenant.headers })).statusCode, 404)
  }
  const ok = await upload(app, tenant.headers)
  const sha256 = core.db.pluck('SELECT sha256 FROM files WHERE id = ?').get(ok.fileId) as string
  await core.store.remove(sha256)
  const gone = await app.inject({ url: `/api/v1/files/${ok.fileId}/download`, headers: tenant.headers })
  t.equal(gone.statusCode, 404)
  t.equal(gone.json().error.code, 'FILE_NOT_FOUND')
  t.match(gone.json().error.message, /not in storage/)
})

t.test('signed URLs: shape, lifetime bounds, public base', async (t) => {
  const { app, clock } = await makeApp(t)
  const tenant = await createTenant(app)
  const r = await upload(app, tenant.headers)
  const res = await app.inject({ url: `/api/v1/files/${r.fileId}/signed-url`, headers: { ...tenant.headers, host: 'files.example.org:8443' } })
  t.equal(res.statusCode, 200)
  const body = res.json()
  const expires = clock.now() + 3600_000
  t.equal(body.fileId, r.fileId)
  t.equal(body.expiresIn, 3600)
  t.equal(body.expiresAt, new Date(expires).toISOString())
  t.match(body.url, new RegExp(`^http://files\\.example\\.org:8443/api/v1/files/${r.fileId}/download\\?expires=${expires}&token=[0-9a-f]{64}$`))
  for (const [q, status] of [
    ['expiresIn=60', 200],
    ['expiresIn=86400', 200],
    ['expiresIn=59', 400],
    ['expiresIn=86401', 400],
    ['expiresIn=abc', 400],
    ['expiresIn=100.5', 400],
    ['other=1', 400],
  ] as const) {
    const r2 = await app.inject({ url: `/api/v1/files/${r.fileId}/signed-url?${q}`, headers: tenant.headers })
    t.equal(r2.statusCode, status, q)
    if (status === 400) t.equal(r2.json().error.details.errors[0].path, `/query/${q.split('=')[0]}`)
  }
  const forwarded = await app.inject({
    url: `/api/v1/files/${r.fileId}/signed-url`,
    headers: { ...tenant.headers, host: 'internal:8080', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example' },
  })
  t.match(forwarded.json().url, /^http:\/\/internal:8080\//, 'X-Forwarded-* ignored without COFFER_TRUST_PROXY')
})

t.test('signed URLs with COFFER_PUBLIC_URL and behind a trusted proxy', async (t) => {
  const pub = await makeApp(t, { COFFER_PUBLIC_URL: 'https://cdn.example.com/storage/' })
  const tp = await createTenant(pub.app)
  const r = await upload(pub.app, tp.headers)
  const url = (await pub.app.inject({ url: `/api/v1/files/${r.fileId}/signed-url`, headers: tp.headers })).json().url
  t.match(url, new RegExp(`^https://cdn\\.example\\.com/storage/api/v1/files/${r.fileId}/download\\?`))
  const proxied = await makeApp(t, { COFFER_TRUST_PROXY: 'true' })
  const tq = await createTenant(proxied.app)
  const r2 = await upload(proxied.app, tq.headers)
  const url2 = (
    await proxied.app.inject({
      url: `/api/v1/files/${r2.fileId}/signed-url`,
      headers: { ...tq.headers, 'x-forwarded-proto': 'https', 'x-forwarded-host': 'files.example.com' },
    })
  ).json().url
  t.match(url2, /^https:\/\/files\.example\.com\/api\/v1\//)
})

t.test('signed download: no header needed; expiry and deletion refused (tampering: security.test.ts)', async (t) => {
  const { app, clock } = await makeApp(t)
  const tenant = await createTenant(app)
  const bytes = fileBytes('image/png', 2000)
  const a = await upload(app, tenant.headers, { bytes })
  const b = await upload(app, tenant.headers)
  const signed = (await app.inject({ url: `/api/v1/files/${a.fileId}/signed-url?expiresIn=600`, headers: tenant.headers })).json()
  const u = new URL(signed.url)
  const path = u.pathname + u.search
  const ok = await app.inject({ url: path })
  t.equal(ok.statusCode, 200)
  t.ok(ok.rawPayload.equals(bytes))
  t.equal(ok.headers['cache-control'], 'private, max-age=600')
  t.equal((await app.inject({ url: path, headers: { range: 'bytes=0-0' } })).statusCode, 206)
  t.equal((await app.inject({ method: 'HEAD', url: path })).statusCode, 200)
  clock.advance(599_000)
  const late = await app.inject({ url: path })
  t.equal(late.statusCode, 200)
  t.equal(late.headers['cache-control'], 'private, max-age=1', 'never cached beyond expiry')
  clock.advance(1000)
  const expired = await app.inject({ url: path })
  t.equal(expired.statusCode, 401)
  t.match(expired.json().error.message, /expired/)
  const fresh = (await app.inject({ url: `/api/v1/files/${b.fileId}/signed-url`, headers: tenant.headers })).json()
  await app.inject({ method: 'DELETE', url: `/api/v1/files/${b.fileId}`, headers: tenant.headers })
  const fu = new URL(fresh.url)
  const deleted = await app.inject({ url: fu.pathname + fu.search })
  t.equal(deleted.statusCode, 404, 'valid token, deleted file')
  t.equal(deleted.json().error.code, 'FILE_NOT_FOUND')
})
