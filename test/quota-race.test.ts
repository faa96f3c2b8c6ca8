// @suites: pg s3
import t from 'tap'

// The one home of quota races: concurrent handshakes and uploads against tenant and workspace quotas.
import { createTenant, fileBytes, handshake, makeApp, putContent } from './helper'

t.test('concurrent handshakes racing one quota never exceed it (declared sizes)', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app, { quotaBytes: 10_000 })
  const results = await Promise.all(
    Array.from({ length: 40 }, () => handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: 1000 })),
  )
  const ok = results.filter((r) => r.statusCode === 200)
  t.equal(ok.length, 10, 'exactly as many as fit')
  t.ok(results.filter((r) => r.statusCode !== 200).every((r) => r.statusCode === 403 && r.json().error.code === 'QUOTA_EXCEEDED'))
  // Then the PUTs, all at once, each a little under the declared size.
  const puts = await Promise.all(ok.map((r, i) => putContent(app, r, fileBytes('image/png', 900, i))))
  t.ok(puts.every((p) => p.statusCode === 200))
  const quota = (await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json()
  t.equal(quota.usedBytes, 9000, 'settled to the real sizes')
})

t.test('concurrent undeclared uploads racing one quota never exceed it', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app, { quotaBytes: 10_000 })
  const hs = await Promise.all(Array.from({ length: 30 }, () => handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png' })))
  t.ok(
    hs.every((h) => h.statusCode === 200),
    'undeclared handshakes reserve nothing',
  )
  const puts = await Promise.all(hs.map((h, i) => putContent(app, h, fileBytes('image/png', 1000, i))))
  const ok = puts.filter((p) => p.statusCode === 200)
  t.equal(ok.length, 10, 'exactly as many as fit')
  for (const p of puts.filter((p) => p.statusCode !== 200)) {
    t.equal(p.statusCode, 403)
    t.equal(p.json().error.code, 'QUOTA_EXCEEDED')
    t.equal(p.json().error.details.scope, 'tenant')
  }
  const used = core.db.pluck('SELECT used_bytes FROM tenants WHERE id = ?').get(tenant.id)
  t.equal(used, 10_000)
  const sum = core.db.pluck("SELECT CAST(sum(size_bytes) AS BIGINT) FROM files WHERE tenant_id = ? AND status = 'completed'").get(tenant.id)
  t.equal(sum, 10_000, 'usage equals the completed files')
})

t.test('declared and undeclared uploads racing together never exceed the quota', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app, { quotaBytes: 20_000 })
  const work = Array.from({ length: 40 }, async (_, i) => {
    const declared = i % 2 === 0
    const h = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', ...(declared ? { fileSizeBytes: 1000 } : {}) })
    if (h.statusCode !== 200) return h.statusCode
    const p = await putContent(app, h, fileBytes('image/png', 1000, i))
    return p.statusCode
  })
  const codes = await Promise.all(work)
  t.equal(codes.filter((c) => c === 200).length, 20)
  t.ok(codes.every((c) => c === 200 || c === 403))
  const row = core.db.prepare('SELECT used_bytes, quota_bytes FROM tenants WHERE id = ?').get(tenant.id) as { used_bytes: number; quota_bytes: number }
  t.equal(row.used_bytes, 20_000)
  t.ok(row.used_bytes <= row.quota_bytes)
})

t.test('many concurrent uploads into one workspace quota never exceed it', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app)
  const ws = (
    await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers: tenant.headers, payload: { name: 'A', slug: 'a', quotaBytes: 8000 } })
  ).json()
  const h = { ...tenant.headers, 'x-workspace-id': ws.id }
  const codes = await Promise.all(
    Array.from({ length: 40 }, async (_, i) => {
      const declared = i % 2 === 0
      const hs = await handshake(app, h, { fileType: 'image/png', fileName: 'a.png', ...(declared ? { fileSizeBytes: 1000 } : {}) })
      if (hs.statusCode !== 200) return hs.statusCode
      return (await putContent(app, hs, fileBytes('image/png', 1000, i))).statusCode
    }),
  )
  t.equal(codes.filter((c) => c === 200).length, 8)
  t.ok(codes.every((c) => c === 200 || c === 403))
  t.equal(core.db.pluck('SELECT used_bytes FROM workspaces WHERE id = ?').get(ws.id), 8000)
})
