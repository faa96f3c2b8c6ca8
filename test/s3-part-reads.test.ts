// @suites: pg s3
// Reads SDKs use on multipart objects (#24): GetObject/HeadObject with partNumber, the checksums
// of multipart uploads (ChecksumAlgorithm on create, per part, COMPOSITE on complete), and
// GetObjectAttributes; through @aws-sdk/client-s3 and lib-storage with their response checks on.
import { createHash } from 'node:crypto'
import { crc32 } from 'node:zlib'
import t from 'tap'
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { completeCommand, makeS3, pattern, signedRequest, s3Error } from './s3-helper'
import { crc32c } from '../src/lib/crc32c'
import { fullObjectCrc } from '../src/s3/checksums'
import { Crc64Nvme } from '../src/lib/crc64nvme'
import { Crc64Nvme as SdkCrc64Nvme } from '@aws-sdk/checksums/crc'

const MiB = 1024 * 1024

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest()
const md5 = (b: Buffer) => createHash('md5').update(b).digest()
/** S3's COMPOSITE SHA-256, computed here independently of the server's code. */
const compositeSha256 = (parts: Buffer[]) =>
  `${createHash('sha256')
    .update(Buffer.concat(parts.map(sha256)))
    .digest('base64')}-${parts.length}`
const multipartEtag = (parts: Buffer[]) =>
  `"${createHash('md5')
    .update(Buffer.concat(parts.map(md5)))
    .digest('hex')}-${parts.length}"`

t.test('GetObject and HeadObject with partNumber: the bytes of that part, 206, the parts count and the whole ETag', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'parts' }))
  const parts = [pattern(5 * MiB, 1), pattern(5 * MiB, 2), pattern(MiB + 17, 3)]
  const whole = Buffer.concat(parts)
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'parts', Key: 'mp' }))
  const etags: [number, string | undefined][] = []
  for (const [i, body] of parts.entries()) {
    const r = await client.send(new UploadPartCommand({ Bucket: 'parts', Key: 'mp', UploadId, PartNumber: i + 1, Body: body }))
    etags.push([i + 1, r.ETag])
  }
  const done = await client.send(completeCommand('parts', 'mp', UploadId, etags))
  t.equal(done.ETag, multipartEtag(parts))

  let offset = 0
  for (const [i, body] of parts.entries()) {
    const get = await client.send(new GetObjectCommand({ Bucket: 'parts', Key: 'mp', PartNumber: i + 1 }))
    t.equal(get.$metadata.httpStatusCode, 206, `part ${i + 1}: 206`)
    t.equal(get.PartsCount, 3)
    t.equal(get.ETag, done.ETag, 'the ETag of the whole object')
    t.equal(get.ContentLength, body.length)
    t.equal(get.ContentRange, `bytes ${offset}-${offset + body.length - 1}/${whole.length}`)
    t.ok(Buffer.from(await get.Body!.transformToByteArray()).equals(body), `part ${i + 1}: its bytes`)
    const head = await client.send(new HeadObjectCommand({ Bucket: 'parts', Key: 'mp', PartNumber: i + 1 }))
    t.equal(head.$metadata.httpStatusCode, 206)
    t.equal(head.PartsCount, 3)
    t.equal(head.ContentLength, body.length)
    t.equal(head.ETag, done.ETag)
    offset += body.length
  }
  // Without partNumber, nothing changes: the whole object, 200, no parts count.
  const plain = await client.send(new GetObjectCommand({ Bucket: 'parts', Key: 'mp' }))
  t.equal(plain.$metadata.httpStatusCode, 200)
  t.equal(plain.PartsCount, undefined)
  t.ok(Buffer.from(await plain.Body!.transformToByteArray()).equals(whole))

  // A part the object does not have: InvalidPart (ceph/s3-tests, which also run against AWS).
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket: 'parts', Key: 'mp', PartNumber: 4 }))), { name: 'InvalidPart', status: 400 })
  // (A HEAD answer has no body: the SDK sees only the status.)
  t.equal((await s3Error(client.send(new HeadObjectCommand({ Bucket: 'parts', Key: 'mp', PartNumber: 4 })))).status, 400)
  // partNumber and Range together: refused, as AWS does.
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket: 'parts', Key: 'mp', PartNumber: 1, Range: 'bytes=0-9' }))), {
    name: 'InvalidRequest',
    status: 400,
  })
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket: 'parts', Key: 'mp', PartNumber: 10001 }))), { name: 'InvalidArgument', status: 400 })

  // A copy shares the content, the ETag and the parts count: and so the layout.
  await client.send(new CopyObjectCommand({ Bucket: 'parts', Key: 'copy', CopySource: 'parts/mp' }))
  const copied = await client.send(new GetObjectCommand({ Bucket: 'parts', Key: 'copy', PartNumber: 2 }))
  t.equal(copied.PartsCount, 3)
  t.ok(Buffer.from(await copied.Body!.transformToByteArray()).equals(parts[1]!))
})

