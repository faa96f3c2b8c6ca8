// @suites: pg-all
import t from 'tap'
import { createTenant, makeApp, upload } from './helper'
import { startReceiver } from './webhook-receiver'

// #12 item 4: one tenant whose receiver never answers cannot delay another tenant's webhooks.
// Bounds are generous: the hanging tenant's attempts each last the 10 s delivery timeout, and the
// other tenant's event must arrive long before the first of them could end.

t.test('a tenant with a backlog at a receiver that never answers does not delay another tenant', async (t) => {
  const { app, core } = await makeApp(t, { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' })
  const hanging = await startReceiver(t, [0])
  const prompt = await startReceiver(t, [200])
  const a = await createTenant(app)
  const b = await createTenant(app)
  // Tenant A's 24 events are all due before tenant B's one.
  for (let i = 0; i < 24; i++) await upload(app, a.headers, { extra: { webhookUrl: hanging.url } })
  await upload(app, b.headers, { extra: { webhookUrl: prompt.url } })
  t.equal(core.outbox.counts().pending, 25)

  const began = Date.now()
  core.webhooks.start()
  await prompt.waitFor(1, 5000)
  t.ok(Date.now() - began < 5000, `tenant B's webhook arrived after ${Date.now() - began} ms, while A's attempts hang`)
  await hanging.waitFor(4, 5000)
  t.equal(core.webhooks.inFlightFor(a.id), 4, 'tenant A holds at most its share of delivery slots')
  t.equal(hanging.received.length, 4, "no more of A's events were started")
  t.equal(core.outbox.counts().delivered, 1)
  await core.webhooks.stop()
  t.equal(core.outbox.counts().pending, 24, "A's events stay pending, to be retried")
})

t.test('due events are taken round-robin across tenants', async (t) => {
  const { app, core } = await makeApp(t, { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' })
  const receiver = await startReceiver(t, [200])
  const tenants = [await createTenant(app), await createTenant(app), await createTenant(app)]
  for (const tenant of tenants) for (let i = 0; i < 6; i++) await upload(app, tenant.headers, { extra: { webhookUrl: receiver.url } })
  const page = core.outbox.dueFair(core.clock.now(), 4, 9)
  t.same(
    page.map((e) => tenants.findIndex((x) => x.id === e.tenantId)),
    [0, 1, 2, 0, 1, 2, 0, 1, 2],
    'every tenant in turn',
  )
  t.equal(await core.webhooks.runOnce(), 12, '4 per tenant at once')
  t.equal(await core.webhooks.runOnce(), 6)
  t.equal(receiver.received.length, 18)
})
