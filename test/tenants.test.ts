// @suites: pg-all
import t from 'tap'
import { databaseEnvOf, ADMIN_KEY, admin, bearer, createTenant, makeApp } from './helper'
import { sha256 } from '../src/lib/secrets'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'

const ALL_TYPES = ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf']

t.test('POST /api/v1/admin/tenants creates a tenant with defaults', async (t) => {
  const { app, core } = await makeApp(t)
  const res = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'Acme' } })
  t.equal(res.statusCode, 201)
  const body = res.json()
  t.match(body.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  t.equal(body.name, 'Acme')
  t.match(body.apiKey, /^sk_live_[A-Za-z0-9_-]{43}$/)
  t.match(body.webhookSecret, /^whsec_[A-Za-z0-9+/]{43}=$/)
  t.equal(body.quotaBytes, 524288000)
  t.same(body.allowedFileTypes, ALL_TYPES)
  t.match(body.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  // Only the SHA-256 of the key is stored.
  const row = core.db.prepare('SELECT key_hash FROM tenants WHERE id = ?').get(body.id) as { key_hash: Buffer }
  t.same(row.key_hash, sha256(body.apiKey))
  const dump = JSON.stringify(core.db.prepare('SELECT * FROM tenants').all())
  t.notOk(dump.includes(body.apiKey), 'the plain key is not in the database')
})

t.test('tenant creation honours quotaBytes and allowedFileTypes (deduplicated)', async (t) => {
  const { app } = await makeApp(t)
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/admin/tenants',
    headers: admin,
    payload: { name: 'Beta', quotaBytes: 1000, allowedFileTypes: ['application/pdf', 'image/png', 'image/png'] },
  })
  t.equal(res.statusCode, 201)
  t.equal(res.json().quotaBytes, 1000)
  t.same(res.json().allowedFileTypes, ['image/png', 'application/pdf'])
  const info = await app.inject({ url: '/api/v1/tenant/info', headers: bearer(res.json().apiKey) })
  t.same(info.json().allowedFileTypes, ['image/png', 'application/pdf'])
})

t.test('tenant creation validation', async (t) => {
  const { app } = await makeApp(t)
  const cases: [unknown, string][] = [
    [{}, '/name'],
    [{ name: '' }, '/name'],
    [{ name: 'x'.repeat(101) }, '/name'],
    [{ name: 'bad\nname' }, '/name'],
    [{ name: 42 }, '/name'],
    [{ name: 'ok', quotaBytes: -1 }, '/quotaBytes'],
    [{ name: 'ok', quotaBytes: 1.5 }, '/quotaBytes'],
    [{ name: 'ok', quotaBytes: '100' }, '/quotaBytes'],
    [{ name: 'ok', quotaBytes: 2 ** 53 }, '/quotaBytes'],
    [{ name: 'ok', allowedFileTypes: [] }, '/allowedFileTypes'],
    [{ name: 'ok', allowedFileTypes: ['text/html'] }, '/allowedFileTypes/0'],
    [{ name: 'ok', allowedFileTypes: 'image/png' }, '/allowedFileTypes'],
    [{ name: 'ok', extra: true }, '/extra'],
  ]
  for (const [payload, path] of cases) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: payload as object })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    const err = res.json().error
    t.equal(err.code, 'VALIDATION_ERROR')
    t.type(err.message, 'string')
    t.ok(
      err.details.errors.some((e: { path: string }) => e.path === path),
      `${JSON.stringify(payload)} → ${path}: ${JSON.stringify(err.details.errors)}`,
    )
  }
  const exact = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'x'.repeat(100), quotaBytes: 0 } })
  t.equal(exact.statusCode, 201, '100 characters and a zero quota are allowed')
})

t.test('duplicate tenant name → 409 CONFLICT (case-insensitive)', async (t) => {
  const { app } = await makeApp(t)
  await createTenant(app, { name: 'Acme' })
  for (const name of ['Acme', 'ACME']) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name } })
    t.equal(res.statusCode, 409)
    t.same(res.json().error.code, 'CONFLICT')
    t.same(res.json().error.details, { field: 'name' })
  }
})

