// @suites: pg-all
// A presigned URL's x-amz-* query parameters are the headers its signer moved there (#24). The JS
// SDK's presigner hoists x-amz-meta-*, x-amz-checksum-* and x-amz-sdk-checksum-algorithm into the
// query string (X-Amz-SignedHeaders=host); AWS obeys them as headers. Coffer read headers only, and
// a presigned PutObject's metadata and checksum were silently dropped.
import { createHash } from 'node:crypto'
import t from 'tap'
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { SignatureV4 } from '@smithy/signature-v4'
import { makeS3, NodeSha256, type S3Context } from './s3-helper'

const BUCKET = 'hoisted'
const BODY = 'the uploaded bytes'
const sha256 = (s: string) => createHash('sha256').update(s).digest('base64')
const code = (xml: string) => /<Code>([^<]*)<\/Code>/.exec(xml)?.[1]

async function exists(ctx: S3Context, key: string): Promise<boolean> {
  try {
    await ctx.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }))
    return true
  } catch (err) {
    if ((err as { name?: string }).name === 'NotFound') return false
    throw err
  }
}

async function setup(t: Parameters<typeof makeS3>[0]) {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: BUCKET }))
  /** A client that adds no default checksum, as the SDK's documentation advises for presigned uploads. */
  const presigner = new S3Client({
    endpoint: ctx.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: ctx.credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
  })
  t.teardown(() => presigner.destroy())
  return { ctx, presigner }
}

t.test('getSignedUrl(PutObject) with Metadata, ContentType and ChecksumSHA256, then fetch(): all of it applies', async (t) => {
  const { ctx, presigner } = await setup(t)
  const command = new PutObjectCommand({
    Bucket: BUCKET,
    Key: 'with-meta.txt',
    Metadata: { color: 'blue', word: 'caf\u00e9' },
    ContentType: 'text/plain',
    ChecksumSHA256: sha256(BODY),
  })
  const url = await getSignedUrl(presigner, command, { expiresIn: 600 })
  t.match(url, /X-Amz-SignedHeaders=host&/, 'the headers were moved into the query')
  t.match(url, /[?&]x-amz-meta-color=blue(&|$)/)
  t.match(url, /[?&]x-amz-checksum-sha256=/)
  const res = await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: BODY })
  t.equal(res.status, 200, await res.text())
  const head = await ctx.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'with-meta.txt' }))
  t.equal(head.Metadata?.color, 'blue', 'the metadata is stored')
  // Stored as the UTF-8 bytes, as a header carrying it would be; Node reads them back one character a byte.
  t.equal(Buffer.from(head.Metadata?.word ?? '', 'latin1').toString('utf8'), 'caf\u00e9')
  t.equal(head.ContentType, 'text/plain')
  const got = await ctx.client.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'with-meta.txt', ChecksumMode: 'ENABLED' }))
  t.equal(got.ChecksumSHA256, sha256(BODY), 'the checksum was checked and stored')
  t.equal(await got.Body!.transformToString(), BODY)
})

t.test('a checksum in the URL that the body does not match is BadDigest, and nothing is stored', async (t) => {
  const { ctx, presigner } = await setup(t)
  const url = await getSignedUrl(presigner, new PutObjectCommand({ Bucket: BUCKET, Key: 'wrong.txt', ChecksumSHA256: sha256('other bytes') }), {
    expiresIn: 600,
  })
  const res = await fetch(url, { method: 'PUT', body: BODY })
  t.equal(res.status, 400)
  t.equal(code(await res.text()), 'BadDigest')
  t.notOk(await exists(ctx, 'wrong.txt'))
  // The SDK's default client signs the CRC32 of the empty body it was given (AAAAAA==) into every
  // presigned PutObject URL: as on AWS (aws/aws-sdk-js-v3#6994), a real body does not match it.
  const dflt = await getSignedUrl(ctx.client, new PutObjectCommand({ Bucket: BUCKET, Key: 'default.txt' }), { expiresIn: 600 })
  t.match(dflt, /[?&]x-amz-checksum-crc32=AAAAAA%3D%3D(&|$)/)
  const refused = await fetch(dflt, { method: 'PUT', body: BODY })
  t.equal(refused.status, 400)
  t.equal(code(await refused.text()), 'BadDigest')
  t.notOk(await exists(ctx, 'default.txt'))
  const empty = await fetch(dflt, { method: 'PUT', body: '' })
  t.equal(empty.status, 200, 'the empty body it was made for is stored')
})

/** A URL presigned by the SDK's signer over `query`, with `headers` signed as headers (not hoisted). */
async function presign(ctx: S3Context, key: string, query: Record<string, string>, headers: Record<string, string>): Promise<string> {
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: ctx.credentials, sha256: NodeSha256, uriEscapePath: false })
  const host = ctx.endpoint.replace('http://', '')
  const signed = await signer.presign(
    {
      method: 'PUT',
      protocol: 'http:',
      hostname: '127.0.0.1',
      path: `/${BUCKET}/${key}`,
      query,
      headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers },
    },
    { expiresIn: 600, unhoistableHeaders: new Set(Object.keys(headers)) },
  )
  const qs = Object.entries(signed.query as Record<string, string>)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&')
  return `${ctx.endpoint}/${BUCKET}/${key}?${qs}`
}

t.test('a query parameter that disagrees with its signed header is refused; one no header could carry is 400', async (t) => {
  const { ctx } = await setup(t)
  const both = await presign(ctx, 'both.txt', { 'x-amz-meta-color': 'red' }, { 'x-amz-meta-color': 'blue' })
  t.match(both, /X-Amz-SignedHeaders=host%3Bx-amz-meta-color/)
  const conflict = await fetch(both, { method: 'PUT', headers: { 'x-amz-meta-color': 'blue' }, body: BODY })
  const text = await conflict.text()
  t.equal(conflict.status, 403, text)
  t.equal(code(text), 'AccessDenied')
  t.notOk(await exists(ctx, 'both.txt'))
  const same = await presign(ctx, 'same.txt', { 'x-amz-meta-color': 'blue' }, { 'x-amz-meta-color': 'blue' })
  t.equal((await fetch(same, { method: 'PUT', headers: { 'x-amz-meta-color': 'blue' }, body: BODY })).status, 200, 'the same value twice is fine')

  const crlf = await presign(ctx, 'crlf.txt', { 'x-amz-meta-note': 'a\r\nx-injected: 1' }, {})
  const bad = await fetch(crlf, { method: 'PUT', body: BODY })
  t.equal(bad.status, 400)
  t.equal(code(await bad.text()), 'InvalidArgument')
  t.notOk(await exists(ctx, 'crlf.txt'))
})
