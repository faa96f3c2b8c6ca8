import t from 'tap'
import { admin, createTenant, handshake, makeApp, upload } from './helper'

t.test('off by default', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  for (let i = 0; i < 50; i++) t.equal((await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).statusCode, 200)
  t.notOk('x-ratelimit-limit' in (await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).headers)
})

t.test('per tenant: 429 RATE_LIMITED with Retry-After once the window is used up', async (t) => {
  const { app } = await makeApp(t, { COFFER_RATE_LIMIT_MAX: '5', COFFER_RATE_LIMIT_WINDOW_SECONDS: '60' })
  const alice = await createTenant(app)
  const bob = await createTenant(app)
  for (let i = 0; i < 5; i++) {
    const ok = await app.inject({ url: '/api/v1/tenant/quota', headers: alice.headers })
    t.equal(ok.statusCode, 200)
    t.equal(ok.headers['x-ratelimit-remaining'], String(4 - i))
  }
  const limited = await app.inject({ url: '/api/v1/files', headers: alice.headers })
  t.equal(limited.statusCode, 429)
  t.equal(limited.json().error.code, 'RATE_LIMITED')
  t.match(limited.json().error.details, { limit: 5, windowSeconds: 60 })
  const retryAfter = Number(limited.headers['retry-after'])
  t.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After: ${retryAfter}`)
  t.equal((await app.inject({ url: '/api/v1/tenant/quota', headers: bob.headers })).statusCode, 200, 'another tenant has its own budget')
  t.equal((await app.inject({ url: '/health' })).statusCode, 200, 'health is never limited')
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'more' } })).statusCode,
    201,
    'admin is not limited',
  )
})

t.test("presigned uploads and signed downloads count against the file's tenant", async (t) => {
  const { app } = await makeApp(t, { COFFER_RATE_LIMIT_MAX: '4' })
  const tenant = await createTenant(app)
  const r = await upload(app, tenant.headers) // handshake + PUT: 2 requests
  const signed = (await app.inject({ url: `/api/v1/files/${r.fileId}/signed-url`, headers: tenant.headers })).json() // 3
  const u = new URL(signed.url)
  t.equal((await app.inject({ url: u.pathname + u.search })).statusCode, 200) // 4
  const over = await app.inject({ url: u.pathname + u.search })
  t.equal(over.statusCode, 429, 'the signed download was counted for the tenant')
  t.equal((await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png' })).statusCode, 429)
})
