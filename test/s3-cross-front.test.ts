// @suites: pg s3
// One storage, two fronts: what one writes the other lists, reads and deletes, with usage exact
// at workspace and tenant level.
import { createHash } from 'node:crypto'
import http from 'node:http'
import t from 'tap'
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3'
import { fileBytes, measuringStore, upload } from './helper'
import { completeCommand, createTenantWithS3, makeS3, pattern, s3Client, type S3Context, signedRequest } from './s3-helper'

async function usage(ctx: S3Context, workspaceId: string) {
  const quota = await ctx.app.inject({ method: 'GET', url: '/api/v1/tenant/quota', headers: ctx.tenant.headers })
  const ws = await ctx.app.inject({ method: 'GET', url: `/api/v1/workspaces/${workspaceId}`, headers: ctx.tenant.headers })
  return { tenant: quota.json().usedBytes as number, workspace: ws.json().usedBytes as number }
}

async function workspaceId(ctx: S3Context, slug: string): Promise<string> {
  const res = await ctx.app.inject({ method: 'GET', url: '/api/v1/workspaces', headers: ctx.tenant.headers })
  return (res.json().workspaces as { id: string; slug: string }[]).find((w) => w.slug === slug)!.id
}

t.test('an S3 bucket is a workspace; an API workspace is a bucket', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'from-s3' }))
  const created = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/workspaces',
    headers: ctx.tenant.headers,
    payload: { name: 'From the API', slug: 'from-api' },
  })
  t.equal(created.statusCode, 201)
  const res = await ctx.app.inject({ method: 'GET', url: '/api/v1/workspaces', headers: ctx.tenant.headers })
  t.same(
    res
      .json()
      .workspaces.map((w: { slug: string }) => w.slug)
      .sort(),
    ['from-api', 'from-s3'],
  )
  const buckets = await ctx.client.send(new ListBucketsCommand({}))
  t.same(
    buckets.Buckets?.map((b) => b.Name),
    ['from-api', 'from-s3'],
  )
})

t.test('objects written through S3 are listed, downloaded and deleted through the API', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'shared' }))
  const wsId = await workspaceId(ctx, 'shared')
  const body = pattern(70_000, 7)
  await ctx.client.send(new PutObjectCommand({ Bucket: 'shared', Key: 'reports/2026/q1.csv', Body: body, ContentType: 'text/csv' }))
  t.same(await usage(ctx, wsId), { tenant: body.length, workspace: body.length })

  const list = await ctx.app.inject({ method: 'GET', url: `/api/v1/files?workspaceId=${wsId}`, headers: ctx.tenant.headers })
  t.equal(list.statusCode, 200)
  const files = list.json().files as { id: string; originalName: string; fileType: string; sizeBytes: number; processingStatus: string }[]
  t.equal(files.length, 1)
  t.match(files[0], { originalName: 'q1.csv', fileType: 'text/csv', sizeBytes: body.length, processingStatus: 'completed' })
  const dl = await ctx.app.inject({ method: 'GET', url: `/api/v1/files/${files[0]!.id}/download`, headers: ctx.tenant.headers })
  t.equal(dl.statusCode, 200)
  t.ok(dl.rawPayload.equals(body), 'the API serves the bytes S3 wrote')

  // Replacing through S3 swaps the file atomically: one file, the new size charged.
  const smaller = pattern(1000, 8)
  await ctx.client.send(new PutObjectCommand({ Bucket: 'shared', Key: 'reports/2026/q1.csv', Body: smaller }))
  const after = await ctx.app.inject({ method: 'GET', url: `/api/v1/files?workspaceId=${wsId}`, headers: ctx.tenant.headers })
  t.equal(after.json().files.length, 1)
  t.equal(after.json().total, 1)
  t.same(await usage(ctx, wsId), { tenant: smaller.length, workspace: smaller.length })

  const del = await ctx.app.inject({ method: 'DELETE', url: `/api/v1/files/${after.json().files[0].id}`, headers: ctx.tenant.headers })
  t.equal(del.statusCode, 200)
  await t.rejects(ctx.client.send(new GetObjectCommand({ Bucket: 'shared', Key: 'reports/2026/q1.csv' })), { name: 'NoSuchKey' })
  t.same(await usage(ctx, wsId), { tenant: 0, workspace: 0 })
})