t.test('partNumber on an object written in one piece: 1 is the whole object, 2 is InvalidPart', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'single' }))
  const put = await client.send(new PutObjectCommand({ Bucket: 'single', Key: 'k', Body: 'body' }))
  const get = await client.send(new GetObjectCommand({ Bucket: 'single', Key: 'k', PartNumber: 1 }))
  t.equal(get.$metadata.httpStatusCode, 206)
  t.equal(get.ETag, put.ETag)
  t.equal(get.ContentRange, 'bytes 0-3/4')
  t.equal(get.PartsCount, undefined, 'no parts count for an object that was not uploaded in parts')
  t.equal(await get.Body!.transformToString(), 'body')
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket: 'single', Key: 'k', PartNumber: 2 }))), { name: 'InvalidPart', status: 400 })
})

t.test('lib-storage Upload with ChecksumAlgorithm: part checksums, the COMPOSITE checksum, and reads that verify them', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'sums' }))
  const parts = [pattern(5 * MiB, 7), pattern(5 * MiB, 8), pattern(2 * MiB + 3, 9)]
  const whole = Buffer.concat(parts)
  const upload = new Upload({ client, params: { Bucket: 'sums', Key: 'big', Body: whole, ChecksumAlgorithm: 'SHA256' }, partSize: 5 * MiB, queueSize: 2 })
  const done = await upload.done()
  const composite = compositeSha256(parts)
  t.equal(done.ChecksumSHA256, composite, 'Complete answers the composite checksum')
  t.equal(done.ChecksumType, 'COMPOSITE')
  t.equal(done.ETag, multipartEtag(parts))

  const head = await client.send(new HeadObjectCommand({ Bucket: 'sums', Key: 'big', ChecksumMode: 'ENABLED' }))
  t.equal(head.ChecksumSHA256, composite)
  t.equal(head.ChecksumType, 'COMPOSITE')
  // The SDK validates a GetObject's checksum itself (it skips a composite `-N` one by design).
  const get = await client.send(new GetObjectCommand({ Bucket: 'sums', Key: 'big', ChecksumMode: 'ENABLED' }))
  t.equal(get.ChecksumSHA256, composite)
  t.ok(Buffer.from(await get.Body!.transformToByteArray()).equals(whole))
  // One part with checksum mode: that part's own checksum, which the SDK checks against the bytes.
  for (const [i, body] of parts.entries()) {
    const part = await client.send(new GetObjectCommand({ Bucket: 'sums', Key: 'big', PartNumber: i + 1, ChecksumMode: 'ENABLED' }))
    t.equal(part.ChecksumSHA256, sha256(body).toString('base64'))
    t.ok(Buffer.from(await part.Body!.transformToByteArray()).equals(body))
  }

  // GetObjectAttributes: ETag without quotes, the checksum, the parts with theirs, paged.
  const attrs = await client.send(
    new GetObjectAttributesCommand({ Bucket: 'sums', Key: 'big', ObjectAttributes: ['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize'] }),
  )
  t.equal(attrs.ETag, done.ETag!.replace(/"/g, ''))
  t.same(attrs.Checksum, { ChecksumSHA256: composite, ChecksumType: 'COMPOSITE' })
  t.equal(attrs.StorageClass, 'STANDARD')
  t.equal(attrs.ObjectSize, whole.length)
  t.ok(attrs.LastModified instanceof Date)
  t.equal(attrs.ObjectParts?.TotalPartsCount, 3)
  t.equal(attrs.ObjectParts?.IsTruncated, false)
  t.same(
    attrs.ObjectParts?.Parts,
    parts.map((p, i) => ({ ChecksumSHA256: sha256(p).toString('base64'), PartNumber: i + 1, Size: p.length })),
  )
  const page = await client.send(
    new GetObjectAttributesCommand({ Bucket: 'sums', Key: 'big', ObjectAttributes: ['ObjectParts'], MaxParts: 1, PartNumberMarker: '1' }),
  )
  t.equal(page.ETag, undefined, 'only the attributes asked for')
  t.equal(page.ObjectParts?.IsTruncated, true)
  t.equal(page.ObjectParts?.MaxParts, 1)
  t.equal(page.ObjectParts?.PartNumberMarker, '1')
  t.equal(page.ObjectParts?.NextPartNumberMarker, '2')
  t.same(
    page.ObjectParts?.Parts?.map((p) => p.PartNumber),
    [2],
  )
})

