// @suites: pg-all
import t from 'tap'
import { isPrivateAddress } from '../src/webhooks/ssrf'
import { deliver } from '../src/webhooks/deliver'
import { createTenant, handshake, makeApp } from './helper'

// #12 item 9: IPv6 forms that reach a private IPv4 address, or a network of their own.

const REFUSED = [
  '::127.0.0.1', // IPv4-compatible
  '::7f00:1',
  '::ffff:0:127.0.0.1', // SIIT
  '::ffff:0:a00:1',
  '::ffff:127.0.0.1', // IPv4-mapped
  '64:ff9b::127.0.0.1', // NAT64 well-known prefix
  '64:ff9b::c0a8:101',
  '64:ff9b:1::8.8.8.8', // local-use NAT64
  '2002:7f00:1::1', // 6to4
  '2002:808:808::1',
  '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
  'fec0::1', // site-local
  '100::1', // discard-only
  '2001:db8::1', // documentation
  'fe80::1%eth0',
]
const ALLOWED = ['2606:4700:4700::1111', '64:ff9b::808:808', '::ffff:8.8.8.8', '2a00:1450:4001:81b::200e']

t.test('the deny-list normalises embedded IPv4 and knows the transition ranges', async (t) => {
  for (const a of REFUSED) t.ok(isPrivateAddress(a), `${a} is refused`)
  for (const a of ALLOWED) t.notOk(isPrivateAddress(a), `${a} is public`)
})

t.test('at the handshake, in URL form, unless private webhooks are allowed', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  for (const a of REFUSED.filter((x) => !x.includes('%'))) {
    const res = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', webhookUrl: `http://[${a}]:8080/hook` })
    t.equal(res.statusCode, 400, `http://[${a}]/`)
    t.match(res.json().error.details.errors, [{ path: '/webhookUrl' }])
  }
  for (const a of ALLOWED) {
    t.equal(
      (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', webhookUrl: `http://[${a}]/hook` })).statusCode,
      200,
      `http://[${a}]/`,
    )
  }
  const allowed = await makeApp(t, { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' })
  const other = await createTenant(allowed.app)
  t.equal(
    (await handshake(allowed.app, other.headers, { fileType: 'image/png', fileName: 'a.png', webhookUrl: 'http://[::ffff:0:127.0.0.1]/h' })).statusCode,
    200,
    'allowed with COFFER_WEBHOOK_ALLOW_PRIVATE',
  )
})

t.test('at delivery, when a name resolves to one of them', async (t) => {
  for (const a of ['64:ff9b::7f00:1', '2002:a00:1::1', '::ffff:0:a9fe:a9fe']) {
    const result = await deliver(
      { id: 'msg_1', url: 'http://hooks.example.com/h', body: '{}', secret: 'whsec_AAAA', timestampSeconds: 1 },
      { allowPrivate: false, resolve: async () => [a] },
    )
    t.same(result, { ok: false, error: `refused: hooks.example.com resolves to private address ${a}` })
  }
})
