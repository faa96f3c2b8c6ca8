// @suites: pg-all
// An S3 PUT refused while its body is still arriving (a bad signature, a bucket that does not exist,
// a quota the object would exceed) is answered with its XML error, and the rest of the body is read
// and thrown away (bounded) rather than the connection closed under the client: closing at once made
// undici's fetch fail its write (EPIPE) or lose the answer (ECONNRESET) about one time in two (#24).
import { execFile } from 'node:child_process'
import t from 'tap'
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { makeS3 } from './s3-helper'

const BODY_BYTES = 4 * 1024 * 1024
const TIMES = 30

/** PUTs `size` bytes to each URL with Node's fetch, in a process of its own; what each saw. */
function putAll(urls: string[], size: number): Promise<string[]> {
  const script = `
    const [urls, size] = [JSON.parse(process.argv[1]), Number(process.argv[2])]
    const body = new Uint8Array(size).fill(0x78)
    const seen = []
    for (const url of urls) {
      try {
        const res = await fetch(url, { method: 'PUT', body })
        seen.push(res.status + ' ' + await res.text())
      } catch (err) {
        seen.push('failed: ' + (err.cause?.code ?? err.cause?.message ?? err.message))
      }
    }
    console.log(JSON.stringify(seen))`
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ['--input-type=module', '-e', script, JSON.stringify(urls), String(size)], { maxBuffer: 1 << 22 }, (err, stdout) =>
      err ? reject(new Error(err.message)) : resolve(JSON.parse(stdout) as string[]),
    ),
  )
}

const code = (answer: string) => /<Code>([^<]*)<\/Code>/.exec(answer)?.[1]

t.test(`${TIMES} refused PUTs of ${BODY_BYTES >> 20} MiB each: every client reads the XML error`, async (t) => {
  const ctx = await makeS3(t, {}, { quotaBytes: 1024 * 1024 })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'present' }))
  const presign = (bucket: string, key: string) => getSignedUrl(ctx.client, new PutObjectCommand({ Bucket: bucket, Key: key }), { expiresIn: 600 })
  const cases: [string, (i: number) => Promise<string>, number, string][] = [
    ['a bucket that does not exist', (i) => presign('absent', `k${i}`), 404, 'NoSuchBucket'],
    [
      'a bad signature',
      async (i) => (await presign('present', `k${i}`)).replace(/X-Amz-Signature=([0-9a-f])/, (_m, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`),
      403,
      'SignatureDoesNotMatch',
    ],
    ['over the quota', (i) => presign('present', `k${i}`), 403, 'QuotaExceeded'],
  ]
  for (const [what, url, status, expected] of cases) {
    const urls = await Promise.all(Array.from({ length: TIMES }, (_, i) => url(i)))
    const seen = await putAll(urls, BODY_BYTES)
    const wrong = seen.filter((s) => !s.startsWith(`${status} `) || code(s) !== expected)
    t.same(wrong, [], `${what}: all ${TIMES} see ${status} ${expected}`)
  }
})