t.test('multipart checksums by hand: ListParts, checked declarations, refusals', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'hand' }))
  const p1 = pattern(5 * MiB, 11)
  const p2 = pattern(1000, 12)
  const created = await client.send(new CreateMultipartUploadCommand({ Bucket: 'hand', Key: 'k', ChecksumAlgorithm: 'CRC32C' }))
  t.equal(created.ChecksumAlgorithm, 'CRC32C')
  t.equal(created.ChecksumType, 'COMPOSITE')
  const UploadId = created.UploadId
  // A part sent with a checksum of another algorithm than the upload's is refused.
  t.same(await s3Error(client.send(new UploadPartCommand({ Bucket: 'hand', Key: 'k', UploadId, PartNumber: 1, Body: p1, ChecksumAlgorithm: 'SHA1' }))), {
    name: 'InvalidRequest',
    status: 400,
  })
  const r1 = await client.send(new UploadPartCommand({ Bucket: 'hand', Key: 'k', UploadId, PartNumber: 1, Body: p1, ChecksumAlgorithm: 'CRC32C' }))
  const r2 = await client.send(new UploadPartCommand({ Bucket: 'hand', Key: 'k', UploadId, PartNumber: 2, Body: p2, ChecksumAlgorithm: 'CRC32C' }))
  t.ok(r1.ChecksumCRC32C)
  const listed = await client.send(new ListPartsCommand({ Bucket: 'hand', Key: 'k', UploadId }))
  t.equal(listed.ChecksumAlgorithm, 'CRC32C')
  t.same(
    listed.Parts?.map((p) => [p.PartNumber, p.ChecksumCRC32C]),
    [
      [1, r1.ChecksumCRC32C],
      [2, r2.ChecksumCRC32C],
    ],
  )
  // A declared part checksum that is not the part's: InvalidPart, and the upload stays.
  const wrong = await s3Error(
    client.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'hand',
        Key: 'k',
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: r1.ETag, ChecksumCRC32C: r2.ChecksumCRC32C },
            { PartNumber: 2, ETag: r2.ETag, ChecksumCRC32C: r2.ChecksumCRC32C },
          ],
        },
      }),
    ),
  )
  t.same(wrong, { name: 'InvalidPart', status: 400 })
  const done = await client.send(
    new CompleteMultipartUploadCommand({
      Bucket: 'hand',
      Key: 'k',
      UploadId,
      MultipartUpload: {
        Parts: [
          { PartNumber: 1, ETag: r1.ETag, ChecksumCRC32C: r1.ChecksumCRC32C },
          { PartNumber: 2, ETag: r2.ETag, ChecksumCRC32C: r2.ChecksumCRC32C },
        ],
      },
    }),
  )
  t.match(done.ChecksumCRC32C, /^[A-Za-z0-9+/]{6}==-2$/)

  // FULL_OBJECT is for CRCs only, CRC64NVME is FULL_OBJECT only (S3).
  t.same(
    await s3Error(client.send(new CreateMultipartUploadCommand({ Bucket: 'hand', Key: 'x', ChecksumAlgorithm: 'CRC64NVME', ChecksumType: 'COMPOSITE' }))),
    { name: 'InvalidRequest', status: 400 },
  )
  t.same(await s3Error(client.send(new CreateMultipartUploadCommand({ Bucket: 'hand', Key: 'x', ChecksumAlgorithm: 'SHA1', ChecksumType: 'FULL_OBJECT' }))), {
    name: 'InvalidRequest',
    status: 400,
  })
})

