// @suites: pg-all
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketEncryptionCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { bodyOf, completeCommand, makeS3, pattern, sseS3Multipart, storedBytes } from './s3-helper'
import { databaseEnvOf, fileBytes, filesBelow, flipByte, tempDir, upload } from './helper'
import { fixtureEnv } from './s3/fixture'
import { verifyCommand } from '../src/cli/maintenance'
import { rotateKeyCommand } from '../src/cli/encryption'
import { HEADER_BYTES, CHUNK_BYTES, TAG_BYTES } from '../src/lib/chunked-aead'
import type { Test } from 'tap'

// SSE-S3 without a master key (#27): objects asking for AES256 are sealed one by one under
// Coffer's own SSE-S3 key, kept in the database; and the plaintext's SHA-256 of sealed multipart objects.

type Ctx = Awaited<ReturnType<typeof makeS3>>

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
const probe = (b: Buffer) => b.subarray(1000, 1032)

const fileIdOf = (ctx: Ctx, key: string) => ctx.core.db.pluck('SELECT id FROM files WHERE object_key = ? AND deleted_at IS NULL').get(key) as string
const blobOf = (ctx: Ctx, key: string) => ctx.core.db.pluck('SELECT sha256 FROM files WHERE object_key = ? AND deleted_at IS NULL').get(key) as string
const keyRow = (ctx: Ctx) =>
  ctx.core.db.prepare('SELECT wrapped, length(wrapped_key) AS n FROM encryption WHERE id = 2').get() as { wrapped: number; n: number } | undefined

function masterKey(t: Test): { file: string; env: Record<string, string> } {
  const file = path.join(tempDir(t, 'coffer-key-'), 'master.key')
  fs.writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600 })
  return { file, env: { COFFER_ENCRYPTION_KEY_FILE: file } }
}

function cliIo(dir: string, env: Record<string, string>) {
  const out: string[] = []
  const sink = (arr: string[]) => ({ write: (s: string) => (arr.push(s), true) }) as unknown as NodeJS.WritableStream
  return { io: { env: { COFFER_DATA_DIR: dir, ...databaseEnvOf(dir), ...env }, stdout: sink(out), stderr: sink([]) }, out }
}

async function apiVersionSha(ctx: Ctx, key: string): Promise<string> {
  const res = await ctx.app.inject({ url: `/api/v1/files/${fileIdOf(ctx, key)}/versions`, headers: ctx.tenant.headers })
  return res.json().versions[0].sha256 as string
}

