// @suites: pg-all
// Quotas a newcomer does not trip over: `unlimited` wherever a quota is given (admin API, CLI),
// stored as the largest safe integer so that every answer's quotaBytes stays a number; a default
// for new tenants (COFFER_DEFAULT_QUOTA_BYTES); and a CI fixture's tenant unlimited unless told
// otherwise, which takes a 1 GiB multipart upload (it stopped at part 63 under the spec's
// 524288000-byte default). On SQLite and, with COFFER_TEST_DATABASE=postgres, on PostgreSQL.
import path from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { CreateBucketCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { tenantCommand } from '../src/cli/tenant'
import { UsageError } from '../src/cli/io'
import { ConfigError, loadConfig } from '../src/config'
import { admin, bearer, createTenant, databaseEnvOf, makeApp, TEST_DATABASE, tempDir, testDatabaseEnv } from './helper'
import { assertFlatMemory, buildBundle, memoryOf, startCoffer } from './process-helper'

buildBundle()

// Servers, and one 1 GiB upload.
t.setTimeout(900_000)

const UNLIMITED = Number.MAX_SAFE_INTEGER
const MiB = 1024 * 1024
const GiB = 1024 * MiB

t.test('admin API: quotaBytes "unlimited" (or null) is stored as 2^53-1 and answered as a number; uploads are not limited by it', async (t) => {
  const { app } = await makeApp(t)
  const created = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'big', quotaBytes: 'unlimited' } })
  t.equal(created.statusCode, 201, created.body)
  t.equal(created.json().quotaBytes, UNLIMITED)
  const id = created.json().id as string
  const key = bearer(created.json().apiKey)
  const quota = async () => (await app.inject({ url: '/api/v1/tenant/quota', headers: key })).json()
  t.same(await quota(), { quotaBytes: UNLIMITED, usedBytes: 0, availableBytes: UNLIMITED, usagePercent: 0 })
  const hs = (size: number) =>
    app.inject({ method: 'POST', url: '/api/v1/upload/request', headers: key, payload: { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: size } })
  for (let i = 0; i < 6; i++) t.equal((await hs(100 * MiB)).statusCode, 200, `reservation ${i + 1} of 100 MiB (600 MiB is past the spec's default)`)
  t.same(await quota(), { quotaBytes: UNLIMITED, usedBytes: 600 * MiB, availableBytes: UNLIMITED - 600 * MiB, usagePercent: 0 })
  t.equal((await app.inject({ url: `/api/v1/admin/tenants/${id}`, headers: admin })).json().quotaBytes, UNLIMITED)

  const patch = (body: unknown) => app.inject({ method: 'PATCH', url: `/api/v1/admin/tenants/${id}`, headers: admin, payload: body as object })
  t.equal((await patch({ quotaBytes: 1000 })).json().quotaBytes, 1000)
  const over = await hs(1)
  t.equal(over.statusCode, 403)
  t.match(over.json().error, { code: 'QUOTA_EXCEEDED', details: { scope: 'tenant', quotaBytes: 1000 } })
  const lifted = await patch({ quotaBytes: null })
  t.equal(lifted.statusCode, 200)
  t.equal(lifted.json().quotaBytes, UNLIMITED, 'null lifts the limit, as for a workspace')
  t.equal((await hs(1)).statusCode, 200)
  t.equal((await patch({ quotaBytes: 'unlimited' })).json().quotaBytes, UNLIMITED)

  for (const bad of ['lots', 'Unlimited ', -1, 1.5, '100', 2 ** 53]) {
    const res = await patch({ quotaBytes: bad })
    t.equal(res.statusCode, 400, JSON.stringify(bad))
    t.equal(res.json().error.code, 'VALIDATION_ERROR')
    t.equal(res.json().error.details.errors[0].path, '/quotaBytes', JSON.stringify(bad))
  }
})

