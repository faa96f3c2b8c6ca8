// @suites: sqlite
// SigV4 verification and aws-chunked decoding, checked against the AWS SDK's own signer
// (@smithy/signature-v4) and against the worked example of Amazon's S3 API reference, not against
// this implementation itself.
import { createHash, createHmac, randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { crc32 } from 'node:zlib'
import t from 'tap'
import { SignatureV4 } from '@smithy/signature-v4'
import { SigningKey, verifySigV4, STREAMING_SIGNED, type VerifiedV4 } from '../src/s3/sigv4'
import { AwsChunkedDecoder } from '../src/s3/chunked'
import { S3Error } from '../src/s3/errors'
import { DigestStream } from '../src/s3/checksums'
import { NodeSha256 } from './s3-helper'

const AKID = 'CKTESTTESTTESTTEST01'
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'
const REGION = 'us-east-1'
const NOW = Date.UTC(2026, 10, 23, 12, 0, 0)

const signer = (region = REGION, secret = SECRET) =>
  new SignatureV4({ service: 's3', region, credentials: { accessKeyId: AKID, secretAccessKey: secret }, sha256: NodeSha256, uriEscapePath: false })

interface Req {
  method: string
  path: string
  query?: Record<string, string>
  headers?: Record<string, string>
}

function toWire(signed: { method: string; path: string; query?: Record<string, string | string[] | null>; headers: Record<string, string> }) {
  const qs = Object.entries(signed.query ?? {})
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v ?? ''))}`)
    .join('&')
  const rawHeaders = Object.entries(signed.headers).flat()
  return { method: signed.method, url: qs ? `${signed.path}?${qs}` : signed.path, rawHeaders }
}

async function signed(r: Req, opts: { region?: string; date?: Date; payload?: string } = {}) {
  const s = await signer(opts.region).sign(
    {
      method: r.method,
      protocol: 'http:',
      hostname: '127.0.0.1',
      port: 9000,
      path: r.path,
      query: r.query ?? {},
      headers: { host: '127.0.0.1:9000', 'x-amz-content-sha256': opts.payload ?? 'UNSIGNED-PAYLOAD', ...r.headers },
    },
    { signingDate: opts.date ?? new Date(NOW) },
  )
  return toWire(s as never)
}

const lookup = (id: string) => (id === AKID ? { secret: SECRET, principal: 'tenant-1' } : undefined)
const verify = (req: ReturnType<typeof toWire>, now = NOW, region = REGION) => verifySigV4(req, { region, now, lookup })

function s3Code(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (err) {
    if (err instanceof S3Error) return err.code
    throw err
  }
  return undefined
}

t.test('SigningKey matches the HMAC-SHA256 createHmac computes, and nothing else, for any key and message length', async (t) => {
  const messages = ['', 'a', 'x'.repeat(55), 'y'.repeat(64), 'z'.repeat(300), 'été/ключ/🙂\n'.repeat(40), randomBytes(700).toString('latin1')]
  for (const keyLength of [0, 1, 32, 63, 64, 65, 200]) {
    const raw = randomBytes(keyLength)
    const key = new SigningKey(raw)
    // The same key object checks messages of growing and shrinking length in turn.
    for (const m of [...messages, ...messages.reverse()]) {
      const expected = createHmac('sha256', raw).update(m).digest('hex')
      const wrong = `${expected.slice(0, 63)}${expected[63] === '0' ? '1' : '0'}`
      t.ok(key.matches(m, expected) && !key.matches(m, wrong), `key ${keyLength} B, message ${m.length} chars`)
    }
  }
})

t.test('Authorization header signed by the SDK signer verifies; any change does not', async (t) => {
  const req = await signed({
    method: 'GET',
    path: '/photos/a%20b/%C3%A9t%C3%A9.txt',
    query: { 'list-type': '2', prefix: 'a/b c', 'max-keys': '5' },
    headers: { range: 'bytes=0-9' },
  })
  const v = verify(req)
  t.equal(v.principal, 'tenant-1')
  t.equal(v.accessKeyId, AKID)
  t.same(v.payload, { kind: 'unsigned' })
  t.equal(v.presigned, false)

  t.equal(
    s3Code(() => verify({ ...req, method: 'PUT' })),
    'SignatureDoesNotMatch',
    'method is signed',
  )
  t.equal(
    s3Code(() => verify({ ...req, url: req.url.replace('a%20b', 'a%20c') })),
    'SignatureDoesNotMatch',
    'path is signed',
  )
  t.equal(
    s3Code(() => verify({ ...req, url: req.url.replace('max-keys=5', 'max-keys=6') })),
    'SignatureDoesNotMatch',
    'query is signed',
  )
  const hdrs = [...req.rawHeaders]
  hdrs[hdrs.indexOf('range') + 1] = 'bytes=0-10'
  t.equal(
    s3Code(() => verify({ ...req, rawHeaders: hdrs })),
    'SignatureDoesNotMatch',
    'signed headers are signed',
  )
  t.equal(
    s3Code(() => verify(req, NOW + 16 * 60_000)),
    'RequestTimeTooSkewed',
    'clock skew over 15 minutes',
  )
  t.equal(
    s3Code(() => verify(req, NOW - 16 * 60_000)),
    'RequestTimeTooSkewed',
  )
  t.ok(verify(req, NOW + 14 * 60_000), 'skew under 15 minutes is accepted')
  t.equal(
    s3Code(() => verifySigV4(req, { region: REGION, now: NOW, lookup: () => undefined })),
    'InvalidAccessKeyId',
  )
  t.equal(
    s3Code(() => verifySigV4(req, { region: REGION, now: NOW, lookup: () => ({ secret: 'another-secret', principal: 'x' }) })),
    'SignatureDoesNotMatch',
  )
})

t.test('a request signed for another region names the expected one', async (t) => {
  const req = await signed({ method: 'GET', path: '/' }, { region: 'eu-west-1' })
  try {
    verify(req)
    t.fail('should throw')
  } catch (err) {
    t.ok(err instanceof S3Error)
    t.equal((err as S3Error).code, 'AuthorizationHeaderMalformed')
    t.equal((err as S3Error).status, 400)
    t.same((err as S3Error).extra, { Region: 'us-east-1' })
  }
})

t.test('anonymous, SigV2 and malformed headers are refused with S3 codes', async (t) => {
  t.equal(
    s3Code(() => verify({ method: 'GET', url: '/', rawHeaders: ['host', 'x'] })),
    'AccessDenied',
  )
  t.equal(
    s3Code(() => verify({ method: 'GET', url: '/', rawHeaders: ['host', 'x', 'authorization', 'AWS AKID:c2ln'] })),
    'InvalidRequest',
  )
  t.equal(
    s3Code(() => verify({ method: 'GET', url: '/', rawHeaders: ['host', 'x', 'authorization', 'AWS4-HMAC-SHA256 garbage'] })),
    'AuthorizationHeaderMalformed',
  )
  const req = await signed({ method: 'GET', path: '/' })
  const noSha = req.rawHeaders.slice()
  const i = noSha.indexOf('x-amz-content-sha256')
  noSha.splice(i, 2)
  t.equal(
    s3Code(() => verify({ ...req, rawHeaders: noSha })),
    'InvalidRequest',
    'x-amz-content-sha256 is required',
  )
  t.equal(
    s3Code(() => verify({ ...req, url: '/%zz' })),
    'InvalidArgument',
    'bad percent-encoding',
  )
})

t.test('presigned URLs from the SDK signer verify until they expire', async (t) => {
  const p = await signer().presign(
    {
      method: 'GET',
      protocol: 'http:',
      hostname: '127.0.0.1',
      port: 9000,
      path: '/photos/k%2Bey.txt',
      query: { 'response-content-type': 'text/plain' },
      headers: { host: '127.0.0.1:9000', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
    },
    { signingDate: new Date(NOW), expiresIn: 3600 },
  )
  const req = toWire(p as never)
  const v = verify(req)
  t.equal(v.presigned, true)
  t.same(v.payload, { kind: 'unsigned' })
  t.ok(verify(req, NOW + 3599_000))
  t.equal(
    s3Code(() => verify(req, NOW + 3601_000)),
    'AccessDenied',
    'expired',
  )
  t.equal(
    s3Code(() => verify({ ...req, url: req.url.replace('text%2Fplain', 'text%2Fhtml') })),
    'SignatureDoesNotMatch',
  )
  const week = req.url.replace(/X-Amz-Expires=\d+/, 'X-Amz-Expires=604801')
  t.equal(
    s3Code(() => verify({ ...req, url: week })),
    'AuthorizationQueryParametersError',
    'over 7 days',
  )
})

/** Amazon's worked example (S3 API reference, "Example: PUT Object" under chunked upload). */
t.test('STREAMING-AWS4-HMAC-SHA256-PAYLOAD: the reference example verifies chunk by chunk', async (t) => {
  const date = new Date(Date.UTC(2013, 4, 24))
  const s = signer('us-east-1', SECRET)
  // Seed: the request signed by the SDK signer with the streaming payload marker.
  const headers = {
    host: 's3.amazonaws.com',
    'x-amz-date': '20130524T000000Z',
    'x-amz-storage-class': 'REDUCED_REDUNDANCY',
    'x-amz-content-sha256': STREAMING_SIGNED,
    'content-encoding': 'aws-chunked',
    'x-amz-decoded-content-length': '66560',
    'content-length': '66824',
  }
  const seed = await s.sign(
    { method: 'PUT', protocol: 'https:', hostname: 's3.amazonaws.com', path: '/examplebucket/chunkObject.txt', query: {}, headers },
    { signingDate: date },
  )
  const v = verifySigV4(toWire(seed as never), { region: 'us-east-1', now: date.getTime(), lookup: () => ({ secret: SECRET, principal: 1 }) })
  t.equal(v.signing.seedSignature, '4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9', 'the seed signature of the reference')
  t.same(v.payload, { kind: 'streaming', signed: true, trailer: false })

  const body = buildSignedChunked(v, [Buffer.alloc(65536, 'a'), Buffer.alloc(1024, 'a')])
  t.match(body.toString('latin1'), /^10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n/)
  t.match(body.toString('latin1'), /\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n/)
  t.match(body.toString('latin1'), /\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n$/)
  t.equal(body.length, 66824)

  const out = await decode(body, { signing: v.signing, trailer: false, announcedTrailers: [], decodedLength: 66560 }, 1000)
  t.equal(out.length, 66560)
  t.ok(out.equals(Buffer.alloc(66560, 'a')))

  const tampered = Buffer.from(body)
  tampered[200] = 0x62
  await t.rejects(decode(tampered, { signing: v.signing, trailer: false, announcedTrailers: [] }), { code: 'SignatureDoesNotMatch' })
  await t.rejects(decode(body, { signing: v.signing, trailer: false, announcedTrailers: [], decodedLength: 66561 }), { code: 'IncompleteBody' })
})

/** Builds a signed aws-chunked body with the SDK signer's string signing (its HMAC, our chaining). */
function buildSignedChunked(v: VerifiedV4<unknown>, chunks: Buffer[]): Buffer {
  // The day's signing key derived here from the secret, independently of the verifier's.
  const h = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest()
  const key = h(h(h(h(`AWS4${SECRET}`, v.signing.amzDate.slice(0, 8)), REGION), 's3'), 'aws4_request')
  let prev = v.signing.seedSignature
  const parts: Buffer[] = []
  for (const data of [...chunks, Buffer.alloc(0)]) {
    const sts = `AWS4-HMAC-SHA256-PAYLOAD\n${v.signing.amzDate}\n${v.signing.scope}\n${prev}\n${createHash('sha256').update('').digest('hex')}\n${createHash('sha256').update(data).digest('hex')}`
    const sig = createHmac('sha256', key).update(sts).digest('hex')
    parts.push(Buffer.from(`${data.length.toString(16)};chunk-signature=${sig}\r\n`), data, Buffer.from('\r\n'))
    prev = sig
  }
  return Buffer.concat(parts)
}

async function decode(body: Buffer, opts: ConstructorParameters<typeof AwsChunkedDecoder>[0], pieceSize = 7): Promise<Buffer> {
  const pieces: Buffer[] = []
  for (let i = 0; i < body.length; i += pieceSize) pieces.push(body.subarray(i, i + pieceSize))
  const out: Buffer[] = []
  await pipeline(Readable.from(pieces), new AwsChunkedDecoder(opts), async (src: AsyncIterable<unknown>) => {
    for await (const c of src) out.push(c as Buffer)
  })
  return Buffer.concat(out)
}

function crc32b64(data: Buffer): string {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(crc32(data))
  return b.toString('base64')
}

t.test('STREAMING-UNSIGNED-PAYLOAD-TRAILER with a checksum trailer', async (t) => {
  const data = Buffer.from('hello, chunked world'.repeat(1000))
  const body = Buffer.concat([
    Buffer.from(`${(8192).toString(16)}\r\n`),
    data.subarray(0, 8192),
    Buffer.from('\r\n'),
    Buffer.from(`${(data.length - 8192).toString(16)}\r\n`),
    data.subarray(8192),
    Buffer.from('\r\n'),
    Buffer.from(`0\r\nx-amz-checksum-crc32:${crc32b64(data)}\r\n\r\n`),
  ])
  const opts = { trailer: true, announcedTrailers: ['x-amz-checksum-crc32'], decodedLength: data.length }
  for (const size of [1, 3, 64, 100000]) t.ok((await decode(body, opts, size)).equals(data), `pieces of ${size}`)
  const wrong = Buffer.from(body.toString('latin1').replace(crc32b64(data), 'AAAAAA=='), 'latin1')
  await t.rejects(decode(wrong, opts), { code: 'BadDigest' })
  await t.rejects(decode(body, { ...opts, announcedTrailers: [] }), { code: 'IncompleteBody' }, 'unannounced trailer')
  await t.rejects(decode(body.subarray(0, body.length - 2), opts), { code: 'IncompleteBody' }, 'truncated')
  await t.rejects(decode(Buffer.from('zz\r\n'), opts), { code: 'IncompleteBody' }, 'bad size')
  await t.rejects(decode(Buffer.from(`5\r\nhello world\r\n0\r\n\r\n`), opts), { code: 'IncompleteBody' }, 'data longer than declared')
  await t.rejects(decode(Buffer.from(`${'1'.repeat(5000)}`), opts), { code: 'IncompleteBody' }, 'endless header line')
  t.throws(() => new AwsChunkedDecoder({ trailer: true, announcedTrailers: ['x-amz-checksum-md5'] }), { code: 'InvalidRequest' })
})

t.test('STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: chunk and trailer signatures', async (t) => {
  const s = signer()
  const seed = await s.sign(
    {
      method: 'PUT',
      protocol: 'http:',
      hostname: '127.0.0.1',
      path: '/b/k',
      query: {},
      headers: { host: '127.0.0.1:9000', 'x-amz-content-sha256': 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER', 'x-amz-trailer': 'x-amz-checksum-crc32c' },
    },
    { signingDate: new Date(NOW) },
  )
  const v = verify(toWire(seed as never))
  t.same(v.payload, { kind: 'streaming', signed: true, trailer: true })
  const data = Buffer.alloc(10000, 7)
  const chunked = buildSignedChunked(v, [data])
  // Drop the closing CRLF of the final chunk: trailers follow it instead.
  const head = chunked.subarray(0, chunked.length - 2)
  const finalSig = /0;chunk-signature=([0-9a-f]{64})\r\n$/.exec(head.toString('latin1'))![1]!
  const { Crc32c } = await import('@aws-crypto/crc32c')
  const c = Buffer.alloc(4)
  c.writeUInt32BE(new Crc32c().update(data).digest())
  const trailer = `x-amz-checksum-crc32c:${c.toString('base64')}\n`
  // The trailer signature computed with the SDK signer's string signing.
  const sts = `AWS4-HMAC-SHA256-TRAILER\n${v.signing.amzDate}\n${v.signing.scope}\n${finalSig}\n${createHash('sha256').update(trailer).digest('hex')}`
  const trailerSig = await s.sign(sts, { signingDate: new Date(NOW) })
  const body = Buffer.concat([head, Buffer.from(`${trailer.trimEnd()}\r\nx-amz-trailer-signature:${trailerSig}\r\n\r\n`)])
  const opts = { signing: v.signing, trailer: true, announcedTrailers: ['x-amz-checksum-crc32c'] }
  const d = new AwsChunkedDecoder(opts)
  const out: Buffer[] = []
  await pipeline(Readable.from([body]), d, async (src: AsyncIterable<unknown>) => {
    for await (const x of src) out.push(x as Buffer)
  })
  t.ok(Buffer.concat(out).equals(data))
  t.same(d.verifiedChecksum(), { algorithm: 'crc32c', value: c.toString('base64') })
  const badSig = Buffer.from(body.toString('latin1').replace(trailerSig, '0'.repeat(64)), 'latin1')
  await t.rejects(decode(badSig, opts), { code: 'SignatureDoesNotMatch' })
})

t.test('DigestStream computes MD5 and the requested checksums in one pass', async (t) => {
  const data = Buffer.from('The quick brown fox jumps over the lazy dog')
  const d = new DigestStream(['crc32', 'crc32c', 'sha1', 'sha256'])
  await pipeline(Readable.from([data.subarray(0, 10), data.subarray(10)]), d, async (src: AsyncIterable<unknown>) => {
    for await (const _ of src) void _
  })
  const r = await d.digests()
  t.equal(r.size, data.length)
  t.equal(r.md5Hex, '9e107d9d372bb6826bd81d3542a419d6')
  t.equal(r.checksums.crc32, Buffer.from('414fa339', 'hex').toString('base64'))
  t.equal(r.checksums.crc32c, Buffer.from('22620404', 'hex').toString('base64'))
  t.equal(r.checksums.sha1, Buffer.from('2fd4e1c67a2d28fced849ee1bb76e7391b93eb12', 'hex').toString('base64'))
  t.equal(r.checksums.sha256, undefined, "SHA-256 is the blob store's content address, not computed twice")
})

t.test('DigestStream hashes a large body on the MD5 thread: the same digest, whatever the chunking, and bounded in flight', async (t) => {
  const data = randomBytes(37 * 1024 * 1024 + 123)
  const expected = createHash('md5').update(data).digest('hex')
  for (const chunk of [1, 65_536, 3 * 1024 * 1024 + 7]) {
    const d = new DigestStream()
    const parts: Buffer[] = []
    // chunk 1: the first 4 KiB byte by byte, then the rest at once.
    const step = (i: number) => (chunk === 1 && i >= 4096 ? data.length : chunk)
    for (let i = 0; i < data.length; i += step(i)) parts.push(data.subarray(i, i + step(i)))
    let passed = 0
    await pipeline(Readable.from(parts), d, async (src: AsyncIterable<unknown>) => {
      for await (const x of src) passed += (x as Buffer).length
    })
    t.equal(passed, data.length, 'every byte passes through unchanged in count')
    const r = await d.digests()
    t.equal(r.md5Hex, expected, `chunks of ${chunk} bytes`)
    t.equal(r.size, data.length)
  }
  // Many at once share the one thread; each gets its own digest.
  const bodies = Array.from({ length: 6 }, (_, i) => randomBytes(2 * 1024 * 1024 + i * 1000))
  const got = await Promise.all(
    bodies.map(async (b) => {
      const d = new DigestStream()
      await pipeline(Readable.from([b.subarray(0, 1_500_000), b.subarray(1_500_000)]), d, async (src: AsyncIterable<unknown>) => {
        for await (const _ of src) void _
      })
      return (await d.digests()).md5Hex
    }),
  )
  t.same(
    got,
    bodies.map((b) => createHash('md5').update(b).digest('hex')),
  )
})
