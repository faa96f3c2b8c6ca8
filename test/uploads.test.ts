// @suites: pg s3
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { createTenant, diskOnly, fileBytes, handshake, makeApp, receivedAtLeast, storedBlobs, upload, type Handshake } from './helper'
import { SWEEP_GRACE_MS } from '../src/services/uploads'

const quotaOf = async (app: Awaited<ReturnType<typeof makeApp>>['app'], headers: Record<string, string>) =>
  (await app.inject({ url: '/api/v1/tenant/quota', headers })).json() as { usedBytes: number; availableBytes: number }
const statusOf = async (app: Awaited<ReturnType<typeof makeApp>>['app'], headers: Record<string, string>, id: string) =>
  (await app.inject({ url: `/api/v1/files/${id}`, headers })).json() as { processingStatus: string; sizeBytes: number }
const filesIn = (dir: string) =>
  fs.existsSync(dir) ? fs.readdirSync(dir, { recursive: true }).filter((p) => fs.statSync(path.join(dir, String(p))).isFile()) : []

t.test('handshake: response shape, pending row, reservation', async (t) => {
  const { app, clock } = await makeApp(t)
  const tenant = await createTenant(app, { allowedFileTypes: ['image/png', 'application/pdf'] })
  const res = await handshake(app, tenant.headers, {
    fileType: 'image/png',
    fileName: 'cat.png',
    fileSizeBytes: 2048,
    context: 'avatars',
    tags: { user: '42' },
  })
  t.equal(res.statusCode, 200)
  const h = res.json() as Handshake
  t.match(h.fileId, /^[0-9a-f-]{36}$/)
  const expires = clock.now() + 15 * 60_000
  t.equal(h.presignedUrl, `/api/v1/upload/${h.fileId}?expires=${expires}&token=${/token=([0-9a-f]{64})$/.exec(h.presignedUrl)?.[1]}`)
  t.equal(h.expiresAt, new Date(expires).toISOString())
  t.same(h.uploadMetadata, { maxSizeBytes: 2048, allowedTypes: ['image/png', 'application/pdf'] })
  const file = (await app.inject({ url: `/api/v1/files/${h.fileId}`, headers: tenant.headers })).json()
  t.match(file, {
    id: h.fileId,
    processingStatus: 'pending',
    sizeBytes: 2048,
    originalName: 'cat.png',
    context: 'avatars',
    tags: { user: '42' },
    workspaceId: null,
    metadata: null,
  })
  t.equal((await quotaOf(app, tenant.headers)).usedBytes, 2048, 'the declared size is reserved')
  const undeclared = (await handshake(app, tenant.headers, { fileType: 'application/pdf', fileName: 'doc.pdf' })).json() as Handshake
  t.equal(undeclared.uploadMetadata.maxSizeBytes, 104857600)
  t.equal((await quotaOf(app, tenant.headers)).usedBytes, 2048, 'nothing reserved without a declared size')
})

t.test('handshake: file types', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app, { allowedFileTypes: ['image/png'] })
  for (const fileType of ['text/html', 'image/svg+xml', 'image/jpeg', 'IMAGE/PNG']) {
    const res = await handshake(app, tenant.headers, { fileType, fileName: 'x.png' })
    t.equal(res.statusCode, 400, fileType)
    t.same(res.json().error, { code: 'INVALID_FILE_TYPE', message: res.json().error.message, details: { fileType, allowedTypes: ['image/png'] } })
  }
})

t.test('handshake: fileName rules', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const bad = [
    '',
    'x'.repeat(256),
    '.',
    '..',
    'a/b.png',
    'a\\b.png',
    'a<b',
    'a>b',
    'a:b',
    'a"b',
    'a|b',
    'a?b',
    'a*b',
    'a\nb',
    'a\rb',
    'a\u0000b',
    'a\u007fb',
    'a\u0085b',
    'invoice\u202Efdp.exe',
    'x\ud800y',
  ]
  for (const fileName of bad) {
    const res = await handshake(app, tenant.headers, { fileType: 'image/png', fileName })
    t.equal(res.statusCode, 400, JSON.stringify(fileName))
    t.equal(res.json().error.code, 'VALIDATION_ERROR')
    t.equal(res.json().error.details.errors[0].path, '/fileName', JSON.stringify(fileName))
  }
  const good = ["Ünïcödé 文件 (1) - copy_2.final, it's + & @ # !.png", 'x'.repeat(255), '...png', '.hidden', 'emoji 📷.png', 'مرحبا.png']
  for (const fileName of good) {
    const res = await handshake(app, tenant.headers, { fileType: 'image/png', fileName })
    t.equal(res.statusCode, 200, JSON.stringify(fileName))
    const file = (await app.inject({ url: `/api/v1/files/${res.json().fileId}`, headers: tenant.headers })).json()
    t.equal(file.originalName, fileName, 'stored exactly as sent')
  }
})