t.test('GetObjectAttributes on objects without part checksums, and bad requests', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'attrs' }))
  const all = ['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize'] as const
  // One piece, with a checksum: FULL_OBJECT, no ObjectParts.
  const body = Buffer.alloc(1024, 'A')
  const put = await client.send(new PutObjectCommand({ Bucket: 'attrs', Key: 'one', Body: body, ChecksumAlgorithm: 'SHA256' }))
  const one = await client.send(new GetObjectAttributesCommand({ Bucket: 'attrs', Key: 'one', ObjectAttributes: [...all] }))
  t.equal(one.ETag, put.ETag!.replace(/"/g, ''))
  t.same(one.Checksum, { ChecksumSHA256: sha256(body).toString('base64'), ChecksumType: 'FULL_OBJECT' })
  t.equal(one.ObjectSize, 1024)
  t.equal(one.ObjectParts, undefined)
  // Multipart without a checksum algorithm: AWS lists no parts (only checksummed uploads have them).
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'attrs', Key: 'mp' }))
  const r = await client.send(new UploadPartCommand({ Bucket: 'attrs', Key: 'mp', UploadId, PartNumber: 1, Body: 'abc' }))
  await client.send(completeCommand('attrs', 'mp', UploadId, [[1, r.ETag]]))
  const mp = await client.send(new GetObjectAttributesCommand({ Bucket: 'attrs', Key: 'mp', ObjectAttributes: [...all] }))
  t.equal(mp.ObjectSize, 3)
  t.equal(mp.ObjectParts, undefined)
  t.equal(mp.Checksum, undefined)
  t.match(mp.ETag, /^[0-9a-f]{32}-1$/)

  t.same(await s3Error(client.send(new GetObjectAttributesCommand({ Bucket: 'attrs', Key: 'absent', ObjectAttributes: ['ETag'] }))), {
    name: 'NoSuchKey',
    status: 404,
  })
  const bad = await ctx.s3app.inject(
    await signedRequest(ctx, { method: 'GET', path: '/attrs/one', query: { attributes: '' }, headers: { 'x-amz-object-attributes': 'ETag,Colour' } }),
  )
  t.equal(bad.statusCode, 400)
  t.match(bad.body, /<Code>InvalidArgument<\/Code>/)
  const none = await ctx.s3app.inject(await signedRequest(ctx, { method: 'GET', path: '/attrs/one', query: { attributes: '' } }))
  t.equal(none.statusCode, 400)
  t.match(none.body, /<Code>InvalidArgument<\/Code>/)
})