t.test('COFFER_DEFAULT_QUOTA_BYTES: the quota of tenants created without one', async (t) => {
  const small = await makeApp(t, { COFFER_DEFAULT_QUOTA_BYTES: '1KiB' })
  const a = await createTenant(small.app, { name: 'a' })
  const shown = (await small.app.inject({ url: `/api/v1/admin/tenants/${a.id}`, headers: admin })).json()
  t.equal(shown.quotaBytes, 1024)
  const over = await small.app.inject({
    method: 'POST',
    url: '/api/v1/upload/request',
    headers: a.headers,
    payload: { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: 1025 },
  })
  t.equal(over.statusCode, 403)
  t.match(over.json().error, { code: 'QUOTA_EXCEEDED', details: { quotaBytes: 1024, requestedBytes: 1025 } })
  const given = await small.app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'b', quotaBytes: 5000 } })
  t.equal(given.json().quotaBytes, 5000, 'a quota given wins over the default')

  const open = await makeApp(t, { COFFER_DEFAULT_QUOTA_BYTES: 'unlimited' })
  const c = await open.app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'c' } })
  t.equal(c.json().quotaBytes, UNLIMITED)

  t.equal(loadConfig({ COFFER_DEFAULT_QUOTA_BYTES: '10GiB' }).defaultQuotaBytes, 10 * GiB)
  t.equal(loadConfig({}, { 'default-quota-bytes': '0' }).defaultQuotaBytes, 0)
  t.equal(loadConfig({}).defaultQuotaBytes, undefined)
  for (const bad of ['lots', '-5', '1.5.5GiB', String(2 ** 53)]) {
    t.throws(() => loadConfig({ COFFER_DEFAULT_QUOTA_BYTES: bad }), ConfigError, bad)
    t.throws(() => loadConfig({ COFFER_DEFAULT_QUOTA_BYTES: bad }), { message: /COFFER_DEFAULT_QUOTA_BYTES=.* must be a number of bytes .* or unlimited/ }, bad)
  }
})

function cliIo(env: Record<string, string>) {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  return { io: { env, stdout, stderr }, out: () => (stdout.read() as Buffer | null)?.toString('utf8') ?? '' }
}

t.test('coffer tenant create|update --quota-bytes unlimited, and what show and list print', async (t) => {
  const { dir, core } = await makeApp(t)
  const env = { COFFER_DATA_DIR: dir, ...databaseEnvOf(dir) }
  const c = cliIo(env)
  t.equal(await tenantCommand(['create', '--name', 'Unlimited Co', '--quota-bytes', 'unlimited'], c.io), 0)
  const text = c.out()
  t.match(text, /\n {2}quota: {10}unlimited\n/)
  const id = /id:\s+(\S+)/.exec(text)![1]!
  t.equal(core.tenants.show(id).quotaBytes, UNLIMITED)
  t.equal(await tenantCommand(['show', id], c.io), 0)
  t.match(c.out(), /used\/quota: {2}0\/unlimited bytes \(no limit\)/)
  t.equal(await tenantCommand(['list'], c.io), 0)
  t.match(c.out(), new RegExp(`${id} {2}0/unlimited \\(no limit\\)`))
  t.equal(await tenantCommand(['show', id, '--json'], c.io), 0)
  t.equal(JSON.parse(c.out()).quotaBytes, UNLIMITED, '--json gives the number, as the admin API does')

  t.equal(await tenantCommand(['update', id, '--quota-bytes', '10MiB', '--json'], c.io), 0)
  t.equal(JSON.parse(c.out()).quotaBytes, 10 * MiB)
  t.equal(await tenantCommand(['update', id, '--quota-bytes', 'UNLIMITED', '--json'], c.io), 0)
  t.equal(JSON.parse(c.out()).quotaBytes, UNLIMITED)
  await t.rejects(tenantCommand(['update', id, '--quota-bytes', 'lots'], c.io), UsageError)
  await t.rejects(tenantCommand(['update', id, '--quota-bytes', 'lots'], c.io), { message: /--quota-bytes must be .* or unlimited/ })

  const withDefault = cliIo({ ...env, COFFER_DEFAULT_QUOTA_BYTES: '2MiB' })
  t.equal(await tenantCommand(['create', '--name', 'Defaulted', '--json'], withDefault.io), 0)
  t.equal(JSON.parse(withDefault.out()).quotaBytes, 2 * MiB, 'the CLI applies the default setting too')
})

/** What a CI fixture announces: its API, the tenant's key and S3 pair, the server's pid. */
interface Fixture {
  url: string
  apiKey: string
  s3: { endpoint: string; accessKeyId: string; secretAccessKey: string }
  pid: number
}

const FIXED = { key: 'sk_test_quotafixturekey0123456789', id: 'QUOTAFIXTURE', secret: 'quota-fixture-secret-0123456789' }

/**
 * `coffer serve --ephemeral` (SQLite only: it keeps its metadata in its temporary data dir), or
 * the other fixture, fixed credentials at the first start of a new data dir (on the test's database).
 */
