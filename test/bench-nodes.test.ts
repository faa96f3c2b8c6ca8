// @suites: sqlite
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { headRequest, headRequests } from '../scripts/bench/head-requests'
import { benchSchema, pgCpu, pgCpuSpent } from '../scripts/bench/pg'
import { tempDir } from './helper'
import { withPg } from './pg/fixture'

// The pieces of the bench's #30 figures that decide what they report (scripts/bench/README.md,
// "Metadata in PostgreSQL: 1 and 3 nodes"): the HEAD generator counts answers that have no body
// (wrk waits for the body a Content-Length announces, and measured 0 HeadObjects), and a node's
// PostgreSQL backend is found by the application_name its URL carries, over the bridge's own.
t.setTimeout(120_000)

t.test('the HEAD generator counts bodiless answers, 200s as good and any other status as bad', async (t) => {
  const seen = { ok: 0, refused: 0 }
  const server = http.createServer((req, res) => {
    t.equal(req.method, 'HEAD')
    t.equal(req.headers['x-amz-content-sha256'], 'UNSIGNED-PAYLOAD')
    // As Coffer's HeadObject: the object's length announced, no body sent.
    const refused = req.url === '/bench/refused'
    seen[refused ? 'refused' : 'ok']++
    res.writeHead(refused ? 403 : 200, { 'content-length': '4096' })
    res.end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const { port } = server.address() as AddressInfo
  const line = (p: string) => `${p}\t20261126T080000Z\tAWS4-HMAC-SHA256 Credential=x`
  const good = await headRequests({ host: '127.0.0.1', port, seconds: 0.5, connections: 4, requests: [headRequest('127.0.0.1', port, line('/bench/0.bin'))] })
  t.ok(good.good > 10, `answers counted (${good.good} in ${good.seconds.toFixed(2)} s)`)
  t.equal(good.bad, 0)
  t.equal(good.requests, good.good)
  t.equal(good.good, seen.ok, 'each request the server answered, once')
  const mixed = await headRequests({
    host: '127.0.0.1',
    port,
    seconds: 0.5,
    connections: 2,
    requests: [headRequest('127.0.0.1', port, line('/bench/0.bin')), headRequest('127.0.0.1', port, line('/bench/refused'))],
  })
  t.ok(mixed.bad > 0 && mixed.good > 0, `403s are bad (${mixed.bad}), 200s good (${mixed.good})`)
  t.equal(mixed.bad, seen.refused)
})

withPg(t, "a node's PostgreSQL backend found by its URL's application_name", (url) => {
  t.test("pgCpu finds a core's backend by the application_name of its URL and counts the CPU it spends", async (t) => {
    const schema = await benchSchema(url)
    t.teardown(() => schema.drop())
    const core = createCore(loadConfig({ COFFER_DATABASE_URL: schema.urlFor('probe') }, { 'data-dir': tempDir(t) }))
    t.teardown(() => core.close())
    t.equal(core.db.dialect, 'postgres')
    const before = await pgCpu(url)
    const pids = [...(before.backends.get('probe')?.keys() ?? [])]
    t.equal(pids.length, 1, "the core's one connection, named coffer-bench-probe (the URL's name over the bridge's 'coffer')")
    t.notOk(before.backends.has('admin'), "the bench's own admin connection is never a node's")
    t.ok(before.background.size >= 3, `the postmaster and its background processes (${before.background.size})`)
    for (let i = 0; i < 150; i++) core.tenants.create({ name: `probe-${i}`, quotaBytes: 1024 })
    const spent = pgCpuSpent(before, await pgCpu(url))
    t.ok(spent.backends.get('probe')! > 0, `the backend's CPU over 150 tenants created: ${spent.backends.get('probe')} ms`)
  })
})