t.test('handshake: sizes, context, tags, webhookUrl, unknown fields', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const base = { fileType: 'image/png', fileName: 'a.png' }
  const invalid: [Record<string, unknown>, string][] = [
    [{ fileSizeBytes: -1 }, '/fileSizeBytes'],
    [{ fileSizeBytes: 1.5 }, '/fileSizeBytes'],
    [{ fileSizeBytes: '100' }, '/fileSizeBytes'],
    [{ context: 'c'.repeat(101) }, '/context'],
    [{ context: 'a\u0001b' }, '/context'],
    [{ tags: { k: 1 } }, '/tags/k'],
    [{ tags: { ['k'.repeat(101)]: 'v' } }, '/tags'],
    [{ tags: { '': 'v' } }, '/tags'],
    [{ tags: { k: 'v'.repeat(501) } }, '/tags/k'],
    [{ tags: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) }, '/tags'],
    [{ tags: ['a'] }, '/tags'],
    [{ webhookUrl: 'ftp://example.com/hook' }, '/webhookUrl'],
    [{ webhookUrl: 'not a url' }, '/webhookUrl'],
    [{ webhookUrl: `https://example.com/${'a'.repeat(2040)}` }, '/webhookUrl'],
    [{ workspaceId: 'nope' }, '/workspaceId'],
    [{ fileTyp: 'image/png' }, '/fileTyp'],
    [{ fileType: undefined }, '/fileType'],
  ]
  for (const [extra, path] of invalid) {
    const res = await handshake(app, tenant.headers, { ...base, ...extra })
    t.equal(res.statusCode, 400, JSON.stringify(extra).slice(0, 80))
    t.equal(res.json().error.code, 'VALIDATION_ERROR')
    t.ok(
      res.json().error.details.errors.some((e: { path: string }) => e.path === path),
      `${path} in ${JSON.stringify(res.json().error.details.errors).slice(0, 200)}`,
    )
  }
  const tooBig = await handshake(app, tenant.headers, { ...base, fileSizeBytes: 104857601 })
  t.equal(tooBig.statusCode, 400)
  t.same(tooBig.json().error.code, 'FILE_TOO_LARGE')
  t.same(tooBig.json().error.details, { fileSize: 104857601, maxSize: 104857600 })
  const max = await handshake(app, tenant.headers, {
    ...base,
    fileSizeBytes: 104857600,
    context: 'c'.repeat(100),
    tags: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v'.repeat(500)])),
    webhookUrl: 'https://hooks.example.com/coffer?x=1',
  })
  t.equal(max.statusCode, 200, 'every limit is inclusive')
})

t.test('handshake: workspace header and body must agree and exist', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const unknown = '01890000-0000-7000-8000-000000000000'
  const res = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', workspaceId: unknown })
  t.equal(res.statusCode, 404)
  t.equal(res.json().error.code, 'WORKSPACE_NOT_FOUND')
  const viaHeader = await handshake(app, { ...tenant.headers, 'x-workspace-id': unknown }, { fileType: 'image/png', fileName: 'a.png' })
  t.equal(viaHeader.statusCode, 404)
  t.equal(viaHeader.json().error.code, 'WORKSPACE_NOT_FOUND')
  const differ = await handshake(
    app,
    { ...tenant.headers, 'x-workspace-id': unknown },
    { fileType: 'image/png', fileName: 'a.png', workspaceId: '01890000-0000-7000-8000-000000000001' },
  )
  t.equal(differ.statusCode, 400)
  t.equal(differ.json().error.details.errors[0].path, '/workspaceId')
  const badHeader = await handshake(app, { ...tenant.headers, 'x-workspace-id': 'nope' }, { fileType: 'image/png', fileName: 'a.png' })
  t.equal(badHeader.statusCode, 400)
  t.equal(badHeader.json().error.details.errors[0].path, '/headers/x-workspace-id')
})