t.test('admin routes without a configured admin key answer 401 saying how to enable them', async (t) => {
  const { app } = await makeApp(t, { COFFER_ADMIN_API_KEY: '' })
  const res = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'x' } })
  t.equal(res.statusCode, 401)
  t.equal(res.json().error.code, 'UNAUTHORIZED')
  t.match(res.json().error.message, /COFFER_ADMIN_API_KEY/)
})

t.test('admin auth: missing, wrong, and a tenant key are all refused', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  for (const headers of [{}, bearer('wrong-admin-key-0123456789'), tenant.headers, { authorization: ADMIN_KEY }, { authorization: `Basic ${ADMIN_KEY}` }]) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers, payload: { name: 'y' } })
    t.equal(res.statusCode, 401, JSON.stringify(headers))
    t.equal(res.json().error.code, 'UNAUTHORIZED')
    const regen = await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${tenant.id}/regenerate-key`, headers })
    t.equal(regen.statusCode, 401)
  }
  // Auth is checked before the body: an unauthenticated bad body is still a 401.
  const res = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', payload: { nope: 1 } })
  t.equal(res.statusCode, 401)
})

t.test('tenant routes refuse the admin key and bad keys', async (t) => {
  const { app } = await makeApp(t)
  for (const headers of [{}, admin, bearer('sk_live_notarealkeynotarealkeynotarealkey123'), bearer('garbage'), { authorization: 'Bearer' }]) {
    for (const url of ['/api/v1/tenant/info', '/api/v1/tenant/quota']) {
      const res = await app.inject({ url, headers })
      t.equal(res.statusCode, 401, `${url} ${JSON.stringify(headers)}`)
      t.equal(res.json().error.code, 'UNAUTHORIZED')
      t.same(res.json().error.details, {})
    }
  }
})

t.test('regenerate-key revokes the old key at once and rotates the webhook secret', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })).statusCode, 200)
  const res = await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${tenant.id}/regenerate-key`, headers: admin })
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.equal(body.tenantId, tenant.id)
  t.match(body.apiKey, /^sk_live_/)
  t.not(body.apiKey, tenant.apiKey)
  t.match(body.webhookSecret, /^whsec_/)
  t.not(body.webhookSecret, tenant.webhookSecret)
  t.type(body.message, 'string')
  const old = await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })
  t.equal(old.statusCode, 401, 'the old key is refused immediately')
  const fresh = await app.inject({ url: '/api/v1/tenant/info', headers: bearer(body.apiKey) })
  t.equal(fresh.statusCode, 200)
  t.equal(fresh.json().webhookSecret, body.webhookSecret)
})

t.test('a key regenerated by another process (the CLI) is refused at the next request', async (t) => {
  const { app, dir } = await makeApp(t)
  const tenant = await createTenant(app)
  t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })).statusCode, 200, 'authenticated once: remembered')
  const other = createCore(loadConfig(databaseEnvOf(dir), { 'data-dir': dir }))
  const { apiKey } = other.tenants.regenerateKey(tenant.id)
  other.close()
  t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })).statusCode, 401, 'the old key is refused immediately')
  t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: bearer(apiKey) })).statusCode, 200)
})

t.test('regenerate-key for unknown or malformed tenant ids → 404 TENANT_NOT_FOUND', async (t) => {
  const { app } = await makeApp(t)
  for (const id of ['01890000-0000-7000-8000-000000000000', 'not-a-uuid', '%27%20OR%201=1']) {
    const res = await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${id}/regenerate-key`, headers: admin })
    t.equal(res.statusCode, 404, id)
    t.equal(res.json().error.code, 'TENANT_NOT_FOUND')
  }
})

t.test('GET /api/v1/tenant/info and /quota', async (t) => {
  const { app, clock } = await makeApp(t)
  const tenant = await createTenant(app, { name: 'Info Co', quotaBytes: 3000 })
  const info = await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })
  t.equal(info.statusCode, 200)
  t.same(info.json(), {
    id: tenant.id,
    name: 'Info Co',
    allowedFileTypes: ALL_TYPES,
    createdAt: new Date(clock.now()).toISOString(),
    quotaBytes: 3000,
    webhookSecret: tenant.webhookSecret,
  })
  const quota = await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })
  t.equal(quota.statusCode, 200)
  t.same(quota.json(), { quotaBytes: 3000, usedBytes: 0, availableBytes: 3000, usagePercent: 0 })
})
