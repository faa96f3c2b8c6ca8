// @suites: pg s3
// Large objects through the S3 listener of a real server process: streamed both ways byte for byte
// with the server's memory flat; an object over the size limit is refused with nothing left behind.
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { assertFlatMemory, buildBundle, createTenantOverHttp, memoryOf, startCoffer } from './process-helper'
import { tempDir } from './helper'

buildBundle()

t.setTimeout(300_000)

const MiB = 1024 * 1024
const ADMIN = 's3big-admin-key-0123456789'

/** `size` pseudo-random bytes produced lazily in 1 MiB pieces, with the SHA-256 of what was produced. */
function generated(size: number) {
  const hash = createHash('sha256')
  let sent = 0
  let x = 12345
  const stream = new Readable({
    read() {
      if (sent >= size) return this.push(null)
      const n = Math.min(MiB, size - sent)
      const buf = Buffer.allocUnsafe(n)
      for (let i = 0; i < n; i += 4) {
        x = (x * 1103515245 + 12345) >>> 0
        buf.writeUInt32LE(x, i)
      }
      hash.update(buf)
      sent += n
      this.push(buf)
    },
  })
  return { stream, digest: () => hash.digest('hex') }
}

async function start(t: Test, env: Record<string, string> = {}) {
  const cwd = tempDir(t, 'coffer-s3big-')
  const server = await startCoffer(['serve', '--port', '0', '--s3-port', '0', '--data-dir', 'data'], {
    cwd,
    env: { COFFER_ADMIN_API_KEY: ADMIN, ...env },
    ready: /coffer S3 listening on (http:\/\/[^\s"]+)/,
  })
  t.teardown(() => void server.child.kill('SIGKILL'))
  const api = /coffer listening on (http:\/\/[^\s"]+)/.exec(server.lines.join('\n'))![1]!
  const tenant = await createTenantOverHttp(api, ADMIN, { name: 'big', quotaBytes: 2048 * MiB })
  const cred = (await (
    await fetch(`${api}/api/v1/admin/tenants/${tenant.id}/s3-credentials`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } })
  ).json()) as {
    accessKeyId: string
    secretAccessKey: string
  }
  const client = new S3Client({ endpoint: server.url, region: 'us-east-1', forcePathStyle: true, credentials: cred })
  t.teardown(() => client.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'big' }))
  return { server, client, cwd }
}

async function getDigest(client: S3Client, key: string): Promise<{ digest: string; length: number }> {
  const got = await client.send(new GetObjectCommand({ Bucket: 'big', Key: key }))
  const hash = createHash('sha256')
  let length = 0
  for await (const chunk of got.Body as Readable) {
    hash.update(chunk as Buffer)
    length += (chunk as Buffer).length
  }
  return { digest: hash.digest('hex'), length }
}

t.test('200 MiB PutObject and 96 MiB multipart, streamed both ways; server memory stays flat', async (t) => {
  const { server, client } = await start(t)
  const before = memoryOf(server.child.pid!).rss
  const one = generated(200 * MiB)
  await client.send(new PutObjectCommand({ Bucket: 'big', Key: 'one.bin', Body: one.stream, ContentLength: 200 * MiB }))
  t.same(await getDigest(client, 'one.bin'), { digest: one.digest(), length: 200 * MiB }, 'PutObject of 200 MiB round-trips')
  const multi = generated(96 * MiB)
  await new Upload({ client, params: { Bucket: 'big', Key: 'multi.bin', Body: multi.stream }, partSize: 8 * MiB, queueSize: 4 }).done()
  t.same(await getDigest(client, 'multi.bin'), { digest: multi.digest(), length: 96 * MiB }, 'multipart of 96 MiB round-trips')
  assertFlatMemory(t, server.child.pid!, before, '296 MiB each way')
})

t.test('an object over COFFER_S3_MAX_OBJECT_BYTES is refused and nothing stays on disk', async (t) => {
  const { client, cwd } = await start(t, { COFFER_S3_MAX_OBJECT_BYTES: String(10 * MiB) })
  const body = generated(11 * MiB)
  await t.rejects(client.send(new PutObjectCommand({ Bucket: 'big', Key: 'huge', Body: body.stream, ContentLength: 11 * MiB })), { name: 'EntityTooLarge' })
  await t.rejects(client.send(new GetObjectCommand({ Bucket: 'big', Key: 'huge' })), { name: 'NoSuchKey' })
  t.same(fs.readdirSync(path.join(cwd, 'data', 'tmp')), [], 'no partial temp file')
  t.same(fs.readdirSync(path.join(cwd, 'data', 'blobs', 'sha256')), [], 'no blob')
})
