// @suites: pg-all
import t from 'tap'
import { createTenant, fileBytes, handshake, makeApp, measuringStore, putContent } from './helper'

// #12 item 3: uploads without a declared size count against the quota while they stream, so
// concurrent PUTs cannot together stage more than the free room in tmp/.

const MB = 1_000_000

for (const scope of ['tenant', 'workspace'] as const) {
  t.test(`20 concurrent undeclared 3 MB PUTs into a 3 MB ${scope} quota stage at most the quota`, async (t) => {
    const { seen, wrap } = measuringStore()
    const { app, core } = await makeApp(t, {}, { store: wrap })
    const tenant = await createTenant(app, { quotaBytes: scope === 'tenant' ? 3 * MB : 100 * MB })
    const headers: Record<string, string> = { ...tenant.headers }
    if (scope === 'workspace') {
      const ws = await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers, payload: { name: 'W', slug: 'w', quotaBytes: 3 * MB } })
      headers['x-workspace-id'] = ws.json().id
    }
    const hs = await Promise.all(Array.from({ length: 20 }, () => handshake(app, headers, { fileType: 'image/png', fileName: 'a.png' })))
    t.ok(hs.every((h) => h.statusCode === 200))
    const puts = await Promise.all(hs.map((h, i) => putContent(app, h, fileBytes('image/png', 3 * MB, i))))
    const ok = puts.filter((p) => p.statusCode === 200)
    t.equal(ok.length, 1, 'one fits')
    for (const p of puts.filter((p) => p.statusCode !== 200)) {
      t.equal(p.statusCode, 403)
      t.equal(p.json().error.code, 'QUOTA_EXCEEDED')
      t.equal(p.json().error.details.scope, scope)
    }
    t.ok(seen.max <= 3 * MB, `at most the quota was staged at once (${seen.max} bytes)`)
    const used = core.db.pluck('SELECT used_bytes FROM tenants WHERE id = ?').get(tenant.id)
    t.equal(used, 3 * MB, 'usage is exact')
    t.equal(core.db.pluck("SELECT count(*) FROM files WHERE tenant_id = ? AND status = 'failed'").get(tenant.id), 19, 'the refused uploads failed')
    // Nothing stays counted in flight: the room is back once the file is deleted.
    await app.inject({ method: 'DELETE', url: `/api/v1/files/${ok[0]!.json().id}`, headers })
    const again = await handshake(app, headers, { fileType: 'image/png', fileName: 'b.png' })
    const put = await putContent(app, again, fileBytes('image/png', 3 * MB, 99))
    t.equal(put.statusCode, 200, 'the whole quota is usable again')
  })
}