async function fixture(t: Test, kind: 'ephemeral' | 'fixed', env: Record<string, string> = {}): Promise<Fixture> {
  const cwd = tempDir(t)
  if (kind === 'ephemeral') {
    const server = await startCoffer(['serve', '--ephemeral', '--port', '0'], {
      cwd,
      timeoutMs: 60_000,
      env: { TMPDIR: cwd, ...env },
      ready: /^\{"url":"(http:\/\/[^"]+)"/,
    })
    t.teardown(() => void server.child.kill('SIGKILL'))
    const line = JSON.parse(server.stdout.find((l) => l.startsWith('{"url"'))!) as { url: string; tenant: { apiKey: string }; s3: Fixture['s3'] }
    return { url: line.url, apiKey: line.tenant.apiKey, s3: line.s3, pid: server.child.pid! }
  }
  const dataDir = path.join(cwd, 'data')
  const args = [
    'serve',
    '--port',
    '0',
    '--data-dir',
    dataDir,
    '--tenant-api-key',
    FIXED.key,
    '--s3-access-key-id',
    FIXED.id,
    '--s3-secret-access-key',
    FIXED.secret,
  ]
  const server = await startCoffer(args, {
    cwd,
    timeoutMs: 60_000,
    env: { ...(await testDatabaseEnv(t, dataDir)), ...env },
    ready: /coffer S3 listening on (http:\/\/[^\s"]+)/,
  })
  t.teardown(() => void server.child.kill('SIGKILL'))
  const url = /coffer listening on (http:\/\/[^\s"]+)/.exec(server.lines.join('\n'))![1]!
  return { url, apiKey: FIXED.key, s3: { endpoint: server.url, accessKeyId: FIXED.id, secretAccessKey: FIXED.secret }, pid: server.child.pid! }
}

const quotaOf = async (f: Fixture) => (await fetch(`${f.url}/api/v1/tenant/quota`, { headers: bearer(f.apiKey) })).json()

t.test("a fixture's tenant is unlimited unless COFFER_DEFAULT_QUOTA_BYTES says otherwise", async (t) => {
  const kinds = TEST_DATABASE === 'postgres' ? (['fixed'] as const) : (['ephemeral', 'fixed'] as const)
  for (const kind of kinds) {
    t.equal((await quotaOf(await fixture(t, kind))).quotaBytes, UNLIMITED, kind)
    t.equal((await quotaOf(await fixture(t, kind, { COFFER_DEFAULT_QUOTA_BYTES: '1MiB' }))).quotaBytes, MiB, `${kind}, told otherwise`)
  }
})

/** `size` bytes in 1 MiB pieces, each made when the upload asks for it: never the whole body in memory. */
async function* generated(size: number): AsyncGenerator<Buffer> {
  for (let sent = 0, i = 0; sent < size; sent += MiB, i++) {
    const piece = Buffer.alloc(Math.min(MiB, size - sent), i & 0xff)
    piece.writeUInt32BE(i, 0)
    yield piece
  }
}

t.test("1 GiB multipart upload (8 MiB parts, AWS SDK lib-storage) into the CI fixture's unlimited tenant", async (t) => {
  const f = await fixture(t, TEST_DATABASE === 'postgres' ? 'fixed' : 'ephemeral')
  const s3 = new S3Client({ endpoint: f.s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: f.s3 })
  t.teardown(() => s3.destroy())
  await s3.send(new CreateBucketCommand({ Bucket: 'ci-big' }))
  const before = memoryOf(f.pid).rss
  let parts = 0
  const upload = new Upload({ client: s3, params: { Bucket: 'ci-big', Key: 'big.bin', Body: Readable.from(generated(GiB)) }, partSize: 8 * MiB, queueSize: 4 })
  upload.on('httpUploadProgress', (p) => void (p.part !== undefined && (parts = Math.max(parts, p.part))))
  await upload.done()
  t.equal(parts, 128, 'all 128 parts sent (the spec default stopped it at part 63)')
  t.equal((await s3.send(new HeadObjectCommand({ Bucket: 'ci-big', Key: 'big.bin' }))).ContentLength, GiB)
  t.same(await quotaOf(f), { quotaBytes: UNLIMITED, usedBytes: GiB, availableBytes: UNLIMITED - GiB, usagePercent: 0 })
  assertFlatMemory(t, f.pid, before, '1 GiB in')
})
