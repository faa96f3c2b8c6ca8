// @suites: pg s3
// Conditional writes (If-Match / If-None-Match) through the AWS SDK for JavaScript v3 at its
// default settings (CRC32 checksums, aws-chunked trailers, lib-storage's Upload): PutObject and
// CompleteMultipartUpload as AWS answers them, with versioning off and on, and two writers racing
// on one key, of whom exactly one may win. Runs on both databases (COFFER_TEST_DATABASE=postgres).
import { Readable } from 'node:stream'
import { crc32 } from 'node:zlib'
import t from 'tap'
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { bodyOf, makeS3, pattern, s3Error } from './s3-helper'

const MiB = 1024 * 1024
const crc32Of = (b: Buffer) => {
  const out = Buffer.alloc(4)
  out.writeUInt32BE(crc32(b))
  return out.toString('base64')
}

/** A one-part multipart upload of `body` with CRC32 checksums (as lib-storage's Upload makes one at its defaults), ready to complete. */
async function prepared(client: S3Client, bucket: string, key: string, body: Buffer) {
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: 'CRC32' }))
  const part = await client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: body }))
  return (c: { IfMatch?: string; IfNoneMatch?: string } = {}) =>
    client.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag, ...(part.ChecksumCRC32 ? { ChecksumCRC32: part.ChecksumCRC32 } : {}) }] },
        ...c,
      }),
    )
}

for (const versioning of [false, true]) {
  t.test(`CompleteMultipartUpload with If-None-Match / If-Match, as PutObject's${versioning ? ', versioning on' : ''}`, async (t) => {
    const { client } = await makeS3(t)
    const bucket = 'cond-complete'
    await client.send(new CreateBucketCommand({ Bucket: bucket }))
    if (versioning) await client.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }))
    const key = 'obj'
    const complete = (body: string, c: { IfMatch?: string; IfNoneMatch?: string } = {}) => prepared(client, bucket, key, Buffer.from(body)).then((f) => f(c))

    // No object: If-Match (any tag, `*` too) is 404 NoSuchKey, as AWS; If-None-Match: * creates it.
    t.same(await s3Error(complete('a', { IfMatch: '*' })), { name: 'NoSuchKey', status: 404 })
    t.same(await s3Error(complete('a', { IfMatch: '"0123"' })), { name: 'NoSuchKey', status: 404 })
    const first = await complete('first', { IfNoneMatch: '*' })
    t.match(first.ETag, /^"[0-9a-f]{32}-1"$/)
    t.equal(first.ChecksumType, 'COMPOSITE', 'CRC32 parts make a composite checksum')
    t.ok(first.ChecksumCRC32)

    // An object: If-None-Match: * is 412; If-Match needs its ETag (with or without quotes).
    t.same(await s3Error(complete('b', { IfNoneMatch: '*' })), { name: 'PreconditionFailed', status: 412 })
    t.same(await s3Error(complete('b', { IfMatch: '"0123"' })), { name: 'PreconditionFailed', status: 412 })
    t.same(await s3Error(complete('b', { IfMatch: first.ETag!, IfNoneMatch: '*' })), { name: 'NotImplemented', status: 501 }, 'both headers: 501, as AWS')
    t.equal((await bodyOf(client.send(new GetObjectCommand({ Bucket: bucket, Key: key })))).toString(), 'first', 'no failed Complete replaced it')
    const second = await complete('second', { IfMatch: first.ETag!.replace(/"/g, '') })
    t.not(second.ETag, first.ETag)
    t.same(await s3Error(complete('c', { IfMatch: first.ETag! })), { name: 'PreconditionFailed', status: 412 }, 'the replaced ETag no longer matches')
    const third = await complete('third', { IfMatch: '*' })
    t.equal((await bodyOf(client.send(new GetObjectCommand({ Bucket: bucket, Key: key })))).toString(), 'third')

    // A failed condition leaves the upload in progress: it completes once the condition holds.
    const later = await prepared(client, bucket, key, Buffer.from('later'))
    t.same(await s3Error(later({ IfMatch: second.ETag! })), { name: 'PreconditionFailed', status: 412 })
    t.equal((await later({ IfMatch: third.ETag! })).$metadata.httpStatusCode, 200)

    // Deleted: with versioning on, a delete marker is current, which is no object either.
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }))
    t.same(await s3Error(complete('d', { IfMatch: '*' })), { name: 'NoSuchKey', status: 404 })
    const back = await complete('back', { IfNoneMatch: '*' })
    t.equal((await bodyOf(client.send(new GetObjectCommand({ Bucket: bucket, Key: key })))).toString(), 'back')
    const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }))
    t.equal(head.ETag, back.ETag)
    t.equal(head.ChecksumCRC32, back.ChecksumCRC32, 'HeadObject answers the stored checksum')
    t.equal(head.ChecksumType, 'COMPOSITE')
    const versions = await client.send(new ListObjectVersionsCommand({ Bucket: bucket }))
    // Versioning on: first, second, third, later, the marker, back. Off: back alone.
    t.equal(
      (versions.Versions ?? []).length + (versions.DeleteMarkers ?? []).length,
      versioning ? 6 : 1,
      'each successful Complete wrote one version, no failed one did',
    )
  })
}