t.test('CompleteMultipartUpload checks the whole-object checksum it is given (x-amz-checksum-<algorithm>)', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'expect' }))
  const body = Buffer.alloc(1024, 'A')
  const start = async () => {
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'expect', Key: 'k', ChecksumAlgorithm: 'SHA256' }))
    const part = await client.send(new UploadPartCommand({ Bucket: 'expect', Key: 'k', UploadId, PartNumber: 1, Body: body, ChecksumAlgorithm: 'SHA256' }))
    return { UploadId, parts: [{ PartNumber: 1, ETag: part.ETag, ChecksumSHA256: part.ChecksumSHA256 }] }
  }
  const a = await start()
  t.same(
    await s3Error(
      client.send(
        new CompleteMultipartUploadCommand({ Bucket: 'expect', Key: 'k', UploadId: a.UploadId, ChecksumSHA256: 'bad', MultipartUpload: { Parts: a.parts } }),
      ),
    ),
    { name: 'BadDigest', status: 400 },
  )
  const composite = compositeSha256([body])
  t.equal(composite, 'Ok6Cs5b96ux6+MWQkJO7UBT5sKPBeXBLwvj/hK89smg=-1', 'the value ceph/s3-tests know for 1024 x "A"')
  const done = await client.send(
    new CompleteMultipartUploadCommand({ Bucket: 'expect', Key: 'k', UploadId: a.UploadId, ChecksumSHA256: composite, MultipartUpload: { Parts: a.parts } }),
  )
  t.equal(done.ChecksumSHA256, composite)
  const head = await client.send(new HeadObjectCommand({ Bucket: 'expect', Key: 'k' }))
  t.equal(head.ChecksumSHA256, undefined, 'only with checksum mode')
})

t.test('FULL_OBJECT CRC32: the CRC of the whole object, combined from the parts, verified by the SDK on GetObject', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'full' }))
  const parts = [pattern(5 * MiB, 21), pattern(3 * MiB + 5, 22)]
  const whole = Buffer.concat(parts)
  const b64 = (v: number) => {
    const b = Buffer.alloc(4)
    b.writeUInt32BE(v >>> 0)
    return b.toString('base64')
  }
  const created = await client.send(new CreateMultipartUploadCommand({ Bucket: 'full', Key: 'k', ChecksumAlgorithm: 'CRC32', ChecksumType: 'FULL_OBJECT' }))
  t.equal(created.ChecksumType, 'FULL_OBJECT')
  const UploadId = created.UploadId
  const declared = []
  for (const [i, body] of parts.entries()) {
    const r = await client.send(new UploadPartCommand({ Bucket: 'full', Key: 'k', UploadId, PartNumber: i + 1, Body: body, ChecksumAlgorithm: 'CRC32' }))
    t.equal(r.ChecksumCRC32, b64(crc32(body)))
    declared.push({ PartNumber: i + 1, ETag: r.ETag, ChecksumCRC32: r.ChecksumCRC32 })
  }
  const expected = b64(crc32(whole))
  const done = await client.send(
    new CompleteMultipartUploadCommand({ Bucket: 'full', Key: 'k', UploadId, ChecksumCRC32: expected, MultipartUpload: { Parts: declared } }),
  )
  t.equal(done.ChecksumCRC32, expected)
  t.equal(done.ChecksumType, 'FULL_OBJECT')
  // No `-N`: the SDK checks this one against the bytes it reads.
  const get = await client.send(new GetObjectCommand({ Bucket: 'full', Key: 'k', ChecksumMode: 'ENABLED' }))
  t.equal(get.ChecksumCRC32, expected)
  t.equal(get.ChecksumType, 'FULL_OBJECT')
  t.ok(Buffer.from(await get.Body!.transformToByteArray()).equals(whole))
  const attrs = await client.send(new GetObjectAttributesCommand({ Bucket: 'full', Key: 'k', ObjectAttributes: ['Checksum', 'ObjectParts'] }))
  t.same(attrs.Checksum, { ChecksumCRC32: expected, ChecksumType: 'FULL_OBJECT' })
  t.same(attrs.ObjectParts, { TotalPartsCount: 2 })
})

t.test("CRC-64/NVME: the catalogue check value, and the same as the SDK's own", async (t) => {
  const c = new Crc64Nvme()
  c.update(Buffer.from('123456789'))
  t.equal(c.digest().toString('hex'), 'ae8b14860a799888')
  const data = pattern(100_003, 50)
  const ours = new Crc64Nvme()
  ours.update(data.subarray(0, 33_333))
  ours.update(data.subarray(33_333))
  const sdk = new SdkCrc64Nvme()
  sdk.update(data)
  t.equal(ours.digest().toString('base64'), Buffer.from(await sdk.digest()).toString('base64'))
})

