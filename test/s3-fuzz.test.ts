// @suites: pg s3
// Random and malformed input on the S3 front never yields a 5xx (but the contract's 501
// NotImplemented), a hang or a crash: every answer is a 2xx/3xx or a 4xx in S3's XML error shape.
// Requests are signed with the AWS SDK's signer, so the fuzzing reaches past authentication.
import t, { type Test } from 'tap'
import fc from 'fast-check'
import type { InjectOptions } from 'fastify'
import { encodeKey, makeS3, signedRequest, type S3Context } from './s3-helper'

// Longer than the suite's default per-file timeout: real clients and processes, bounded per step.
t.setTimeout(300000)

const RUNS = Number(process.env.COFFER_FUZZ_RUNS ?? 150)
const SEED = process.env.COFFER_FUZZ_SEED === undefined ? {} : { seed: Number(process.env.COFFER_FUZZ_SEED) }

async function expectSane(t: Test, ctx: S3Context, req: InjectOptions): Promise<boolean> {
  const res = await Promise.race([
    ctx.s3app.inject(req),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`hang: ${JSON.stringify(req).slice(0, 300)}`)), 5000)),
  ])
  const code = /<Code>([^<]*)<\/Code>/.exec(res.body)?.[1]
  if (res.statusCode >= 500 && !(res.statusCode === 501 && code === 'NotImplemented')) {
    t.fail(`${res.statusCode} for ${JSON.stringify(req).slice(0, 400)}: ${res.body.slice(0, 300)}`)
    return false
  }
  if (!res.headers['x-amz-request-id']) {
    t.fail(`no x-amz-request-id for ${JSON.stringify(req).slice(0, 200)}`)
    return false
  }
  if (res.statusCode >= 400 && req.method !== 'HEAD' && (code === undefined || !/<RequestId>[0-9A-F]{16}<\/RequestId>/.test(res.body))) {
    t.fail(`no S3 error document for ${JSON.stringify(req).slice(0, 300)}: ${res.body.slice(0, 200)}`)
    return false
  }
  return true
}

const text = fc.string({ unit: 'binary', maxLength: 200 })
const keyArb = fc.oneof(
  fc.string({ unit: 'binary', minLength: 1, maxLength: 60 }),
  fc.constantFrom('a/b/c', '../../etc/passwd', '%00', 'x'.repeat(1100), '/leading', 'trailing/', 'sp ace', '\u{1F600}/ü', '?x=y', '#frag'),
)

