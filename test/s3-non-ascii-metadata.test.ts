// @suites: pg-all
// A metadata value outside US-ASCII, as botocore sends it (ceph/s3-tests
// test_object_set_get_unicode_metadata, #24): the str is put on the wire as UTF-8 and its UTF-8 is
// what botocore hashes. Coffer hashed Node's latin1 reading of those bytes as UTF-8 and refused
// every such request 403 SignatureDoesNotMatch. The hash is now over the bytes received: the
// request is accepted, and a value changed on the way still fails.
import { createHmac } from 'node:crypto'
import { connect } from 'node:net'
import t from 'tap'
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { SignatureV4 } from '@smithy/signature-v4'
import { makeS3, NodeSha256, type S3Context } from './s3-helper'

const BUCKET = 'unicode-meta'
const VALUE = 'Hello World\u00e9'

interface Answer {
  status: number
  body: string
  /** Raw response headers, each value as the bytes received. */
  raw: Map<string, Buffer>
}

/** Signs `signedValue` as x-amz-meta-meta1 (the SDK's signer hashes it as UTF-8) and sends `sentBytes` instead. */
async function put(ctx: S3Context, key: string, signedValue: string, sentBytes: Buffer): Promise<Answer> {
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: ctx.credentials, sha256: NodeSha256, uriEscapePath: false })
  const host = ctx.endpoint.replace('http://', '')
  const signed = await signer.sign({
    method: 'PUT',
    protocol: 'http:',
    hostname: '127.0.0.1',
    path: `/${BUCKET}/${key}`,
    query: {},
    headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'x-amz-meta-meta1': signedValue, 'content-length': '3' },
  })
  return send(ctx, 'PUT', `/${BUCKET}/${key}`, { ...signed.headers, 'x-amz-meta-meta1': sentBytes }, 'bar')
}

async function get(ctx: S3Context, key: string): Promise<Answer> {
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: ctx.credentials, sha256: NodeSha256, uriEscapePath: false })
  const host = ctx.endpoint.replace('http://', '')
  const signed = await signer.sign({
    method: 'GET',
    protocol: 'http:',
    hostname: '127.0.0.1',
    path: `/${BUCKET}/${key}`,
    query: {},
    headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  })
  return send(ctx, 'GET', `/${BUCKET}/${key}`, signed.headers)
}

/** One request on a raw socket: the header values go out as the exact bytes given. */
function send(ctx: S3Context, method: string, path: string, headers: Record<string, string | Buffer>, body = ''): Promise<Answer> {
  const url = new URL(ctx.endpoint)
  const head: Buffer[] = [Buffer.from(`${method} ${path} HTTP/1.1\r\n`)]
  for (const [name, value] of Object.entries({ ...headers, connection: 'close' })) {
    head.push(Buffer.from(`${name}: `), typeof value === 'string' ? Buffer.from(value, 'latin1') : value, Buffer.from('\r\n'))
  }
  head.push(Buffer.from(`\r\n${body}`))
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.write(Buffer.concat(head)))
    const chunks: Buffer[] = []
    socket.on('data', (c: Buffer) => chunks.push(c))
    socket.on('error', reject)
    // The server closes the connection after its answer (Connection: close); ending first could be read as an abort.
    socket.on('close', () => {
      const text = Buffer.concat(chunks)
      const split = text.indexOf('\r\n\r\n')
      const lines = text.subarray(0, split).toString('latin1').split('\r\n')
      const raw = new Map<string, Buffer>()
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':')
        raw.set(line.slice(0, colon).toLowerCase(), Buffer.from(line.slice(colon + 1).trim(), 'latin1'))
      }
      resolve({ status: Number(lines[0]!.split(' ')[1]), body: text.subarray(split + 4).toString(), raw })
    })
  })
}

const code = (xml: string) => /<Code>([^<]*)<\/Code>/.exec(xml)?.[1]

t.test("botocore's non-ASCII metadata (UTF-8 on the wire, UTF-8 signed) is accepted and comes back", async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: BUCKET }))
  const put1 = await put(ctx, 'foo', VALUE, Buffer.from(VALUE, 'utf8'))
  t.equal(put1.status, 200, put1.body)
  const got = await get(ctx, 'foo')
  t.equal(got.status, 200)
  t.equal(got.body, 'bar')
  // The bytes received are the bytes returned (README, S3: no RFC 2047 re-encoding).
  t.same(got.raw.get('x-amz-meta-meta1'), Buffer.from(VALUE, 'utf8'), 'the metadata comes back as the bytes sent')
})

t.test("the JS SDK's non-ASCII metadata (node:http sends it as UTF-8 and signs its UTF-8) is accepted", async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: BUCKET }))
  await ctx.client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'sdk', Body: 'bar', Metadata: { meta1: VALUE, plain: 'ascii' } }))
  const head = await ctx.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'sdk' }))
  // Node reads response headers as latin1: the SDK shows the UTF-8 bytes one character each.
  t.equal(Buffer.from(head.Metadata!.meta1!, 'latin1').toString('utf8'), VALUE)
  t.equal(head.Metadata!.plain, 'ascii')
  const got = await ctx.client.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'sdk' }))
  t.equal(await got.Body!.transformToString(), 'bar')
})

t.test('a non-ASCII value changed on the way is still a bad signature, and nothing is stored', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: BUCKET }))
  // One byte changed: é (C3 A9) became è (C3 A8).
  const tampered = await put(ctx, 'tampered', VALUE, Buffer.from('Hello World\u00e8', 'utf8'))
  t.equal(tampered.status, 403)
  t.equal(code(tampered.body), 'SignatureDoesNotMatch')
  // The same text sent as latin1 (one byte E9), signed as UTF-8: not the bytes signed either.
  const latin1 = await put(ctx, 'latin1', VALUE, Buffer.from(VALUE, 'latin1'))
  t.equal(latin1.status, 403)
  t.equal(code(latin1.body), 'SignatureDoesNotMatch')
  for (const key of ['tampered', 'latin1']) t.equal((await get(ctx, key)).status, 404, `${key}: nothing stored`)
})

t.test('SigV2 (botocore signature_version="s3", s3cmd): the UTF-8 sent and signed verifies; another byte does not', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: BUCKET }))
  const putV2 = (key: string, signedValue: string, sentBytes: Buffer) => {
    const date = new Date().toUTCString()
    // As botocore's HmacV1Auth: the string to sign as text, hashed as its UTF-8.
    const stringToSign = `PUT\n\n\n${date}\nx-amz-meta-meta1:${signedValue}\n/${BUCKET}/${key}`
    const signature = createHmac('sha1', ctx.credentials.secretAccessKey).update(stringToSign, 'utf8').digest('base64')
    const headers = { host: ctx.endpoint.replace('http://', ''), date, authorization: `AWS ${ctx.credentials.accessKeyId}:${signature}`, 'content-length': '3' }
    return send(ctx, 'PUT', `/${BUCKET}/${key}`, { ...headers, 'x-amz-meta-meta1': sentBytes }, 'bar')
  }
  const ok = await putV2('v2', VALUE, Buffer.from(VALUE, 'utf8'))
  t.equal(ok.status, 200, ok.body)
  t.same((await get(ctx, 'v2')).raw.get('x-amz-meta-meta1'), Buffer.from(VALUE, 'utf8'))
  const tampered = await putV2('v2-tampered', VALUE, Buffer.from('Hello World\u00e8', 'utf8'))
  t.equal(tampered.status, 403)
  t.equal(code(tampered.body), 'SignatureDoesNotMatch')
  t.equal((await get(ctx, 'v2-tampered')).status, 404)
})