t.test('files uploaded through the API into a workspace are objects <fileId>/<fileName>', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'api-files' }))
  const wsId = await workspaceId(ctx, 'api-files')
  const bytes = fileBytes('image/png', 5000, 3)
  const up = await upload(ctx.app, ctx.tenant.headers, { bytes, name: 'cat photo.png', extra: { workspaceId: wsId } })
  t.equal(up.put.statusCode, 200)
  // A file outside any workspace is not visible over S3.
  await upload(ctx.app, ctx.tenant.headers, { bytes: fileBytes('image/png', 100, 4), name: 'loose.png' })

  const key = `${up.fileId}/cat photo.png`
  const list = await ctx.client.send(new ListObjectsV2Command({ Bucket: 'api-files' }))
  t.same(
    list.Contents?.map((o) => [o.Key, o.Size]),
    [[key, bytes.length]],
  )
  const sha = createHash('sha256').update(bytes).digest('hex')
  t.equal(list.Contents?.[0]?.ETag, `"${sha}"`, 'API uploads carry their content address as ETag')
  const got = await ctx.client.send(new GetObjectCommand({ Bucket: 'api-files', Key: key }))
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(bytes))
  t.equal(got.ContentType, 'image/png')
  t.equal(got.ETag, `"${sha}"`)

  t.same(await usage(ctx, wsId), { tenant: bytes.length + 100, workspace: bytes.length })
  await ctx.client.send(new DeleteObjectCommand({ Bucket: 'api-files', Key: key }))
  const file = await ctx.app.inject({ method: 'GET', url: `/api/v1/files/${up.fileId}`, headers: ctx.tenant.headers })
  t.equal(file.statusCode, 404, 'deleted through S3, gone from the API')
  t.same(await usage(ctx, wsId), { tenant: 100, workspace: 0 })
})

t.test('quotas: S3 writes refused at the workspace and tenant limits; multipart parts count', async (t) => {
  const ctx = await makeS3(t, {}, { quotaBytes: 6 * 1024 * 1024 })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'quota' }))
  const wsId = await workspaceId(ctx, 'quota')
  const patch = await ctx.app.inject({ method: 'PATCH', url: `/api/v1/workspaces/${wsId}`, headers: ctx.tenant.headers, payload: { quotaBytes: 10_000 } })
  t.equal(patch.statusCode, 200)
  await ctx.client.send(new PutObjectCommand({ Bucket: 'quota', Key: 'fits', Body: pattern(6_000) }))
  await t.rejects(ctx.client.send(new PutObjectCommand({ Bucket: 'quota', Key: 'too-much', Body: pattern(5_000) })), {
    name: 'QuotaExceeded',
    $metadata: { httpStatusCode: 403 },
  })
  // Replacing a key counts the bytes it frees.
  await ctx.client.send(new PutObjectCommand({ Bucket: 'quota', Key: 'fits', Body: pattern(9_000) }))
  t.same(await usage(ctx, wsId), { tenant: 9_000, workspace: 9_000 })

  await ctx.app.inject({ method: 'PATCH', url: `/api/v1/workspaces/${wsId}`, headers: ctx.tenant.headers, payload: { quotaBytes: null } })
  const { UploadId } = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'quota', Key: 'mp' }))
  await ctx.client.send(new UploadPartCommand({ Bucket: 'quota', Key: 'mp', UploadId, PartNumber: 1, Body: pattern(5 * 1024 * 1024) }))
  t.same(await usage(ctx, wsId), { tenant: 9_000 + 5 * 1024 * 1024, workspace: 9_000 + 5 * 1024 * 1024 }, 'parts are reserved')
  // The parts' reservation counts against API uploads too.
  const api = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/upload/request',
    headers: ctx.tenant.headers,
    payload: { fileType: 'image/png', fileName: 'x.png', fileSizeBytes: 1024 * 1024 },
  })
  t.equal(api.statusCode, 403)
  t.equal(api.json().error.code, 'QUOTA_EXCEEDED')

  // TTL reclaim releases the parts.
  ctx.clock.advance(8 * 24 * 3600_000)
  t.equal(ctx.core.s3.multipart.reclaim(), 1)
  ctx.clock.set(Date.now())
  t.same(await usage(ctx, wsId), { tenant: 9_000, workspace: 9_000 })
})