t.test('handshake: quota reservation, exact fill allowed', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app, { quotaBytes: 1000 })
  const ok = (n: number) => handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: n })
  t.equal((await ok(600)).statusCode, 200)
  const over = await ok(401)
  t.equal(over.statusCode, 403)
  t.same(over.json().error, {
    code: 'QUOTA_EXCEEDED',
    message: over.json().error.message,
    details: { scope: 'tenant', quotaBytes: 1000, usedBytes: 600, requestedBytes: 401 },
  })
  t.equal((await ok(400)).statusCode, 200, 'filling the quota exactly is allowed')
  t.same(await quotaOf(app, tenant.headers), { quotaBytes: 1000, usedBytes: 1000, availableBytes: 0, usagePercent: 100 })
  t.equal((await ok(1)).statusCode, 403)
  t.equal((await ok(0)).statusCode, 200, 'zero bytes always fit')
})

t.test('PUT: success settles the reservation to the real size; a second PUT is 409', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app)
  const bytes = fileBytes('image/png', 1500)
  const h = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'p.png', fileSizeBytes: 4000 })).json() as Handshake
  t.equal((await quotaOf(app, tenant.headers)).usedBytes, 4000)
  const put = await app.inject({
    method: 'PUT',
    url: h.presignedUrl,
    headers: { 'content-type': 'image/png; charset=binary', authorization: 'Bearer sk_live_whatever-the-sdk-sends' },
    payload: bytes,
  })
  t.equal(put.statusCode, 200)
  t.match(put.json(), { id: h.fileId, processingStatus: 'completed', sizeBytes: 1500, fileType: 'image/png', url: `/api/v1/files/${h.fileId}/download` })
  t.equal((await quotaOf(app, tenant.headers)).usedBytes, 1500, 'reservation settled to the real size')
  const again = await app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png' }, payload: bytes })
  t.equal(again.statusCode, 409)
  t.equal(again.json().error.code, 'CONFLICT')
  t.equal(again.json().error.details.field, 'upload')
  t.same(filesIn(core.dataDir.tmp), [], 'no temp files remain')
  t.equal((await storedBlobs(core)).length, 1)
})

t.test('PUT: every supported type is accepted with its signature and refused with another', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const types = ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf']
  for (const [i, type] of types.entries()) {
    const ok = await upload(app, tenant.headers, { type, name: 'f', bytes: fileBytes(type, 300, i) })
    t.equal(ok.put.statusCode, 200, `${type} accepted`)
    const other = types[(i + 1) % types.length]!
    const bad = await upload(app, tenant.headers, { type, name: 'f', bytes: fileBytes(other, 300, i) })
    t.equal(bad.put.statusCode, 400, `${type} refuses ${other} bytes`)
    t.equal(bad.put.json().error.code, 'INVALID_FILE_TYPE')
    t.equal((await statusOf(app, tenant.headers, bad.fileId)).processingStatus, 'failed')
  }
  // GIF87a, and an AVIF whose AVIF brand is only among the compatible brands.
  t.equal((await upload(app, tenant.headers, { type: 'image/gif', bytes: Buffer.concat([Buffer.from('GIF87a'), Buffer.alloc(50)]) })).put.statusCode, 200)
  const avifCompat = Buffer.concat([
    Buffer.from([0, 0, 0, 0x18]),
    Buffer.from('ftypmif1'),
    Buffer.from([0, 0, 0, 0]),
    Buffer.from('miafavif'),
    Buffer.alloc(40),
  ])
  t.equal((await upload(app, tenant.headers, { type: 'image/avif', bytes: avifCompat })).put.statusCode, 200)
  const heic = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypheic'), Buffer.from([0, 0, 0, 0]), Buffer.from('mif1heic'), Buffer.alloc(40)])
  t.equal((await upload(app, tenant.headers, { type: 'image/avif', bytes: heic })).put.statusCode, 400, 'HEIC is not AVIF')
  t.equal((await upload(app, tenant.headers, { type: 'image/png', bytes: Buffer.from([0x89, 0x50]) })).put.statusCode, 400, 'a truncated signature is refused')
})

