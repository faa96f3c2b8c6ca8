// @suites: pg-all
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

t.test('unproven requests on token routes are charged to the client address, not the file owner (#12 item 2)', async (t) => {
  const { app } = await makeApp(t, { COFFER_RATE_LIMIT_MAX: '3' })
  const tenant = await createTenant(app)
  const r = await upload(app, tenant.headers) // 2 of the tenant's 3
  const missing = '01890000-0000-7000-8000-000000000000'
  const forged = `expires=${Date.now() + 3_600_000}&token=${'0'.repeat(64)}`
  const existing = await app.inject({ url: `/api/v1/files/${r.fileId}/download?${forged}`, remoteAddress: '127.0.0.9' })
  const absent = await app.inject({ url: `/api/v1/files/${missing}/download?${forged}`, remoteAddress: '127.0.0.10' })
  t.equal(existing.statusCode, 401)
  t.equal(absent.statusCode, 401)
  t.equal(existing.headers['x-ratelimit-remaining'], absent.headers['x-ratelimit-remaining'], 'the headers do not tell an existing id from a missing one')
  for (let i = 0; i < 10; i++) {
    await app.inject({ url: `/api/v1/files/${r.fileId}/download?${forged}`, remoteAddress: '127.0.0.9' })
    await app.inject({
      method: 'PUT',
      url: `/api/v1/upload/${r.fileId}?${forged}`,
      headers: { 'content-type': 'image/png' },
      payload: 'x',
      remoteAddress: '127.0.0.9',
    })
  }
  t.equal(
    (await app.inject({ url: `/api/v1/files/${r.fileId}/download?${forged}`, remoteAddress: '127.0.0.9' })).statusCode,
    429,
    'the prober is limited by its address',
  )
  const owner = await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })
  t.equal(owner.statusCode, 200, 'the owner is not locked out by someone holding the file id')
  t.equal(owner.headers['x-ratelimit-remaining'], '0', 'the owner was charged for its own requests only')
  t.equal(
    (await app.inject({ url: `/api/v1/files/${r.fileId}/download?${forged}`, remoteAddress: '127.0.0.11' })).statusCode,
    401,
    'another address has its own budget',
  )
})