t.test('multipart parts survive a restart and a full garbage collection, then complete', async (t) => {
  const first = await makeS3(t)
  await first.client.send(new CreateBucketCommand({ Bucket: 'durable' }))
  const p1 = pattern(5 * 1024 * 1024, 51)
  const p2 = pattern(777, 52)
  const { UploadId } = await first.client.send(new CreateMultipartUploadCommand({ Bucket: 'durable', Key: 'resumed.bin' }))
  const e1 = await first.client.send(new UploadPartCommand({ Bucket: 'durable', Key: 'resumed.bin', UploadId, PartNumber: 1, Body: p1 }))
  await first.close()

  const second = await makeS3(t, {}, { dir: first.dir, storeEnv: first.storeEnv, existing: { ...first.tenant, credentials: first.credentials } })
  const gc = await second.core.gc.collect(true)
  t.equal(gc.blobsRemoved, 0, 'a full collection keeps the blobs of parts')
  const e2 = await second.client.send(new UploadPartCommand({ Bucket: 'durable', Key: 'resumed.bin', UploadId, PartNumber: 2, Body: p2 }))
  await second.client.send(
    completeCommand('durable', 'resumed.bin', UploadId, [
      [1, e1.ETag],
      [2, e2.ETag],
    ]),
  )
  const got = await second.client.send(new GetObjectCommand({ Bucket: 'durable', Key: 'resumed.bin' }))
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat([p1, p2])))
  const wsId = await workspaceId(second, 'durable')
  t.same(await usage(second, wsId), { tenant: p1.length + p2.length, workspace: p1.length + p2.length })
  // The parts' own blobs are gone once the object holds the content.
  const blobs = second.core.db.pluck('SELECT count(*) FROM blobs').get()
  t.equal(blobs, 1, 'only the assembled object remains stored')
})

