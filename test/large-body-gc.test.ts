// @suites: sqlite
// What a large PutObject costs in garbage collection (#29). Every chunk read from a socket is a
// fresh off-heap Buffer, and V8 counts the young ones' bytes against its heap limit until a
// scavenge frees them. A server's heap is small (~20 MB), so with 8 MiB of chunks streamed between
// two scavenges it ran a full mark-compact every ~20 MiB: measured per thread, V8's helper threads
// spent 110-160 ms of CPU per 100 MiB PutObject, about the MD5's 150 ms. Scavenging every 2 MiB
// streamed keeps them under the limit. The server here is the bundle, run with --trace-gc.
import t from 'tap'
import { createHash } from 'node:crypto'
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { BUNDLE, buildBundle, createTenantOverHttp, startCoffer } from './process-helper'
import { tempDir } from './helper'
import { pattern } from './s3-helper'

t.setTimeout(240_000)
buildBundle()

const MiB = 1024 * 1024

t.test('a 192 MiB PutObject runs few full collections, and its ETag and content are exact', async (t) => {
  const cwd = tempDir(t, 'coffer-bigput-')
  const admin = 'bigput-admin-key-0123456789'
  const server = await startCoffer(['--trace-gc', BUNDLE, 'serve', '--port', '0', '--s3-port', '0', '--data-dir', 'data'], {
    cwd,
    command: process.execPath,
    env: { COFFER_ADMIN_API_KEY: admin, COFFER_LOG_LEVEL: 'info', COFFER_BLOB_STORE: 'disk' },
    ready: /coffer S3 listening on (http:\/\/[^\s"]+)/,
    timeoutMs: 60_000,
  })
  t.teardown(() => server.child.kill('SIGKILL'))
  const api = /coffer listening on (http:\/\/[^\s"]+)/.exec(server.lines.join('\n'))![1]!
  const tenant = await createTenantOverHttp(api, admin, { name: 'bigput', quotaBytes: 1024 * MiB })
  const credRes = await fetch(`${api}/api/v1/admin/tenants/${tenant.id}/s3-credentials`, { method: 'POST', headers: { authorization: `Bearer ${admin}` } })
  const credentials = (await credRes.json()) as { accessKeyId: string; secretAccessKey: string }
  const c = new S3Client({ endpoint: server.url, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 })
  t.teardown(() => c.destroy())
  await c.send(new CreateBucketCommand({ Bucket: 'big' }))
  // Warm-up: the MD5 thread started, the code compiled, the heap at its working size.
  await c.send(new PutObjectCommand({ Bucket: 'big', Key: 'warm', Body: pattern(16 * MiB, 1) }))

  // An odd length, so that neither the socket's chunks nor the MD5 thread's batches line up with it.
  const body = pattern(192 * MiB + 12_345, 2)
  const fullCollections = () => server.lines.filter((l) => l.includes('Mark-Compact')).length
  const before = fullCollections()
  const put = await c.send(new PutObjectCommand({ Bucket: 'big', Key: 'body', Body: body }))
  const during = fullCollections() - before
  t.equal(put.ETag, `"${createHash('md5').update(body).digest('hex')}"`, 'the ETag is the MD5 of the whole body')
  t.ok(during <= 5, `${during} full collections while 192 MiB streamed in (at most 5)`)

  const got = await c.send(new GetObjectCommand({ Bucket: 'big', Key: 'body' }))
  const hash = createHash('sha256')
  for await (const chunk of got.Body as AsyncIterable<Uint8Array>) hash.update(chunk)
  t.equal(hash.digest('hex'), createHash('sha256').update(body).digest('hex'), 'the stored content is the body, byte for byte')
})