t.test('two writers race with one condition, many rounds: exactly one wins, the other gets 412', async (t) => {
  const { client } = await makeS3(t)
  const bucket = 'cond-race'
  await client.send(new CreateBucketCommand({ Bucket: bucket }))
  const outcome = async (p: Promise<{ ETag?: string }>) => {
    try {
      return { ok: (await p).ETag! }
    } catch (err) {
      const e = err as { name: string; $metadata?: { httpStatusCode?: number } }
      return { failed: `${e.$metadata?.httpStatusCode} ${e.name}` }
    }
  }
  const oneWinner = async (round: string, key: string, a: Promise<{ ETag?: string }>, b: Promise<{ ETag?: string }>, bodies: [string, string]) => {
    const both = await Promise.all([outcome(a), outcome(b)])
    const won = both.flatMap((o, i) => ('ok' in o ? [i] : []))
    const lost = both.flatMap((o) => ('failed' in o ? [o.failed] : []))
    t.same({ won: won.length, lost }, { won: 1, lost: ['412 PreconditionFailed'] }, round)
    const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))
    t.equal(got.ETag, (both[won[0]!] as { ok: string }).ok, `${round}: the object is the winner's`)
    t.equal(await got.Body!.transformToString(), bodies[won[0]!], `${round}: the winner's bytes`)
    return got.ETag!
  }
  for (let round = 1; round <= 12; round++) {
    const key = `k${round}`
    const put = (body: string, c: { IfMatch?: string; IfNoneMatch?: string }) =>
      client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ...c }))
    // Create-only: both find no object before either commits.
    let etag = await oneWinner(`round ${round}: PutObject If-None-Match: *`, key, put('a', { IfNoneMatch: '*' }), put('b', { IfNoneMatch: '*' }), ['a', 'b'])
    // Compare-and-swap: both hold the current ETag.
    etag = await oneWinner(`round ${round}: PutObject If-Match`, key, put('c', { IfMatch: etag }), put('d', { IfMatch: etag }), ['c', 'd'])
    // The same through CompleteMultipartUpload, and one of each kind.
    const [e, f] = await Promise.all([prepared(client, bucket, key, Buffer.from('e')), prepared(client, bucket, key, Buffer.from('f'))])
    etag = await oneWinner(`round ${round}: Complete If-Match`, key, e({ IfMatch: etag }), f({ IfMatch: etag }), ['e', 'f'])
    const g = await prepared(client, bucket, key, Buffer.from('g'))
    await oneWinner(`round ${round}: Complete against PutObject, If-Match`, key, g({ IfMatch: etag }), put('h', { IfMatch: etag }), ['g', 'h'])
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }))
    const [i, j] = await Promise.all([prepared(client, bucket, key, Buffer.from('i')), prepared(client, bucket, key, Buffer.from('j'))])
    await oneWinner(`round ${round}: Complete If-None-Match: *`, key, i({ IfNoneMatch: '*' }), j({ IfNoneMatch: '*' }), ['i', 'j'])
  }
})

t.test("the SDK's default checksums: PutObject and lib-storage's Upload, read back with ChecksumMode ENABLED", async (t) => {
  const { client } = await makeS3(t)
  const bucket = 'sums-default'
  await client.send(new CreateBucketCommand({ Bucket: bucket }))
  // PutObject of a stream: aws-chunked with a CRC32 trailer, the SDK's default; conditional too.
  const small = pattern(300_000, 5)
  const put = await client.send(
    new PutObjectCommand({ Bucket: bucket, Key: 'one', Body: Readable.from([small]), ContentLength: small.length, IfNoneMatch: '*' }),
  )
  t.equal(put.ChecksumCRC32, crc32Of(small))
  const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: 'one', ChecksumMode: 'ENABLED' }))
  t.same([head.ChecksumCRC32, head.ChecksumType], [crc32Of(small), 'FULL_OBJECT'])
  const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'one', ChecksumMode: 'ENABLED' }))
  t.same(Buffer.from(await got.Body!.transformToByteArray()), small, 'the SDK validated the body against the checksum')
  t.same([got.ChecksumCRC32, got.ChecksumType], [crc32Of(small), 'FULL_OBJECT'])

  // lib-storage's Upload at its defaults: three parts, each with a CRC32; completed with If-None-Match.
  const big = pattern(11 * MiB, 6)
  const upload = new Upload({
    client,
    params: { Bucket: bucket, Key: 'many', Body: Readable.from([big.subarray(0, 6 * MiB), big.subarray(6 * MiB)]), IfNoneMatch: '*' },
  })
  const done = await upload.done()
  t.match(done.ETag, /-3"$/)
  const mhead = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: 'many', ChecksumMode: 'ENABLED' }))
  t.equal(mhead.ContentLength, big.length)
  t.ok(mhead.ChecksumCRC32, 'the multipart object has its checksum')
  t.equal(mhead.ChecksumCRC32, done.ChecksumCRC32, 'the one Complete answered')
  const mget = await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'many', ChecksumMode: 'ENABLED' }))
  t.same(Buffer.from(await mget.Body!.transformToByteArray()), big)
  t.equal(mget.ChecksumType, mhead.ChecksumType)
  // The same upload again is refused by its condition, and the object stays.
  const again = new Upload({ client, params: { Bucket: bucket, Key: 'many', Body: Readable.from([pattern(6 * MiB, 7)]), IfNoneMatch: '*' } })
  t.same(await s3Error(again.done()), { name: 'PreconditionFailed', status: 412 })
  t.equal((await client.send(new HeadObjectCommand({ Bucket: bucket, Key: 'many' }))).ETag, done.ETag)
})
