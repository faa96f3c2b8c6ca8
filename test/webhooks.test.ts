// @suites: pg
import t from 'tap'
import { databaseEnvOf, createTenant, fileBytes, handshake, makeApp, upload, type Handshake } from './helper'
import { startReceiver, verifySignature } from './webhook-receiver'
import { deliver, DELIVERY_TIMEOUT_MS } from '../src/webhooks/deliver'
import { MAX_ATTEMPTS, RETRY_DELAYS_MS } from '../src/webhooks/scheduler'
import { SWEEP_GRACE_MS } from '../src/services/uploads'
import { webhooksCommand } from '../src/cli/webhooks'
import { UsageError } from '../src/cli/io'

const ALLOW = { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' }

t.test('file.uploaded: the spec payload, signed, delivered in the background right after commit', async (t) => {
  // The outbox poll is a minute away: only the wake-up on insert can deliver within the wait.
  const { app, core, clock } = await makeApp(t, ALLOW, { webhookPollMs: 60_000 })
  const receiver = await startReceiver(t)
  const tenant = await createTenant(app)
  core.webhooks.start()
  core.webhooks.start() // idempotent
  const began = Date.now()
  const r = await upload(app, tenant.headers, { extra: { webhookUrl: receiver.url, context: 'ctx' } })
  t.equal(r.put.statusCode, 200)
  await receiver.waitFor(1)
  const latency = receiver.received[0]!.at - began
  // Typically 10–40 ms; the bound leaves room for a loaded CI machine, the poll would take 60 s.
  t.ok(latency < 1000, `first attempt ${latency} ms after the upload began (handshake, PUT, commit, delivery)`)
  const got = receiver.received[0]!
  t.equal(got.headers['content-type'], 'application/json')
  t.match(got.headers['webhook-id'], /^msg_[0-9a-f]{32}$/)
  t.equal(got.headers['webhook-timestamp'], String(Math.floor(clock.now() / 1000)))
  t.ok(verifySignature(tenant.webhookSecret, got.headers, got.body), 'the signature verifies with the tenant secret')
  t.notOk(verifySignature(tenant.webhookSecret, got.headers, got.body.replace('ctx', 'ctX')), 'a changed body does not')
  t.same(JSON.parse(got.body), {
    event: 'file.uploaded',
    fileId: r.fileId,
    tenantId: tenant.id,
    workspaceId: null,
    file: r.put.json(),
    timestamp: new Date(clock.now()).toISOString(),
  })
  await new Promise((res) => setTimeout(res, 50))
  t.equal(core.outbox.get(String(got.headers['webhook-id']))?.status, 'delivered')
  await core.webhooks.stop()
  await core.webhooks.stop() // idempotent
})

t.test('the event row is written with the commit, before any delivery', async (t) => {
  const { app, core } = await makeApp(t, ALLOW)
  const tenant = await createTenant(app)
  const without = await upload(app, tenant.headers)
  t.equal(core.db.pluck('SELECT count(*) FROM outbox WHERE file_id = ?').get(without.fileId), 0, 'no URL, no event')
  const r = await upload(app, tenant.headers, { extra: { webhookUrl: 'http://127.0.0.1:9/x' } })
  const rows = core.outbox.list(null, 10)
  t.equal(rows.length, 1)
  t.match(rows[0], { fileId: r.fileId, event: 'file.uploaded', status: 'pending', attempts: 0 })
})

t.test('file.failed: the same payload plus error, for every way an upload fails', async (t) => {
  const { app, core, clock } = await makeApp(t, ALLOW)
  const receiver = await startReceiver(t)
  const tenant = await createTenant(app)
  const ws = (await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers: tenant.headers, payload: { name: 'W', slug: 'w' } })).json()
  const hook = { webhookUrl: receiver.url }
  const badBytes = await upload(app, tenant.headers, { bytes: fileBytes('image/gif', 100), extra: hook })
  t.equal(badBytes.put.statusCode, 400)
  const deleted = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'd.png', ...hook })).json() as Handshake
  await app.inject({ method: 'DELETE', url: `/api/v1/files/${deleted.fileId}`, headers: tenant.headers })
  const inWs = (await handshake(app, { ...tenant.headers, 'x-workspace-id': ws.id }, { fileType: 'image/png', fileName: 'w.png', ...hook })).json() as Handshake
  await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${ws.id}`, headers: tenant.headers })
  const abandoned = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', ...hook })).json() as Handshake
  clock.advance(15 * 60_000 + SWEEP_GRACE_MS + 1)
  t.equal(core.uploads.sweepExpired(), 1)
  t.equal(await core.webhooks.runOnce(), 4)
  const byFile = new Map(receiver.received.map((r) => [JSON.parse(r.body).fileId as string, JSON.parse(r.body)]))
  const expect: [string, string][] = [
    [badBytes.fileId, 'INVALID_FILE_TYPE'],
    [deleted.fileId, 'FILE_DELETED'],
    [inWs.fileId, 'WORKSPACE_DELETED'],
    [abandoned.fileId, 'UPLOAD_EXPIRED'],
  ]
  for (const [fileId, code] of expect) {
    const p = byFile.get(fileId)
    t.ok(p, `an event for ${code}`)
    t.equal(p.event, 'file.failed')
    t.equal(p.error.code, code)
    t.type(p.error.message, 'string')
    t.equal(p.file.processingStatus, 'failed')
    t.equal(p.file.sizeBytes, 0)
    t.same(Object.keys(p).sort(), ['error', 'event', 'file', 'fileId', 'tenantId', 'timestamp', 'workspaceId'])
  }
  t.equal(byFile.get(inWs.fileId).workspaceId, ws.id)
  t.equal(await core.webhooks.runOnce(), 0, 'each event once')
})

t.test('retries: 3 attempts in all, 1 s then 2 s apart, the same webhook-id; only 2xx counts', async (t) => {
  const { app, core, clock } = await makeApp(t, ALLOW)
  const receiver = await startReceiver(t, [500, 302, 204])
  const tenant = await createTenant(app)
  await upload(app, tenant.headers, { extra: { webhookUrl: receiver.url } })
  t.same([MAX_ATTEMPTS, ...RETRY_DELAYS_MS], [3, 1000, 2000])
  t.equal(await core.webhooks.runOnce(), 1, 'attempt 1 (answered 500)')
  clock.advance(999)
  t.equal(await core.webhooks.runOnce(), 0, 'not yet')
  clock.advance(1)
  t.equal(await core.webhooks.runOnce(), 1, 'attempt 2, 1 s later (answered 302: a failure, not followed)')
  clock.advance(1999)
  t.equal(await core.webhooks.runOnce(), 0, 'not yet')
  clock.advance(1)
  t.equal(await core.webhooks.runOnce(), 1, 'attempt 3, 2 s later (answered 204)')
  t.equal(receiver.received.length, 3, 'the redirect was not followed')
  const ids = new Set(receiver.received.map((r) => r.headers['webhook-id']))
  t.equal(ids.size, 1, 'one webhook-id across attempts')
  const stamps = receiver.received.map((r) => Number(r.headers['webhook-timestamp']))
  t.ok(stamps[2]! >= stamps[0]! + 3, 'each attempt is stamped with its own time')
  for (const r of receiver.received) t.ok(verifySignature(tenant.webhookSecret, r.headers, r.body))
  const e = core.outbox.get(String([...ids][0]))!
  t.match(e, { status: 'delivered', attempts: 3, lastError: null })
})

t.test('dead-lettering after the third failure, then re-driven from the CLI', async (t) => {
  const { app, core, clock, dir } = await makeApp(t, ALLOW)
  clock.set(Date.now()) // the CLI below runs on the real clock
  const receiver = await startReceiver(t, [503])
  const tenant = await createTenant(app)
  await upload(app, tenant.headers, { extra: { webhookUrl: receiver.url } })
  for (let i = 0; i < 3; i++) {
    t.equal(await core.webhooks.runOnce(), 1)
    clock.advance(2000)
  }
  clock.advance(60_000)
  t.equal(await core.webhooks.runOnce(), 0, 'no fourth attempt')
  const [dead] = core.outbox.list('dead', 10)
  t.match(dead, { status: 'dead', attempts: 3, lastError: 'HTTP 503' })
  const out: string[] = []
  const err: string[] = []
  const io = {
    env: { COFFER_DATA_DIR: dir, ...databaseEnvOf(dir) },
    stdout: { write: (s: string) => out.push(s) } as never,
    stderr: { write: (s: string) => err.push(s) } as never,
  }
  t.equal(await webhooksCommand(['list', '--status', 'dead', '--json'], io), 0)
  const listed = JSON.parse(out.pop()!)
  t.equal(listed.length, 1)
  t.match(listed[0], { id: dead!.id, status: 'dead', attempts: 3, lastError: 'HTTP 503', url: receiver.url })
  t.equal(await webhooksCommand(['list'], io), 0)
  t.match(out.join(''), new RegExp(`${dead!.id}\\s+file\\.uploaded\\s+dead`))
  t.equal(await webhooksCommand(['retry', dead!.id], io), 0)
  t.match(out.pop(), /re-queued/)
  t.equal(await webhooksCommand(['retry', dead!.id], io), 1, 'already pending')
  t.equal(await webhooksCommand(['retry', 'msg_nope'], io), 1)
  t.match(err.join(''), /no webhook event msg_nope/)
  receiver.statuses.splice(0, 1, 200)
  t.equal(await core.webhooks.runOnce(), 1)
  t.match(core.outbox.get(dead!.id), { status: 'delivered', attempts: 1 })
  t.equal(receiver.received.length, 4)
  t.equal(receiver.received[3]!.headers['webhook-id'], dead!.id, 'the same id when re-driven')
  // --all-dead
  receiver.statuses.splice(0, 1, 500)
  await upload(app, tenant.headers, { extra: { webhookUrl: receiver.url } })
  await upload(app, tenant.headers, { extra: { webhookUrl: receiver.url } })
  for (let i = 0; i < 3; i++) {
    await core.webhooks.runOnce()
    clock.advance(2000)
  }
  t.equal(core.outbox.counts().dead, 2)
  t.equal(await webhooksCommand(['retry', '--all-dead', '--json'], io), 0)
  t.same(JSON.parse(out.pop()!), { retried: 2 })
  t.equal(core.outbox.counts().pending, 2)
  await t.rejects(webhooksCommand(['retry'], io), UsageError)
  await t.rejects(webhooksCommand(['list', '--status', 'lost'], io), UsageError)
})

t.test('stop() aborts a delivery in flight; the event stays pending with no attempt counted', async (t) => {
  const { app, core } = await makeApp(t, ALLOW)
  const receiver = await startReceiver(t, [0])
  const tenant = await createTenant(app)
  await upload(app, tenant.headers, { extra: { webhookUrl: receiver.url } })
  core.webhooks.start()
  await receiver.waitFor(1)
  const began = Date.now()
  await core.webhooks.stop()
  t.ok(Date.now() - began < 1000, 'stop does not wait for the 10 s timeout')
  t.match(core.outbox.list(null, 10)[0], { status: 'pending', attempts: 0 })
})

t.test('a delivery times out', async (t) => {
  const receiver = await startReceiver(t, [0])
  t.equal(DELIVERY_TIMEOUT_MS, 10_000)
  const began = Date.now()
  const result = await deliver(
    { id: 'msg_1', url: receiver.url, body: '{}', secret: 'whsec_AAAA', timestampSeconds: 1 },
    { allowPrivate: true, resolve: async () => [], timeoutMs: 200 },
  )
  t.same(result, { ok: false, error: 'timed out' })
  t.ok(Date.now() - began < 2000)
})

t.test('SSRF: private literals are refused at the handshake unless allowed', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const refused = [
    'http://127.0.0.1/hook',
    'http://127.1.2.3:8080/hook',
    'http://10.0.0.1/hook',
    'http://172.16.5.4/hook',
    'http://192.168.1.1/hook',
    'http://169.254.169.254/latest/meta-data',
    'http://0.0.0.0/',
    'http://[::1]/hook',
    'http://[fe80::1]/hook',
    'http://[fd00::1]/hook',
    'http://[::ffff:127.0.0.1]/hook',
    'http://[::ffff:a9fe:a9fe]/hook',
    'http://localhost:3000/hook',
    'http://api.localhost/hook',
    'http://2130706433/hook',
    'http://0x7f000001/hook',
  ]
  for (const webhookUrl of refused) {
    const res = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', webhookUrl })
    t.equal(res.statusCode, 400, webhookUrl)
    t.same(res.json().error.details.errors, [{ path: '/webhookUrl', message: 'must not point at a loopback, private or link-local address' }], webhookUrl)
  }
  for (const webhookUrl of ['https://hooks.example.com/x', 'http://93.184.216.34/x', 'http://[2606:4700::1111]/x']) {
    t.equal((await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', webhookUrl })).statusCode, 200, webhookUrl)
  }
  const allowed = await makeApp(t, ALLOW)
  const t2 = await createTenant(allowed.app)
  t.equal(
    (await handshake(allowed.app, t2.headers, { fileType: 'image/png', fileName: 'a.png', webhookUrl: 'http://127.0.0.1:9/x' })).statusCode,
    200,
    'allowed with COFFER_WEBHOOK_ALLOW_PRIVATE',
  )
})

t.test('SSRF: names that resolve to private addresses are refused at delivery', async (t) => {
  const dnsTable: Record<string, string[]> = {
    'internal.example': ['10.1.2.3'],
    'mixed.example': ['93.184.216.34', '127.0.0.1'],
    'metadata.example': ['169.254.169.254'],
    'v6.example': ['::1'],
  }
  const resolve = async (host: string) => dnsTable[host] ?? []
  const { app, core, clock } = await makeApp(t, {}, { resolve })
  const tenant = await createTenant(app)
  for (const host of Object.keys(dnsTable)) {
    const r = await upload(app, tenant.headers, { extra: { webhookUrl: `http://${host}/hook` } })
    t.equal(r.put.statusCode, 200, `${host} passes the handshake (it is a name)`)
  }
  for (let i = 0; i < 3; i++) {
    await core.webhooks.runOnce()
    clock.advance(2000)
  }
  const dead = core.outbox.list('dead', 10)
  t.equal(dead.length, 4, 'every delivery refused, to the last attempt')
  for (const e of dead) t.match(e.lastError, /^refused: \S+ resolves to private address /)
})

t.test('a name resolved once is connected to at the checked address, with its own Host header', async (t) => {
  const receiver = await startReceiver(t)
  const port = new URL(receiver.url).port
  const { app, core } = await makeApp(t, ALLOW, { resolve: async (host) => (host === 'receiver.test' ? ['127.0.0.1'] : []) })
  const tenant = await createTenant(app)
  await upload(app, tenant.headers, { extra: { webhookUrl: `http://receiver.test:${port}/hooks/coffer` } })
  t.equal(await core.webhooks.runOnce(), 1)
  t.equal(receiver.received[0]?.headers.host, `receiver.test:${port}`)
  t.equal(core.outbox.counts().delivered, 1)
})