t.test('S3 fuzz', async (t) => {
  const ctx = await makeS3(t)
  await ctx.s3app.inject(await signedRequest(ctx, { method: 'PUT', path: '/fuzz' }))
  await ctx.s3app.inject(await signedRequest(ctx, { method: 'PUT', path: '/fuzz/existing', payload: 'hello' }))
  const created = await ctx.s3app.inject(await signedRequest(ctx, { method: 'POST', path: '/fuzz/mp', query: { uploads: '' } }))
  const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(created.body)![1]!

  await t.test('malformed SigV4 headers and presigned queries', async (t) => {
    const base = await signedRequest(ctx, { method: 'GET', path: '/fuzz' })
    const auth = String((base.headers as Record<string, string>).authorization)
    const mutate = fc.oneof(
      text,
      fc.constant('AWS4-HMAC-SHA256'),
      fc.constant('AWS AKID:sig'),
      text.map((s) => auth.replace(/Signature=[0-9a-f]+/, `Signature=${s}`)),
      text.map((s) => auth.replace(/Credential=[^,]+/, `Credential=${s}`)),
      text.map((s) => auth.replace(/SignedHeaders=[^,]+/, `SignedHeaders=${s}`)),
      fc.nat({ max: auth.length }).map((n) => auth.slice(0, n)),
    )
    await fc.assert(
      fc.asyncProperty(mutate, fc.option(text), async (authorization, date) =>
        expectSane(t, ctx, {
          ...base,
          headers: { ...(base.headers as Record<string, string>), authorization, ...(date !== null ? { 'x-amz-date': date } : {}) },
        }),
      ),
      { numRuns: RUNS, ...SEED },
    )
    const params = fc.dictionary(
      fc.constantFrom('X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Expires', 'X-Amz-SignedHeaders', 'X-Amz-Signature', 'X-Amz-Content-Sha256'),
      text,
    )
    await fc.assert(
      fc.asyncProperty(params, async (q) => {
        const qs = Object.entries(q)
          .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
          .join('&')
        return expectSane(t, ctx, { method: 'GET', url: `/fuzz/existing?${qs}` })
      }),
      { numRuns: RUNS, ...SEED },
    )
  })

  await t.test('XML bodies: DeleteObjects, CompleteMultipartUpload, CreateBucketConfiguration', async (t) => {
    const xmlish = fc.oneof(
      text,
      fc.constant('<Delete><Object><Key>a</Key></Object></Delete>'),
      fc.constant('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><Delete><Object><Key>&b;</Key></Object></Delete>'),
      fc.constant('<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"x"</ETag></Part></CompleteMultipartUpload>'),
      fc.constant('<CompleteMultipartUpload><Part><PartNumber>99999999999</PartNumber></Part></CompleteMultipartUpload>'),
      fc.constant('<CreateBucketConfiguration><LocationConstraint>mars-1</LocationConstraint></CreateBucketConfiguration>'),
      fc.constant(`<Delete>${'<Object><Key>k</Key></Object>'.repeat(1001)}</Delete>`),
      fc
        .array(
          fc.constantFrom('<Delete>', '</Delete>', '<Object>', '</Object>', '<Key>', '</Key>', 'k', '<Quiet>true</Quiet>', '&amp;', '&bogus;', '<![CDATA[x]]>'),
          { maxLength: 30 },
        )
        .map((a) => a.join('')),
    )
    const targets: { method: string; path: string; query?: Record<string, string> }[] = [
      { method: 'POST', path: '/fuzz', query: { delete: '' } },
      { method: 'POST', path: '/fuzz/mp', query: { uploadId } },
      { method: 'PUT', path: '/fuzz-new-bucket' },
    ]
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets), xmlish, async (target, payload) => expectSane(t, ctx, await signedRequest(ctx, { ...target, payload }))),
      { numRuns: RUNS, ...SEED },
    )
  })

  await t.test('aws-chunked framing', async (t) => {
    const valid = `5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n`
    const framing = fc.oneof(
      text,
      fc.constant(valid),
      fc.nat({ max: valid.length }).map((n) => valid.slice(0, n)),
      fc
        .tuple(fc.nat({ max: valid.length - 1 }), fc.string({ unit: 'binary', minLength: 1, maxLength: 3 }))
        .map(([i, s]) => valid.slice(0, i) + s + valid.slice(i + 1)),
      fc.constant('ffffffffffffff\r\nabc'),
      fc.constant(`${'1;'.repeat(3000)}\r\n`),
    )
    const modes = fc.constantFrom('STREAMING-UNSIGNED-PAYLOAD-TRAILER', 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD', 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER')
    await fc.assert(
      fc.asyncProperty(
        framing,
        modes,
        fc.constantFrom('x-amz-checksum-crc32', 'x-amz-checksum-sha256', 'x-amz-checksum-bogus', ''),
        async (payload, mode, trailer) =>
          expectSane(
            t,
            ctx,
            await signedRequest(ctx, {
              method: 'PUT',
              path: '/fuzz/chunked',
              payload,
              payloadHash: mode,
              headers: { 'content-encoding': 'aws-chunked', ...(trailer ? { 'x-amz-trailer': trailer } : {}), 'x-amz-decoded-content-length': '5' },
            }),
          ),
      ),
      { numRuns: RUNS, ...SEED },
    )
  })

  await t.test('keys and listing parameters', async (t) => {
    const op = fc.constantFrom('PUT', 'GET', 'HEAD', 'DELETE')
    await fc.assert(
      fc.asyncProperty(op, keyArb, async (method, key) =>
        expectSane(t, ctx, await signedRequest(ctx, { method, path: `/fuzz/${encodeKey(key)}`, ...(method === 'PUT' ? { payload: 'v' } : {}) })),
      ),
      { numRuns: RUNS, ...SEED },
    )
    const params = fc.dictionary(
      fc.constantFrom(
        'list-type',
        'prefix',
        'delimiter',
        'max-keys',
        'marker',
        'continuation-token',
        'start-after',
        'encoding-type',
        'fetch-owner',
        'uploads',
        'max-uploads',
        'key-marker',
        'acl',
        'versions',
      ),
      fc.oneof(text, fc.constantFrom('2', '0', '-1', '1000000', 'url', '/')),
    )
    await fc.assert(
      fc.asyncProperty(params, async (query) => expectSane(t, ctx, await signedRequest(ctx, { method: 'GET', path: '/fuzz', query }))),
      { numRuns: RUNS, ...SEED },
    )
    const objParams = fc.dictionary(
      fc.constantFrom('partNumber', 'uploadId', 'versionId', 'response-content-type', 'tagging', 'max-parts', 'part-number-marker'),
      fc.oneof(text, fc.constant(uploadId)),
    )
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('GET', 'PUT', 'POST', 'DELETE'), objParams, async (method, query) =>
        expectSane(t, ctx, await signedRequest(ctx, { method, path: '/fuzz/mp', query, ...(method === 'PUT' || method === 'POST' ? { payload: 'x' } : {}) })),
      ),
      { numRuns: RUNS, ...SEED },
    )
  })
})
