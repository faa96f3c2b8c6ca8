// @suites: pg-all
import t from 'tap'
import { Counter, Histogram, Registry, type RegistryContentType } from 'prom-client'
import { Metrics } from '../src/lib/metrics'
import { RequestMetrics } from '../src/lib/request-metrics'
import type { App } from '../src/http/types'
import { bearer, createTenant, fileBytes, handshake, type Handshake, makeApp, putContent, sqliteOnly, upload } from './helper'

/** The value of one sample of the Prometheus text `text`, or undefined when it is absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$/i.exec(line)
    if (!m || m[1] !== name) continue
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]))
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3])
  }
  return undefined
}

async function scrape(app: App, headers: Record<string, string> = {}): Promise<string> {
  const res = await app.inject({ method: 'GET', url: '/metrics', headers })
  if (res.statusCode !== 200) throw new Error(`GET /metrics: ${res.statusCode} ${res.body}`)
  return res.body
}

t.test('requests are counted and timed by route template, never by URL', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const { fileId, put } = await upload(app, tenant.headers)
  t.equal(put.statusCode, 200)
  await app.inject({ method: 'GET', url: `/api/v1/files/${fileId}/download`, headers: tenant.headers })
  await app.inject({ method: 'GET', url: `/api/v1/files/${fileId}/download`, headers: tenant.headers })
  await app.inject({ method: 'GET', url: '/api/v1/files/not-a-file', headers: tenant.headers })
  await app.inject({ method: 'GET', url: '/no/such/route/sk_live_abcdef?token=secret-token' })
  const res = await app.inject({ method: 'GET', url: '/metrics' })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  const text = res.body
  const route = '/api/v1/files/:fileId/download'
  t.equal(sample(text, 'coffer_http_requests_total', { method: 'GET', route, status_code: '200' }), 2)
  t.equal(sample(text, 'coffer_http_requests_total', { method: 'GET', route: '/api/v1/files/:fileId', status_code: '404' }), 1)
  t.equal(sample(text, 'coffer_http_requests_total', { method: 'GET', route: 'unmatched', status_code: '404' }), 1)
  t.equal(sample(text, 'coffer_http_requests_total', { method: 'PUT', route: '/api/v1/upload/:fileId', status_code: '200' }), 1)
  t.equal(sample(text, 'coffer_http_request_duration_seconds_count', { method: 'GET', route, status_code: '200' }), 2)
  t.equal(sample(text, 'coffer_http_request_duration_seconds_bucket', { method: 'GET', route, status_code: '200', le: '+Inf' }), 2)
  t.equal(sample(text, 'coffer_http_requests_in_flight'), 1, 'the scrape itself is in flight')
  for (const leak of [fileId, tenant.apiKey, tenant.id, 'sk_live_', 'secret-token', 'no/such/route', 'not-a-file']) {
    t.notOk(text.includes(leak), `no ${leak} in the metrics`)
  }
})

t.test('uploads by outcome, and content bytes in and out', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const ok = await upload(app, tenant.headers, { bytes: fileBytes('image/png', 3000) })
  await upload(app, tenant.headers, { bytes: fileBytes('image/png', 1000, 2) })
  const h = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'x.png', fileSizeBytes: 10 })).json() as Handshake
  const tooLarge = await putContent(app, h, fileBytes('image/png', 20))
  t.equal(tooLarge.statusCode, 413)
  const h2 = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'y.png' })).json() as Handshake
  const wrongType = await putContent(app, h2, fileBytes('application/pdf', 500))
  t.equal(wrongType.statusCode, 400)
  await app.inject({ method: 'GET', url: `/api/v1/files/${ok.fileId}/download`, headers: { ...tenant.headers, range: 'bytes=0-99' } })
  await app.inject({ method: 'GET', url: `/api/v1/files/${ok.fileId}/download`, headers: tenant.headers })

  const text = await scrape(app)
  t.equal(sample(text, 'coffer_uploads_total', { outcome: 'completed' }), 2)
  t.equal(sample(text, 'coffer_uploads_total', { outcome: 'file_too_large' }), 1)
  t.equal(sample(text, 'coffer_uploads_total', { outcome: 'invalid_file_type' }), 1)
  // The 413 was refused on its Content-Length, before a byte was read; the wrong type was read.
  t.equal(sample(text, 'coffer_upload_bytes_total'), 3000 + 1000 + 500, 'every body byte read, refused ones too')
  t.equal(sample(text, 'coffer_download_bytes_total'), 100 + 3000)
})

t.test('abandoned uploads swept by the server count as expired', async (t) => {
  const { app, core, clock } = await makeApp(t)
  const tenant = await createTenant(app)
  await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'abandoned.png' })
  clock.advance(2 * 60 * 60_000)
  t.equal(core.uploads.sweepExpired(), 1)
  t.equal(sample(await scrape(app), 'coffer_uploads_total', { outcome: 'expired' }), 1)
})

t.test('blob gauges: content on disk counted once, exact at every scrape, through uploads and GC', async (t) => {
  const { app, core, clock } = await makeApp(t, { COFFER_DELETED_RETENTION_SECONDS: '0' })
  const a = await createTenant(app)
  const b = await createTenant(app)
  const same = fileBytes('image/png', 4096, 7)
  await upload(app, a.headers, { bytes: same })
  await upload(app, b.headers, { bytes: same })
  let text = await scrape(app)
  t.equal(sample(text, 'coffer_blob_bytes'), 4096, 'identical content is stored, and counted, once')
  t.equal(sample(text, 'coffer_blobs'), 1)
  const other = await upload(app, a.headers, { bytes: fileBytes('image/png', 100, 8) })
  text = await scrape(app)
  t.equal(sample(text, 'coffer_blob_bytes'), 4196)
  t.equal(sample(text, 'coffer_blobs'), 2)
  await app.inject({ method: 'DELETE', url: `/api/v1/files/${other.fileId}`, headers: a.headers })
  clock.advance(1)
  await core.gc.collect()
  text = await scrape(app)
  t.equal(sample(text, 'coffer_blob_bytes'), 4096, 'collected content leaves the gauge')
  t.equal(sample(text, 'coffer_blobs'), 1)
  const sum = core.db.prepare('SELECT coalesce(sum(size_bytes), 0) AS bytes, count(*) AS count FROM blobs').get()
  t.same(sum, { bytes: 4096, count: 1 }, 'the maintained totals equal the blobs table')
})

t.test('the outbox gauge has samples only when an outbox source is wired', async (t) => {
  const without = new Metrics({ blobs: () => ({ bytes: 0, count: 0 }) })
  const plain = await without.registry.metrics()
  t.match(plain, /# TYPE coffer_webhook_outbox_events gauge/)
  t.equal(sample(plain, 'coffer_webhook_outbox_events'), undefined)
  let pending = 3
  const withOutbox = new Metrics({ blobs: () => ({ bytes: 0, count: 0 }), outbox: () => ({ pending, dead: 1 }) })
  let text = await withOutbox.registry.metrics()
  t.equal(sample(text, 'coffer_webhook_outbox_events', { state: 'pending' }), 3)
  t.equal(sample(text, 'coffer_webhook_outbox_events', { state: 'dead' }), 1)
  pending = 0
  text = await withOutbox.registry.metrics()
  t.equal(sample(text, 'coffer_webhook_outbox_events', { state: 'pending' }), 0, 'read at every scrape')
})

t.test('COFFER_METRICS_TOKEN: when set, /metrics needs it as a Bearer token', async (t) => {
  const token = 'metrics-token-0123456789'
  const { app } = await makeApp(t, { COFFER_METRICS_TOKEN: token })
  const tenant = await createTenant(app)
  for (const headers of [{}, bearer('wrong-token-0123456789'), tenant.headers, { authorization: `Basic ${token}` }]) {
    const res = await app.inject({ method: 'GET', url: '/metrics', headers })
    t.equal(res.statusCode, 401)
    t.equal(res.json().error.code, 'UNAUTHORIZED')
  }
  t.match(await scrape(app, bearer(token)), /coffer_http_requests_total/)

  const open = await makeApp(t)
  t.equal((await open.app.inject({ method: 'GET', url: '/metrics' })).statusCode, 200, 'without the setting it is open, like /health')
})

t.test('the serving process adds Node process metrics', async (t) => {
  const { app, core } = await makeApp(t)
  t.equal(sample(await scrape(app), 'process_resident_memory_bytes'), undefined, 'not in a bare core (the CLI, tests)')
  core.metrics.collectProcessMetrics()
  core.metrics.collectProcessMetrics()
  const text = await scrape(app)
  t.ok((sample(text, 'process_resident_memory_bytes') ?? 0) > 0)
  t.ok(sample(text, 'nodejs_eventloop_lag_seconds') !== undefined)
})

t.test('the served metrics report the webhook outbox by state', async (t) => {
  const { app, core, clock } = await makeApp(t, { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' })
  const tenant = await createTenant(app)
  // Nothing listens on port 9: every attempt fails, and the event ends dead.
  await upload(app, tenant.headers, { extra: { webhookUrl: 'http://127.0.0.1:9/hook' } })
  await upload(app, tenant.headers, { extra: { webhookUrl: 'http://127.0.0.1:9/hook' } })
  let text = await scrape(app)
  t.equal(sample(text, 'coffer_webhook_outbox_events', { state: 'pending' }), 2)
  t.equal(sample(text, 'coffer_webhook_outbox_events', { state: 'dead' }), 0)
  for (let i = 0; i < 3; i++) {
    await core.webhooks.runOnce()
    clock.advance(2000)
  }
  text = await scrape(app)
  t.equal(sample(text, 'coffer_webhook_outbox_events', { state: 'pending' }), 0)
  t.equal(sample(text, 'coffer_webhook_outbox_events', { state: 'dead' }), 2)
})

t.test("the request counter and histogram render exactly as prom-client's own Counter and Histogram would", async (t) => {
  const buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
  const names = { counter: 'x_requests_total', counterHelp: 'HTTP responses sent', histogram: 'x_duration_seconds', histogramHelp: 'Time to "respond"\\' }
  const theirs = new Registry<RegistryContentType>()
  const counter = new Counter({ name: names.counter, help: names.counterHelp, labelNames: ['method', 'route', 'status_code'], registers: [theirs] })
  const histogram = new Histogram({
    name: names.histogram,
    help: names.histogramHelp,
    labelNames: ['method', 'route', 'status_code'],
    buckets,
    registers: [theirs],
  })
  const ours = new Registry<RegistryContentType>()
  const requests = new RequestMetrics(ours, buckets, names)
  t.equal(await ours.metrics(), await theirs.metrics(), 'the same before any request')
  const routes = ['/api/v1/files/:fileId', '/api/v1/files', 'unmatched', 's3:/{bucket}/{key}', 'a "quoted" \\ route\nwith a newline']
  const statuses = [200, 201, 304, 404, 500]
  // Durations on, between and beyond the bounds, zero included.
  const durations = [0, 0.0001, 0.005, 0.0050001, 0.01, 0.3, 1, 59.9, 60, 61, 1e6]
  for (let i = 0; i < 2000; i++) {
    const method = i % 7 === 0 ? 'PUT' : 'GET'
    const route = routes[(i * 3) % routes.length]!
    const status = statuses[(i + (i >> 3)) % statuses.length]!
    const seconds = durations[i % durations.length]! * (1 + (i % 3) / 1000)
    requests.record(method, route, status, seconds)
    const labels = { method, route, status_code: String(status) }
    counter.inc(labels)
    histogram.observe(labels, seconds)
  }
  t.equal(await ours.metrics(), await theirs.metrics(), 'the same Prometheus text')
  t.same(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON(), 'the same JSON export')
  ours.setContentType(Registry.OPENMETRICS_CONTENT_TYPE)
  theirs.setContentType(Registry.OPENMETRICS_CONTENT_TYPE)
  t.equal(await ours.metrics(), await theirs.metrics(), 'the same OpenMetrics text')
  ours.resetMetrics()
  theirs.resetMetrics()
  t.equal(await ours.metrics(), await theirs.metrics(), 'the same after a reset')
})

t.test(
  'group commit: its batches, the writes they carried, its WAL flushes and the time each took (#29)',
  { skip: sqliteOnly('the group commit of SQLite; on PostgreSQL each unit commits in its own transaction, no group commit of ours (#30)') },
  async (t) => {
    const { app } = await makeApp(t)
    const tenant = await createTenant(app)
    const before = await scrape(app)
    // Settled uploads commit through group commit (their handshakes do not wait for a flush).
    await Promise.all(Array.from({ length: 6 }, (_, i) => upload(app, tenant.headers, { bytes: fileBytes('image/png', 1000, i + 1) })))
    const after = await scrape(app)
    const delta = (name: string) => sample(after, name)! - (sample(before, name) ?? 0)
    const writes = delta('coffer_group_commit_writes_total')
    const batches = delta('coffer_group_commit_batches_total')
    t.ok(writes >= 6, `the six uploads' commits (${writes})`)
    t.ok(batches >= 1 && batches <= writes, `in at most as many batches (${batches})`)
    t.ok(delta('coffer_group_commit_flushes_total') >= 1, 'flushed')
    t.ok(delta('coffer_group_commit_seconds_total') > 0, 'the time committing')
    t.ok(delta('coffer_group_commit_flush_seconds_total') > 0, 'the time flushing')
  },
)