for (const store of ['disk', 's3'] as const) {
  const unavailable = store === 's3' ? fixtureEnv() : undefined
  const skip = unavailable && 'unavailable' in unavailable ? `the Ceph fixture is unavailable: ${unavailable.unavailable}` : false
  t.test(`SSE-S3 without a master key (${store} store): sealed per object, reported, read back, no plaintext in the store`, { skip }, async (t) => {
    const ctx = await makeS3(t, {}, { store })
    const { client } = ctx
    t.equal(ctx.config.encryptionKeyFile, undefined, 'no encrypted data dir')
    t.equal(keyRow(ctx), undefined, 'no SSE-S3 key before one is needed')
    await client.send(new CreateBucketCommand({ Bucket: 'sse' }))
    const body = pattern(300_000, 1)
    const put = await client.send(new PutObjectCommand({ Bucket: 'sse', Key: 'a', Body: body, ServerSideEncryption: 'AES256' }))
    t.equal(put.ServerSideEncryption, 'AES256', 'PutObject reports it (was 501)')
    t.match(keyRow(ctx), { wrapped: 0, n: 32 }, 'the SSE-S3 key was made on first need, kept as it is (no master key)')
    const got = await client.send(new GetObjectCommand({ Bucket: 'sse', Key: 'a' }))
    t.equal(got.ServerSideEncryption, 'AES256', 'GetObject reports it')
    t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(body), 'GetObject returns the bytes')
    t.equal((await client.send(new HeadObjectCommand({ Bucket: 'sse', Key: 'a' }))).ServerSideEncryption, 'AES256', 'HeadObject reports it')
    const ranged = await client.send(new GetObjectCommand({ Bucket: 'sse', Key: 'a', Range: 'bytes=70000-200000' }))
    t.equal(ranged.ServerSideEncryption, 'AES256', 'a ranged GET reports it')
    t.ok(Buffer.from(await ranged.Body!.transformToByteArray()).equals(body.subarray(70000, 200001)), 'a ranged GET returns its bytes')
    const plain = await client.send(new PutObjectCommand({ Bucket: 'sse', Key: 'plain', Body: pattern(5000, 2) }))
    t.equal(plain.ServerSideEncryption, undefined, 'an object that asked for nothing claims nothing')
    // Not deduplicated with plaintext: the same content, plain and sealed, is two blobs.
    await client.send(new PutObjectCommand({ Bucket: 'sse', Key: 'a-plain', Body: body }))
    t.not(blobOf(ctx, 'a'), blobOf(ctx, 'a-plain'), 'the sealed object shares no blob with the same content stored plain')
    t.equal(blobOf(ctx, 'a-plain'), sha(body))
    const copy = await client.send(new CopyObjectCommand({ Bucket: 'sse', Key: 'c', CopySource: 'sse/plain', ServerSideEncryption: 'AES256' }))
    t.equal(copy.ServerSideEncryption, 'AES256', 'CopyObject reports it')
    // Multipart.
    const { whole, parts } = await sseS3Multipart(t, client, 'sse', 'mp')
    t.equal(await apiVersionSha(ctx, 'mp'), sha(whole), "the API's sha256 of the multipart object is the plaintext's")
    const api = await ctx.app.inject({ url: `/api/v1/files/${fileIdOf(ctx, 'a')}/download`, headers: ctx.tenant.headers })
    t.ok(api.rawPayload.equals(body), 'the Storage Brain API downloads it in the clear')
    t.equal(api.headers.etag, `"${sha(body)}"`, "the API's ETag is the plaintext's SHA-256")

    const stored = await storedBytes(ctx)
    const sealed = [body, pattern(5000, 2), ...parts].map(probe)
    t.ok(
      stored.some((s) => s.includes(probe(pattern(5000, 2)))),
      'the plain object is in the store as it is (the probe finds plaintext where there is some)',
    )
    t.equal(stored.filter((s) => s.equals(body)).length, 1, "the plain copy of a's content is one blob of its own")
    const holding = stored.filter((s) => !s.equals(body) && [sealed[0]!, ...sealed.slice(2)].some((p) => s.includes(p)))
    t.equal(holding.length, 0, `no other stored blob holds the plaintext of an SSE-S3 object (${stored.length} read directly)`)
    const verify = cliIo(ctx.dir, store === 's3' ? ctx.storeEnv : {})
    t.equal(await verifyCommand(['--json', '--read-data'], verify.io), 0, 'coffer verify opens every sealed object')
  })
}

t.test('bucket default AES256 without a master key: PutObject and API uploads are sealed (disk)', async (t) => {
  const ctx = await makeS3(t, {}, { store: 'disk' })
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'enc' }))
  const rules = { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' as const } }] }
  await client.send(new PutBucketEncryptionCommand({ Bucket: 'enc', ServerSideEncryptionConfiguration: rules }))
  const body = pattern(200_000, 5)
  const put = await client.send(new PutObjectCommand({ Bucket: 'enc', Key: 'k', Body: body }))
  t.equal(put.ServerSideEncryption, 'AES256', 'a PutObject asking for nothing follows the default')
  const wsId = ctx.core.db.pluck("SELECT id FROM workspaces WHERE slug = 'enc' AND deleted_at IS NULL").get() as string
  const image = fileBytes('image/png', 150_000, 6)
  const up = await upload(ctx.app, ctx.tenant.headers, { bytes: image, name: 'i.png', extra: { workspaceId: wsId } })
  t.equal(up.put.statusCode, 200, up.put.body)
  t.equal(up.put.json().sizeBytes, image.length, 'the file reports the plaintext size')
  const objectKey = ctx.core.db.pluck('SELECT object_key FROM files WHERE id = ?').get(up.fileId) as string
  t.equal(
    (await client.send(new HeadObjectCommand({ Bucket: 'enc', Key: objectKey }))).ServerSideEncryption,
    'AES256',
    'S3 HEAD of the API upload reports AES256',
  )
  const down = await ctx.app.inject({ url: `/api/v1/files/${up.fileId}/download`, headers: ctx.tenant.headers })
  t.ok(down.rawPayload.equals(image), 'the API downloads it')
  t.equal(down.headers.etag, `"${sha(image)}"`, 'its ETag is the plaintext SHA-256')
  const stored = await storedBytes(ctx)
  t.equal(stored.filter((s) => s.includes(probe(body)) || s.includes(probe(image))).length, 0, 'neither is in the store in the clear')
})

