// @suites: pg-all
import t from 'tap'
import { createTenant, makeApp, upload } from './helper'
import { startReceiver } from './webhook-receiver'

const ALLOW = { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' }

t.test('a tenant lists its own recent deliveries and retries a dead one over the API', async (t) => {
  const { app, core, clock } = await makeApp(t, ALLOW)
  const receiver = await startReceiver(t, [503])
  const tenant = await createTenant(app)
  const other = await createTenant(app)
  const first = await upload(app, tenant.headers, { extra: { webhookUrl: receiver.url } })
  clock.advance(1)
  const second = await upload(app, tenant.headers, { extra: { webhookUrl: `${receiver.url}/second` } })
  const foreign = await upload(app, other.headers, { extra: { webhookUrl: receiver.url } })
  // Three failed attempts for each of the three events: all dead.
  for (let i = 0; i < 3; i++) {
    t.equal(await core.webhooks.runOnce(), 3)
    clock.advance(2000)
  }
  const list = await app.inject({ url: '/api/v1/webhooks/deliveries', headers: tenant.headers })
  t.equal(list.statusCode, 200)
  const { deliveries } = list.json() as { deliveries: Record<string, unknown>[] }
  t.same(
    deliveries.map((d) => d.fileId),
    [second.fileId, first.fileId],
    "only the caller's, newest first",
  )
  t.match(deliveries[0], {
    id: /^msg_[0-9a-f]{32}$/,
    event: 'file.uploaded',
    url: `${receiver.url}/second`,
    status: 'dead',
    attempts: 3,
    lastError: 'HTTP 503',
    createdAt: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/,
    nextAttemptAt: null,
    deliveredAt: null,
  })
  t.notOk('payload' in deliveries[0]! || 'tenantId' in deliveries[0]!, 'no payload or tenant id in the view')
  const one = await app.inject({ url: '/api/v1/webhooks/deliveries?limit=1&status=dead', headers: tenant.headers })
  t.same(
    (one.json() as { deliveries: { fileId: string }[] }).deliveries.map((d) => d.fileId),
    [second.fileId],
  )
  const none = await app.inject({ url: '/api/v1/webhooks/deliveries?status=delivered', headers: tenant.headers })
  t.same(none.json(), { deliveries: [] })

  const id = String(deliveries[1]!.id)
  const foreignId = core.outbox.list(null, 10).find((e) => e.fileId === foreign.fileId)!.id
  const stranger = await app.inject({ method: 'POST', url: `/api/v1/webhooks/deliveries/${foreignId}/retry`, headers: tenant.headers })
  t.equal(stranger.statusCode, 404, "another tenant's delivery is not found")
  t.equal(stranger.json().error.code, 'DELIVERY_NOT_FOUND')
  t.equal(core.outbox.get(foreignId)?.status, 'dead', 'and stays dead')
  t.equal((await app.inject({ method: 'POST', url: '/api/v1/webhooks/deliveries/msg_nope/retry', headers: tenant.headers })).statusCode, 404)

  const retried = await app.inject({ method: 'POST', url: `/api/v1/webhooks/deliveries/${id}/retry`, headers: tenant.headers })
  t.equal(retried.statusCode, 200)
  t.match(retried.json(), { id, status: 'pending', attempts: 0, nextAttemptAt: new Date(clock.now()).toISOString() })
  const again = await app.inject({ method: 'POST', url: `/api/v1/webhooks/deliveries/${id}/retry`, headers: tenant.headers })
  t.equal(again.statusCode, 409, 'a pending delivery cannot be retried')
  t.match(again.json().error, { code: 'CONFLICT', details: { field: 'status', status: 'pending' } })

  receiver.statuses.splice(0, 1, 200)
  t.equal(await core.webhooks.runOnce(), 1, 'only the retried event is due')
  const last = receiver.received.at(-1)!
  t.equal(last.headers['webhook-id'], id, 'sent again with the same webhook-id')
  const after = (await app.inject({ url: '/api/v1/webhooks/deliveries', headers: tenant.headers })).json() as { deliveries: Record<string, unknown>[] }
  t.match(after.deliveries[1], { id, status: 'delivered', attempts: 1, lastError: null, deliveredAt: new Date(clock.now()).toISOString() })
  const delivered = await app.inject({ method: 'POST', url: `/api/v1/webhooks/deliveries/${id}/retry`, headers: tenant.headers })
  t.equal(delivered.statusCode, 409, 'a delivered one neither')
})

t.test('deliveries need a tenant key and a sane query', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  t.equal((await app.inject({ url: '/api/v1/webhooks/deliveries' })).statusCode, 401)
  t.equal((await app.inject({ method: 'POST', url: '/api/v1/webhooks/deliveries/msg_x/retry' })).statusCode, 401)
  for (const q of ['limit=0', 'limit=101', 'status=lost', 'other=1']) {
    const res = await app.inject({ url: `/api/v1/webhooks/deliveries?${q}`, headers: tenant.headers })
    t.equal(res.statusCode, 400, q)
    t.equal(res.json().error.code, 'VALIDATION_ERROR', q)
  }
})
