// @suites: pg-all
// The admin overview (#31): GET /api/v1/admin/overview after known uploads, requests and webhook
// events; the last minute's window; the server's supported file types (what the console's tenant
// forms offer); what each figure costs (query plans: nothing reads the files table); bad input and
// keys as 4xx envelopes.
import fs from 'node:fs'
import t from 'tap'
import { admin, createTenant, fileBytes, makeApp, sqliteOnly, upload } from './helper'
import { version } from '../package.json'
import { RecentRequests } from '../src/lib/recent-requests'

const URL = '/api/v1/admin/overview'

t.test('after known uploads: blobs, usage by size, requests, webhook backlog, uptime, disk', async (t) => {
  const { app, core, clock, dir } = await makeApp(t)
  const small = await createTenant(app, { name: 'small' })
  const big = await createTenant(app, { name: 'big' })
  const none = await createTenant(app, { name: 'none' })
  const sizes = { a: 1024, b: 2048, c: 5000 }
  await upload(app, small.headers, { bytes: fileBytes('image/png', sizes.a, 1) })
  await upload(app, big.headers, { bytes: fileBytes('image/png', sizes.b, 2) })
  await upload(app, big.headers, { bytes: fileBytes('image/png', sizes.c, 3), extra: { webhookUrl: 'https://hooks.example/a' } })
  // The same content again: one more file, no new blob.
  await upload(app, big.headers, { bytes: fileBytes('image/png', sizes.c, 3), extra: { webhookUrl: 'https://hooks.example/b' } })
  // Two webhook events wait (the scheduler is not running); one of them fails for good.
  const [dying] = core.outbox.list('pending', 10)
  core.outbox.claim([dying!.id], 'test', clock.now(), clock.now())
  core.outbox.markFailed(dying!.id, 'test', 'refused', clock.now(), clock.now(), 1)
  // Known answers: two 404s (one 4xx per bad id) besides the 2xx above.
  for (let i = 0; i < 2; i++) t.equal((await app.inject({ url: '/api/v1/files/nope', headers: small.headers })).statusCode, 404)
  clock.advance(5_000)

  const before = core.metrics.requestCounts().sinceStart
  const res = await app.inject({ url: URL, headers: admin })
  t.equal(res.statusCode, 200)
  const o = res.json()
  t.match(o.server, { version, uptimeSeconds: 5, blobStore: 'disk', startedAt: /^\d{4}-\d\d-\d\dT.*Z$/ })
  t.same(o.blobs, { count: 3, bytes: sizes.a + sizes.b + sizes.c }, 'three distinct contents, the duplicate stored once')
  t.same(
    o.tenants.byUsage.map((x: { name: string; usedBytes: number; fileCount: number }) => [x.name, x.usedBytes, x.fileCount]),
    [
      ['big', sizes.b + 2 * sizes.c, 3],
      ['small', sizes.a, 1],
      ['none', 0, 0],
    ],
    'tenants by usage, most first, with their file counts',
  )
  t.equal(o.tenants.count, 3)
  t.match(o.tenants.byUsage[0], { id: big.id, quotaBytes: Number, allowedFileTypes: Array, selfServiceS3Credentials: true })
  t.notOk(res.body.includes(big.apiKey) || res.body.includes(big.webhookSecret), 'no key, no secret')
  t.match(o.webhooks, { pending: 1, dead: 1, oldestPendingAt: /^\d{4}-/ })
  t.same(o.requests.sinceStart, before, 'the requests answered before this one')
  t.equal(o.requests.sinceStart.clientErrors, 2, 'the two 404s')
  t.equal(o.requests.sinceStart.serverErrors, 0)
  // Everything so far happened within the last minute on the test's clock.
  t.match(o.requests.lastMinute, { ...before, windowSeconds: 5 })
  t.equal(o.requests.lastMinute.requestsPerSecond, Math.round((before.requests / 5) * 1000) / 1000)
  t.equal(o.requests.lastMinute.errorsPerSecond, Math.round((2 / 5) * 1000) / 1000)
  const fsInfo = fs.statfsSync(dir)
  t.equal(o.dataDir.path, dir)
  t.equal(o.dataDir.totalBytes, fsInfo.blocks * fsInfo.bsize)
  t.ok(o.dataDir.freeBytes > 0 && o.dataDir.freeBytes <= o.dataDir.totalBytes, 'free space on the data dir')

  // A minute later the window is empty again, while the totals stay.
  clock.advance(61_000)
  const later = (await app.inject({ url: `${URL}?limit=1`, headers: admin })).json()
  t.match(later.requests.lastMinute, { requests: 0, clientErrors: 0, serverErrors: 0, requestsPerSecond: 0, windowSeconds: 60 })
  t.equal(later.requests.sinceStart.requests, before.requests + 1, 'the previous overview counted once')
  t.equal(later.server.uptimeSeconds, 66)
  t.same(
    later.tenants.byUsage.map((x: { name: string }) => x.name),
    ['big'],
    'limit=1: the largest only',
  )
  t.equal(later.tenants.count, 3, 'the count is of all tenants')

  // A deleted tenant leaves the table.
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${none.id}`, headers: admin })).statusCode, 204)
  t.equal((await app.inject({ url: URL, headers: admin })).json().tenants.count, 2)
})

t.test(
  'cheap at any size: the backlog and the file counts are index ranges, not scans',
  { skip: sqliteOnly("SQLite's query plans; PostgreSQL's planner picks by its table statistics (a small table is read whole)") },
  async (t) => {
    const { core } = await makeApp(t)
    const plan = (sql: string) =>
      core
        .sqlite!.prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all()
        .map((r) => (r as { detail: string }).detail)
        .join('; ')
    t.match(plan("SELECT count(*) FROM outbox WHERE status = 'pending'"), /USING COVERING INDEX outbox_by_status/, 'the backlog: an index range')
    t.match(plan("SELECT min(created_at) FROM outbox WHERE status = 'pending'"), /USING COVERING INDEX outbox_by_status/)
    t.match(plan("SELECT coalesce(sum(n), 0) FROM file_counts WHERE tenant_id = 'x'"), /file_counts/)
    t.notMatch(plan("SELECT coalesce(sum(n), 0) FROM file_counts WHERE tenant_id = 'x'"), /SCAN/, 'file counts: a range of the maintained counts')
  },
)

t.test("the server's supported file types: what the console offers tenants (the six, the operator's, or any)", async (t) => {
  const spec = ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf']
  for (const [setting, expected] of [
    [undefined, spec],
    ['text/plain, application/zip,image/png', [...spec, 'text/plain', 'application/zip']],
    ['*', ['*']],
  ] as const) {
    const { app } = await makeApp(t, setting === undefined ? {} : { COFFER_FILE_TYPES: setting })
    const res = await app.inject({ url: URL, headers: admin })
    t.equal(res.statusCode, 200, `COFFER_FILE_TYPES=${setting ?? '(unset)'}`)
    t.same(res.json().server.supportedFileTypes, expected, `COFFER_FILE_TYPES=${setting ?? '(unset)'}`)
    // Every listed type is one a tenant may be given on this server.
    const created = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'all', allowedFileTypes: expected } })
    t.equal(created.statusCode, 201)
    t.same(created.json().allowedFileTypes, expected)
  }
})

t.test('bad input and keys: 4xx envelopes', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  for (const q of ['limit=0', 'limit=101', 'limit=x', 'other=1']) {
    const res = await app.inject({ url: `${URL}?${q}`, headers: admin })
    t.equal(res.statusCode, 400, q)
    t.equal(res.json().error.code, 'VALIDATION_ERROR', q)
    t.match(res.json().error.details.errors[0].path, /^\/query/, q)
  }
  t.equal((await app.inject({ url: URL })).statusCode, 401)
  const asTenant = await app.inject({ url: URL, headers: tenant.headers })
  t.equal(asTenant.statusCode, 401, 'a tenant key is not the admin key')
  t.equal(asTenant.json().error.code, 'UNAUTHORIZED')
})

t.test("the last minute's ring: seconds leave the window one by one, a slot is reused after 60 s", async (t) => {
  let now = 1_000_000_000_000
  const recent = new RecentRequests(() => now)
  for (const status of [200, 404, 500]) recent.record(status)
  now += 30_000
  recent.record(201)
  recent.record(429)
  t.same(recent.lastMinute(), { requests: 5, clientErrors: 2, serverErrors: 1 })
  now += 29_999
  t.same(recent.lastMinute(), { requests: 5, clientErrors: 2, serverErrors: 1 }, '59.999 s after the first: all in')
  now += 1
  t.same(recent.lastMinute(), { requests: 2, clientErrors: 1, serverErrors: 0 }, '60 s after the first: its second is out')
  // The first second's slot again, 60 s on: its old counts are dropped, not added to.
  recent.record(503)
  t.same(recent.lastMinute(), { requests: 3, clientErrors: 1, serverErrors: 1 })
  now += 30_000
  t.same(recent.lastMinute(), { requests: 1, clientErrors: 0, serverErrors: 1 })
  now += 3_600_000
  t.same(recent.lastMinute(), { requests: 0, clientErrors: 0, serverErrors: 0 }, 'an hour idle: nothing')
})