t.test('deleting a workspace through the API releases the parts of its uploads at the next reclaim', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'doomed' }))
  const wsId = await workspaceId(ctx, 'doomed')
  const { UploadId } = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'doomed', Key: 'k' }))
  await ctx.client.send(new UploadPartCommand({ Bucket: 'doomed', Key: 'k', UploadId, PartNumber: 1, Body: pattern(4096) }))
  t.equal(ctx.core.tenants.quota(ctx.tenant.id).usedBytes, 4096)
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${wsId}`, headers: ctx.tenant.headers })).statusCode, 200)
  t.equal(ctx.core.s3.multipart.reclaim(), 1)
  t.equal(ctx.core.tenants.quota(ctx.tenant.id).usedBytes, 0)
})

t.test('UploadPartCopy charges the copied bytes while it stages them: concurrent copies stage at most the free room', async (t) => {
  const MB = 1024 * 1024
  const { seen, wrap } = measuringStore()
  const ctx = await makeS3(t, {}, { quotaBytes: 6 * MB, wrapStore: wrap })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'copies' }))
  await ctx.client.send(new PutObjectCommand({ Bucket: 'copies', Key: 'source', Body: pattern(3 * MB) }))
  seen.max = 0
  const { UploadId } = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'copies', Key: 'assembled' }))
  const copies = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) =>
      ctx.client.send(new UploadPartCopyCommand({ Bucket: 'copies', Key: 'assembled', UploadId, PartNumber: i + 1, CopySource: 'copies/source' })),
    ),
  )
  // Copies interleave their reads, so the room may go to one of them or, refused chunk by chunk,
  // to none; never to two.
  const ok = copies.filter((c) => c.status === 'fulfilled').length
  t.ok(ok <= 1, `${ok} of 10 copies fit the 3 MiB left`)
  for (const c of copies) {
    if (c.status === 'rejected') t.match(c.reason, { name: 'QuotaExceeded', $metadata: { httpStatusCode: 403 } })
  }
  t.ok(seen.max <= 3 * MB, `at most the free room was staged at once (${seen.max} bytes)`)
  const wsId = await workspaceId(ctx, 'copies')
  t.same(await usage(ctx, wsId), { tenant: (3 + 3 * ok) * MB, workspace: (3 + 3 * ok) * MB }, 'usage is exact')
  // Nothing stays counted in flight: once the upload is aborted, one copy takes the whole room.
  await ctx.client.send(new AbortMultipartUploadCommand({ Bucket: 'copies', Key: 'assembled', UploadId }))
  const again = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'copies', Key: 'again' }))
  await ctx.client.send(new UploadPartCopyCommand({ Bucket: 'copies', Key: 'again', UploadId: again.UploadId, PartNumber: 1, CopySource: 'copies/source' }))
  t.same(await usage(ctx, wsId), { tenant: 6 * MB, workspace: 6 * MB })
})

t.test('concurrent S3 and API writes never pass the quota, and usage stays exact', async (t) => {
  const ctx = await makeS3(t, {}, { quotaBytes: 100_000 })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'race' }))
  const wsId = await workspaceId(ctx, 'race')
  const s3Writes = Array.from({ length: 12 }, (_, i) =>
    ctx.client.send(new PutObjectCommand({ Bucket: 'race', Key: `s3-${i}`, Body: pattern(10_000, i) })).then(
      () => 10_000,
      () => 0,
    ),
  )
  const apiWrites = Array.from({ length: 12 }, (_, i) =>
    upload(ctx.app, ctx.tenant.headers, { bytes: fileBytes('image/png', 10_000, i), declare: i % 2 === 0, extra: { workspaceId: wsId } }).then(
      (r) => (r.put.statusCode === 200 ? 10_000 : 0),
      () => 0,
    ),
  )
  const stored = (await Promise.all([...s3Writes, ...apiWrites])).reduce((a, b) => a + b, 0)
  t.ok(stored <= 100_000, `stored ${stored} of a 100000-byte quota`)
  t.ok(stored >= 80_000, 'and the quota was used')
  t.same(await usage(ctx, wsId), { tenant: stored, workspace: stored })
})

t.test('a PutObject of announced length holds all of it against the quota from before its first byte', async (t) => {
  const ctx = await makeS3(t, {}, { quotaBytes: 100_000 })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'held' }))
  const wsId = await workspaceId(ctx, 'held')
  const body = pattern(60_000)
  const signed = await signedRequest(ctx, { method: 'PUT', path: '/held/big', headers: { 'content-length': String(body.length), expect: '100-continue' } })
  const req = http.request(`${ctx.endpoint}/held/big`, { method: 'PUT', headers: signed.headers as http.OutgoingHttpHeaders })
  const answered = new Promise<http.IncomingMessage>((resolve, reject) => {
    req.once('response', resolve)
    req.once('error', reject)
  })
  req.flushHeaders()
  // 100 Continue comes once every check before the body has passed, the quota charge among them.
  await new Promise<void>((resolve) => req.once('continue', resolve))
  await t.rejects(
    ctx.client.send(new PutObjectCommand({ Bucket: 'held', Key: 'other', Body: pattern(50_000, 2) })),
    { name: 'QuotaExceeded' },
    'the 60,000 announced bytes are already held, though none has arrived',
  )
  req.end(body)
  const res = await answered
  res.resume()
  t.equal(res.statusCode, 200, 'the announced body is stored')
  t.same(await usage(ctx, wsId), { tenant: 60_000, workspace: 60_000 })
  await ctx.client.send(new PutObjectCommand({ Bucket: 'held', Key: 'rest', Body: pattern(40_000, 3) }))
  t.same(await usage(ctx, wsId), { tenant: 100_000, workspace: 100_000 }, 'nothing stays held once it is stored')
})

t.test('one rate budget per tenant whichever front: S3 answers 503 SlowDown in XML with Retry-After, the API 429', async (t) => {
  const ctx = await makeS3(t, { COFFER_RATE_LIMIT_MAX: '4', COFFER_RATE_LIMIT_WINDOW_SECONDS: '60' })
  const client = new S3Client({ endpoint: ctx.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: ctx.credentials, maxAttempts: 1 })
  t.teardown(() => client.destroy())
  const api = () => ctx.app.inject({ url: '/api/v1/tenant/quota', headers: ctx.tenant.headers })
  t.equal((await api()).statusCode, 200)
  t.equal((await api()).statusCode, 200)
  await client.send(new ListBucketsCommand({}))
  await client.send(new ListBucketsCommand({}))

  const limited = await ctx.s3app.inject(await signedRequest(ctx, { method: 'GET', path: '/' }))
  t.equal(limited.statusCode, 503, 'the S3 request after two API and two S3 requests is over the budget of 4')
  t.match(limited.headers['content-type'], /^application\/xml/)
  t.match(limited.body, /<Error><Code>SlowDown<\/Code><Message>Please reduce your request rate[^<]*<\/Message>.*<RequestId>[0-9A-F]{16}<\/RequestId><\/Error>/)
  const retryAfter = Number(limited.headers['retry-after'])
  t.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After: ${limited.headers['retry-after']}`)
  await t.rejects(client.send(new ListBucketsCommand({})), { name: 'SlowDown', $metadata: { httpStatusCode: 503 } }, 'the SDK reads it as SlowDown')
  const apiLimited = await api()
  t.equal(apiLimited.statusCode, 429, 'and the API counts the S3 requests too')
  t.equal(apiLimited.json().error.code, 'RATE_LIMITED')

  // Another tenant has its own budget, on both fronts.
  const other = await createTenantWithS3(ctx.app)
  const otherClient = s3Client(ctx.endpoint, other.credentials)
  t.teardown(() => otherClient.destroy())
  t.ok(await otherClient.send(new ListBucketsCommand({})))
  t.equal((await ctx.app.inject({ url: '/api/v1/tenant/quota', headers: other.headers })).statusCode, 200)
})