t.test('PUT: failures mark the file failed, release the reservation once, and leave nothing on disk', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app, { quotaBytes: 10_000 })
  const start = async (declared?: number) =>
    (
      await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', ...(declared === undefined ? {} : { fileSizeBytes: declared }) })
    ).json() as Handshake
  const cases: { name: string; declared?: number; headers?: Record<string, string>; body: Buffer; status: number; code: string }[] = [
    {
      name: 'wrong Content-Type',
      declared: 1000,
      headers: { 'content-type': 'image/jpeg' },
      body: fileBytes('image/png', 100),
      status: 400,
      code: 'INVALID_FILE_TYPE',
    },
    {
      name: 'text/html Content-Type',
      declared: 1000,
      headers: { 'content-type': 'text/html' },
      body: fileBytes('image/png', 100),
      status: 400,
      code: 'INVALID_FILE_TYPE',
    },
    { name: 'bytes of another type', declared: 1000, body: fileBytes('application/pdf', 100), status: 400, code: 'INVALID_FILE_TYPE' },
    { name: 'empty body', declared: 1000, body: Buffer.alloc(0), status: 400, code: 'VALIDATION_ERROR' },
    { name: 'over the declared size', declared: 1000, body: fileBytes('image/png', 1001), status: 413, code: 'FILE_TOO_LARGE' },
    { name: 'undeclared and over the remaining quota', body: fileBytes('image/png', 10_001), status: 403, code: 'QUOTA_EXCEEDED' },
  ]
  for (const c of cases) {
    const h = await start(c.declared)
    const res = await app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png', ...c.headers }, payload: c.body })
    t.equal(res.statusCode, c.status, c.name)
    t.equal(res.json().error.code, c.code, c.name)
    t.same(
      await statusOf(app, tenant.headers, h.fileId),
      { ...(await statusOf(app, tenant.headers, h.fileId)), processingStatus: 'failed', sizeBytes: 0 },
      c.name,
    )
    t.equal((await quotaOf(app, tenant.headers)).usedBytes, 0, `${c.name}: reservation released`)
    const again = await app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png' }, payload: fileBytes('image/png', 10) })
    t.equal(again.statusCode, 409, `${c.name}: a failed upload takes no second PUT`)
  }
  t.same(filesIn(core.dataDir.tmp), [], 'no temp files')
  t.same(await storedBlobs(core), [], 'no blobs')
  const counts = core.db.pluck('SELECT used_bytes FROM tenants WHERE id = ?').get(tenant.id)
  t.equal(counts, 0, 'released exactly once: never negative, never double')
  const tooBigDetails = await (async () => {
    const h = await start(1000)
    return (await app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png' }, payload: fileBytes('image/png', 1001) })).json()
      .error.details
  })()
  t.same(tooBigDetails, { fileSize: 1001, maxSize: 1000 })
})

t.test('PUT: an expired upload URL → 401 (tampering: security.test.ts)', async (t) => {
  const { app, clock } = await makeApp(t)
  const tenant = await createTenant(app)
  const a = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png' })).json() as Handshake
  const body = fileBytes('image/png', 100)
  clock.advance(15 * 60_000)
  const expired = await app.inject({ method: 'PUT', url: a.presignedUrl, headers: { 'content-type': 'image/png' }, payload: body })
  t.equal(expired.statusCode, 401)
  t.match(expired.json().error.message, /expired/)
})

t.test('PUT after the file was deleted → 404', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app, { quotaBytes: 5000 })
  const h = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: 5000 })).json() as Handshake
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/files/${h.fileId}`, headers: tenant.headers })).statusCode, 200)
  t.equal((await quotaOf(app, tenant.headers)).usedBytes, 0, 'deleting a pending upload releases its reservation')
  const res = await app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png' }, payload: fileBytes('image/png', 100) })
  t.equal(res.statusCode, 404)
  t.equal(res.json().error.code, 'FILE_NOT_FOUND')
})

t.test('a file deleted while its body streams is not resurrected, and its blob is not kept', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app)
  const h = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png' })).json() as Handshake
  const body = new PassThrough()
  const pending = app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png' }, payload: body })
  body.write(fileBytes('image/png', 1000))
  await receivedAtLeast(core.dataDir.tmp, 1000)
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/files/${h.fileId}`, headers: tenant.headers })).statusCode, 200)
  body.end(fileBytes('image/png', 1000, 2))
  const res = await pending
  t.equal(res.statusCode, 404)
  t.same(await storedBlobs(core), [], 'the placed blob was removed again')
  t.same(filesIn(core.dataDir.tmp), [])
  t.equal((await quotaOf(app, tenant.headers)).usedBytes, 0)
})