t.test('a flipped byte of an SSE-S3 object is a read error and a coffer verify failure, never served (disk)', async (t) => {
  const ctx = await makeS3(t, {}, { store: 'disk' })
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'flip' }))
  const body = pattern(8 * CHUNK_BYTES, 7)
  await client.send(new PutObjectCommand({ Bucket: 'flip', Key: 'a', Body: body, ServerSideEncryption: 'AES256' }))
  await client.send(new PutObjectCommand({ Bucket: 'flip', Key: 'b', Body: pattern(100_000, 8), ServerSideEncryption: 'AES256' }))
  const verifyOk = cliIo(ctx.dir, {})
  t.equal(await verifyCommand(['--json'], verifyOk.io), 0, 'coffer verify passes before the damage')
  const file = filesBelow(ctx.core.dataDir.blobs).find((f) => path.basename(f) === blobOf(ctx, 'a'))!
  flipByte(file, HEADER_BYTES + 5 * (CHUNK_BYTES + TAG_BYTES) + 100)
  await t.rejects(bodyOf(client.send(new GetObjectCommand({ Bucket: 'flip', Key: 'a' }))), 'GetObject of the damaged object fails')
  const intact = await bodyOf(client.send(new GetObjectCommand({ Bucket: 'flip', Key: 'a', Range: `bytes=0-${CHUNK_BYTES - 1}` })))
  t.ok(intact.equals(body.subarray(0, CHUNK_BYTES)), 'a range of intact chunks still reads')
  await t.rejects(
    bodyOf(client.send(new GetObjectCommand({ Bucket: 'flip', Key: 'a', Range: `bytes=${5 * CHUNK_BYTES}-${5 * CHUNK_BYTES + 10}` }))),
    'a range in the damaged chunk fails',
  )
  const run = cliIo(ctx.dir, {})
  t.equal(await verifyCommand(['--json'], run.io), 1)
  t.same(JSON.parse(run.out.join('')).corrupt, [blobOf(ctx, 'a')], 'coffer verify reports the damaged blob')

  // The opening pass: a blob whose hash holds but whose plaintext is not what the object recorded.
  const fileId = fileIdOf(ctx, 'b')
  const info = JSON.parse(ctx.core.db.pluck('SELECT object_info FROM files WHERE id = ?').get(fileId) as string)
  info.sse.sha256 = sha(Buffer.from('something else'))
  ctx.core.db.prepare('UPDATE files SET object_info = ? WHERE id = ?').run(JSON.stringify(info), fileId)
  const again = cliIo(ctx.dir, {})
  t.equal(await verifyCommand(['--json'], again.io), 1)
  t.same(
    JSON.parse(again.out.join('')).corrupt.sort(),
    [blobOf(ctx, 'a'), blobOf(ctx, 'b')].sort(),
    'an object whose opened plaintext is not the recorded one is corrupt',
  )
})