t.test('fullObjectCrc: CRC32, CRC32C and CRC64NVME of the whole, from the parts alone, for any sizes (empty parts too)', async (t) => {
  const b64 = (v: number) => {
    const b = Buffer.alloc(4)
    b.writeUInt32BE(v >>> 0)
    return b.toString('base64')
  }
  for (const sizes of [[0], [1], [5, 0, 7], [1000, 1, 33333], [5 * MiB, MiB + 3]]) {
    const parts = sizes.map((n, i) => pattern(n, i + 30))
    const whole = Buffer.concat(parts)
    for (const [algorithm, crc] of [
      ['crc32', crc32],
      ['crc32c', crc32c],
    ] as const) {
      const combined = fullObjectCrc(
        algorithm,
        parts.map((p) => ({ checksum: b64(crc(p, 0)), size: p.length })),
      )
      t.equal(combined, b64(crc(whole, 0)), `${algorithm} of parts ${sizes.join(', ')}`)
    }
    const crc64 = (b: Buffer) => {
      const c = new Crc64Nvme()
      c.update(b)
      return c.digest().toString('base64')
    }
    t.equal(
      fullObjectCrc(
        'crc64nvme',
        parts.map((p) => ({ checksum: crc64(p), size: p.length })),
      ),
      crc64(whole),
      `crc64nvme of parts ${sizes.join(', ')}`,
    )
  }
})

t.test('CRC64NVME: PutObject, and a multipart upload whose full-object CRC64 the SDK verifies on GetObject', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'nvme' }))
  const reference = async (b: Buffer) => {
    const c = new SdkCrc64Nvme()
    c.update(b)
    return Buffer.from(await c.digest()).toString('base64')
  }
  const small = pattern(70_000, 40)
  const put = await client.send(new PutObjectCommand({ Bucket: 'nvme', Key: 'small', Body: small, ChecksumAlgorithm: 'CRC64NVME' }))
  t.equal(put.ChecksumCRC64NVME, await reference(small))
  const got = await client.send(new GetObjectCommand({ Bucket: 'nvme', Key: 'small', ChecksumMode: 'ENABLED' }))
  t.equal(got.ChecksumCRC64NVME, await reference(small))
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(small))

  const parts = [pattern(5 * MiB, 41), pattern(123_457, 42)]
  const whole = Buffer.concat(parts)
  const created = await client.send(new CreateMultipartUploadCommand({ Bucket: 'nvme', Key: 'mp', ChecksumAlgorithm: 'CRC64NVME' }))
  t.equal(created.ChecksumType, 'FULL_OBJECT', "CRC64NVME's only type, and its default")
  const declared = []
  for (const [i, body] of parts.entries()) {
    const r = await client.send(
      new UploadPartCommand({ Bucket: 'nvme', Key: 'mp', UploadId: created.UploadId, PartNumber: i + 1, Body: body, ChecksumAlgorithm: 'CRC64NVME' }),
    )
    t.equal(r.ChecksumCRC64NVME, await reference(body))
    declared.push({ PartNumber: i + 1, ETag: r.ETag, ChecksumCRC64NVME: r.ChecksumCRC64NVME })
  }
  const done = await client.send(
    new CompleteMultipartUploadCommand({ Bucket: 'nvme', Key: 'mp', UploadId: created.UploadId, MultipartUpload: { Parts: declared } }),
  )
  t.equal(done.ChecksumCRC64NVME, await reference(whole))
  const get = await client.send(new GetObjectCommand({ Bucket: 'nvme', Key: 'mp', ChecksumMode: 'ENABLED' }))
  t.equal(get.ChecksumCRC64NVME, await reference(whole))
  t.ok(Buffer.from(await get.Body!.transformToByteArray()).equals(whole))
})