t.test('a second PUT while the first is streaming → 409', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app)
  const h = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png' })).json() as Handshake
  const body = new PassThrough()
  const first = app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png' }, payload: body })
  body.write(fileBytes('image/png', 1000))
  await receivedAtLeast(core.dataDir.tmp, 1000)
  const second = await app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': 'image/png' }, payload: fileBytes('image/png', 10) })
  t.equal(second.statusCode, 409)
  body.end()
  t.equal((await first).statusCode, 200)
})

t.test('abandoned uploads are swept to failed after expiry plus grace; streaming ones are spared', async (t) => {
  const { app, core, clock } = await makeApp(t)
  const tenant = await createTenant(app)
  const abandoned = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: 700 })).json() as Handshake
  const streaming = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'b.png', fileSizeBytes: 300 })).json() as Handshake
  const body = new PassThrough()
  const put = app.inject({ method: 'PUT', url: streaming.presignedUrl, headers: { 'content-type': 'image/png' }, payload: body })
  body.write(fileBytes('image/png', 100))
  await receivedAtLeast(core.dataDir.tmp, 100)
  clock.advance(15 * 60_000 + SWEEP_GRACE_MS - 1)
  t.equal(core.uploads.sweepExpired(), 0, 'not before expiry + grace')
  clock.advance(2)
  t.equal(core.uploads.sweepExpired(), 1, 'only the abandoned upload is swept')
  t.same((await statusOf(app, tenant.headers, abandoned.fileId)).processingStatus, 'failed')
  t.equal((await quotaOf(app, tenant.headers)).usedBytes, 300, 'its reservation is released; the streaming one still holds')
  t.equal(core.uploads.sweepExpired(), 0, 'sweeping again changes nothing')
  body.end()
  t.equal((await put).statusCode, 200, 'the upload that started in time completes')
  t.equal((await quotaOf(app, tenant.headers)).usedBytes, 100)
})

t.test(
  'a small upload is kept inline in the database: no blob file, no staging file; served with Range and conditional requests',
  { skip: diskOnly('inline blobs are a disk-store optimisation') },
  async (t) => {
    const { app, core } = await makeApp(t)
    const tenant = await createTenant(app)
    const bytes = fileBytes('image/png', 4096, 7)
    const { put, fileId } = await upload(app, tenant.headers, { bytes })
    t.equal(put.statusCode, 200)
    const sha = put.json().sha256 ?? (core.db.pluck('SELECT sha256 FROM files WHERE id = ?').get(fileId) as string)
    const row = core.db.pluck('SELECT content FROM blob_inline WHERE sha256 = ?').get(sha) as Buffer | undefined
    t.ok(row?.equals(bytes), 'the content is a blob_inline row')
    const blobFiles = fs.readdirSync(core.dataDir.blobs, { recursive: true }).filter((p) => /[0-9a-f]{64}$/.test(String(p)))
    t.same(blobFiles, [], 'no blob file')
    t.same(fs.readdirSync(core.dataDir.tmp), [], 'no staging file left')
    const whole = await app.inject({ url: `/api/v1/files/${fileId}/download`, headers: tenant.headers })
    t.equal(whole.statusCode, 200)
    t.ok(whole.rawPayload.equals(bytes))
    const range = await app.inject({ url: `/api/v1/files/${fileId}/download`, headers: { ...tenant.headers, range: 'bytes=100-199' } })
    t.equal(range.statusCode, 206)
    t.equal(range.headers['content-range'], `bytes 100-199/${bytes.length}`)
    t.ok(range.rawPayload.equals(bytes.subarray(100, 200)))
    const again = await app.inject({ url: `/api/v1/files/${fileId}/download`, headers: { ...tenant.headers, 'if-none-match': String(whole.headers.etag) } })
    t.equal(again.statusCode, 304)
    // The same content again, from another tenant: stored once.
    const other = await createTenant(app)
    t.equal((await upload(app, other.headers, { bytes })).put.statusCode, 200)
    t.equal(core.db.pluck('SELECT count(*) FROM blob_inline').get(), 1, 'identical content is stored once')
    t.same(await storedBlobs(core), [sha])
  },
)
