// @suites: pg-all
// The S3 front releases the content of multipart parts it no longer needs, on the disk store and
// on the S3 blob store (the Ceph gateway), where release goes through tombstones: a replaced part,
// an aborted upload, an upload past its TTL, a deleted bucket. And on an S3 blob store that is
// down, S3 writes and reads answer 503 ServiceUnavailable with Retry-After, storing nothing.
import t, { type Test } from 'tap'
import net from 'node:net'
import { createHash } from 'node:crypto'
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { BlobLeasesRepo } from '../src/db/repos/blob-leases'
import { storedBlobs } from './helper'
import { makeS3, pattern, signedRequest } from './s3-helper'
import { fixtureEnv } from './s3/fixture'

t.setTimeout(180_000)

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

async function usedBytes(ctx: Awaited<ReturnType<typeof makeS3>>): Promise<number> {
  return (await ctx.app.inject({ url: '/api/v1/tenant/quota', headers: ctx.tenant.headers })).json().usedBytes as number
}

function releases(store: 'disk' | 's3'): void {
  t.test(`${store} store: a replaced part, an aborted upload and a deleted bucket leave nothing stored`, async (t: Test) => {
    const ctx = await makeS3(t, {}, { store })
    await ctx.client.send(new CreateBucketCommand({ Bucket: 'parts' }))
    const [a, b, c] = [pattern(20_000, 81), pattern(30_000, 82), pattern(40_000, 83)]
    const { UploadId } = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'parts', Key: 'k' }))
    await ctx.client.send(new UploadPartCommand({ Bucket: 'parts', Key: 'k', UploadId, PartNumber: 1, Body: a }))
    t.same(await storedBlobs(ctx.core), [sha(a)], 'the part is stored before it is acknowledged')
    await ctx.client.send(new UploadPartCommand({ Bucket: 'parts', Key: 'k', UploadId, PartNumber: 1, Body: b }))
    t.same(await storedBlobs(ctx.core), [sha(b)], 'the replaced part’s content is deleted')
    t.equal(await usedBytes(ctx), b.length)
    await ctx.client.send(new AbortMultipartUploadCommand({ Bucket: 'parts', Key: 'k', UploadId }))
    t.same(await storedBlobs(ctx.core), [], 'an aborted upload’s parts are deleted')
    t.equal(await usedBytes(ctx), 0)
    // A bucket deleted with an upload in progress takes its parts along.
    const second = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'parts', Key: 'k2' }))
    await ctx.client.send(new UploadPartCommand({ Bucket: 'parts', Key: 'k2', UploadId: second.UploadId, PartNumber: 1, Body: c }))
    await ctx.client.send(new DeleteBucketCommand({ Bucket: 'parts' }))
    t.same(await storedBlobs(ctx.core), [], 'a deleted bucket’s parts are deleted')
    t.equal(new BlobLeasesRepo(ctx.core.db).count(), 0, 'no tombstone is left')
    t.equal(ctx.core.db.pluck('SELECT count(*) FROM blob_leases').get(), 0, 'no lease is left')
  })

  t.test(`${store} store: an upload past its TTL is reclaimed and its parts' content deleted by the next collection`, async (t: Test) => {
    const ctx = await makeS3(t, {}, { store })
    await ctx.client.send(new CreateBucketCommand({ Bucket: 'ttl' }))
    const part = pattern(25_000, 84)
    const { UploadId } = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'ttl', Key: 'k' }))
    await ctx.client.send(new UploadPartCommand({ Bucket: 'ttl', Key: 'k', UploadId, PartNumber: 1, Body: part }))
    // A collection keeps a live upload's parts.
    t.match(await ctx.core.gc.collect(true), { blobsRemoved: 0 })
    t.same(await storedBlobs(ctx.core), [sha(part)])
    ctx.clock.advance(8 * 24 * 3600_000)
    t.equal(ctx.core.s3.multipart.reclaim(), 1)
    ctx.clock.set(Date.now())
    t.equal(await usedBytes(ctx), 0, 'its bytes are released at once')
    await ctx.core.gc.collect()
    t.same(await storedBlobs(ctx.core), [], 'its content is gone after the next collection')
    t.equal(new BlobLeasesRepo(ctx.core.db).count(), 0, 'no tombstone is left')
  })
}

async function closedPort(): Promise<number> {
  const srv = net.createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const port = (srv.address() as net.AddressInfo).port
  await new Promise((r) => srv.close(r))
  return port
}

releases('disk')
const fixture = fixtureEnv()
if ('unavailable' in fixture) {
  if (process.env.CI === 'true') t.fail(`the Ceph fixture is required in CI: ${fixture.unavailable}`)
  else t.test('the same on the S3 blob store', { skip: `needs the Ceph fixture (scripts/ceph-fixture.sh): ${fixture.unavailable}` }, () => {})
} else {
  releases('s3')

  t.test('s3 store down: PutObject, UploadPart and GetObject answer 503 ServiceUnavailable with Retry-After; nothing is stored', async (t) => {
    // An object stored while the store was up; then the same data dir with the store unreachable.
    const up = await makeS3(t, {}, { store: 's3' })
    await up.client.send(new CreateBucketCommand({ Bucket: 'down' }))
    await up.client.send(new PutObjectCommand({ Bucket: 'down', Key: 'stored', Body: pattern(5_000, 86) }))
    await up.close()
    const storeEnv = { ...up.storeEnv, COFFER_BLOB_S3_ENDPOINT: `http://127.0.0.1:${await closedPort()}`, COFFER_BLOB_S3_TIMEOUT_SECONDS: '2' }
    const ctx = await makeS3(t, {}, { dir: up.dir, storeEnv, existing: { ...up.tenant, credentials: up.credentials } })
    const usedBefore = await usedBytes(ctx)
    const body = pattern(10_000, 85)
    const started = Date.now()
    const put = await ctx.s3app.inject(await signedRequest(ctx, { method: 'PUT', path: '/down/obj', payload: body }))
    t.equal(put.statusCode, 503)
    t.equal(put.headers['retry-after'], '5')
    t.match(put.body, /<Code>ServiceUnavailable<\/Code>/)
    t.ok(Date.now() - started < 10_000, 'answered within the timeout, not hung')
    const { UploadId } = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'down', Key: 'mp' }))
    const part = await ctx.s3app.inject(
      await signedRequest(ctx, { method: 'PUT', path: '/down/mp', query: { partNumber: '1', uploadId: UploadId! }, payload: body }),
    )
    t.equal(part.statusCode, 503)
    t.equal(part.headers['retry-after'], '5')
    t.equal(await usedBytes(ctx), usedBefore, 'nothing more is charged')
    const list = await ctx.s3app.inject(await signedRequest(ctx, { method: 'GET', path: '/down', query: { 'list-type': '2' } }))
    t.match(list.body, /<Key>stored<\/Key>/)
    t.notMatch(list.body, /<Key>obj<\/Key>/, 'no object was made')
    const parts = await ctx.s3app.inject(await signedRequest(ctx, { method: 'GET', path: '/down/mp', query: { uploadId: UploadId! } }))
    t.notMatch(parts.body, /<Part>/, 'no part was recorded')
    const get = await ctx.s3app.inject(await signedRequest(ctx, { method: 'GET', path: '/down/stored' }))
    t.equal(get.statusCode, 503, 'a read of stored content is 503 too, not 500')
    t.equal(get.headers['retry-after'], '5')
    t.match(get.body, /<Code>ServiceUnavailable<\/Code>/)
  })
}