t.test('the SSE-S3 key persists across restarts, is wrapped by a master key configured later, and re-wrapped by rotate-key (disk)', async (t) => {
  const first = await makeS3(t, {}, { store: 'disk' })
  await first.client.send(new CreateBucketCommand({ Bucket: 'persist' }))
  const body = pattern(150_000, 9)
  await first.client.send(new PutObjectCommand({ Bucket: 'persist', Key: 'a', Body: body, ServerSideEncryption: 'AES256' }))
  const existing = { ...first.tenant, credentials: first.credentials }
  await first.close()

  const second = await makeS3(t, {}, { dir: first.dir, storeEnv: first.storeEnv, existing })
  const got = await second.client.send(new GetObjectCommand({ Bucket: 'persist', Key: 'a' }))
  t.equal(got.ServerSideEncryption, 'AES256')
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(body), 'a restart reads it: the key persists')
  await second.close()

  const master = masterKey(t)
  const third = await makeS3(t, master.env, { dir: first.dir, storeEnv: first.storeEnv, existing })
  t.match(keyRow(third), { wrapped: 1, n: 76 }, 'the first start with a master key wrapped the SSE-S3 key')
  t.ok((await bodyOf(third.client.send(new GetObjectCommand({ Bucket: 'persist', Key: 'a' })))).equals(body), 'the object stays readable')
  const next = pattern(120_000, 10)
  const put = await third.client.send(new PutObjectCommand({ Bucket: 'persist', Key: 'b', Body: next, ServerSideEncryption: 'AES256' }))
  t.equal(put.ServerSideEncryption, 'AES256')
  const info = JSON.parse(third.core.db.pluck("SELECT object_info FROM files WHERE object_key = 'b' AND deleted_at IS NULL").get() as string)
  t.equal(info.sse, undefined, 'with a master key, an SSE-S3 object is sealed by the data dir, as before')
  await third.close()
  t.equal(await verifyCommand(['--json'], cliIo(first.dir, master.env).io), 0, 'coffer verify with the master key')

  const rotated = masterKey(t)
  t.equal(await rotateKeyCommand(['--new-key-file', rotated.file], cliIo(first.dir, master.env).io), 0)
  const fourth = await makeS3(t, rotated.env, { dir: first.dir, storeEnv: first.storeEnv, existing })
  t.ok((await bodyOf(fourth.client.send(new GetObjectCommand({ Bucket: 'persist', Key: 'a' })))).equals(body), 'after rotate-key, the old SSE-S3 object reads')
  t.ok((await bodyOf(fourth.client.send(new GetObjectCommand({ Bucket: 'persist', Key: 'b' })))).equals(next))
})

t.test('sealed multipart objects get the plaintext SHA-256 at Complete, as plain ones do: SSE-C (disk)', async (t) => {
  const ctx = await makeS3(t, {}, { store: 'disk' })
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'mpu' }))
  const key = randomBytes(32)
  const c = { SSECustomerAlgorithm: 'AES256', SSECustomerKey: key.toString('base64'), SSECustomerKeyMD5: createHash('md5').update(key).digest('base64') }
  const p1 = pattern(5 * 1024 * 1024, 11)
  const p2 = pattern(1234, 12)
  const mp = await client.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'c', ...c }))
  const u1 = await client.send(new UploadPartCommand({ Bucket: 'mpu', Key: 'c', UploadId: mp.UploadId, PartNumber: 1, Body: p1, ...c }))
  const u2 = await client.send(new UploadPartCommand({ Bucket: 'mpu', Key: 'c', UploadId: mp.UploadId, PartNumber: 2, Body: p2, ...c }))
  const parts = {
    Parts: [
      { PartNumber: 1, ETag: u1.ETag },
      { PartNumber: 2, ETag: u2.ETag },
    ],
  }
  await client.send(new CompleteMultipartUploadCommand({ Bucket: 'mpu', Key: 'c', UploadId: mp.UploadId, MultipartUpload: parts, ...c }))
  t.equal(await apiVersionSha(ctx, 'c'), sha(Buffer.concat([p1, p2])), "an SSE-C multipart object's sha256 is the plaintext's, not the sealed blob's")
  t.not(blobOf(ctx, 'c'), sha(Buffer.concat([p1, p2])), 'while its blob is the sealed bytes')
  // A plain multipart object, for comparison: its sha256 is its blob's, the plaintext's.
  const pm = await client.send(new CreateMultipartUploadCommand({ Bucket: 'mpu', Key: 'p' }))
  const v1 = await client.send(new UploadPartCommand({ Bucket: 'mpu', Key: 'p', UploadId: pm.UploadId, PartNumber: 1, Body: p1 }))
  await client.send(completeCommand('mpu', 'p', pm.UploadId, [[1, v1.ETag]]))
  t.equal(await apiVersionSha(ctx, 'p'), sha(p1))
})
