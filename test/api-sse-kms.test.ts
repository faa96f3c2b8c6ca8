// @suites: pg-all
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createHash, randomBytes } from 'node:crypto'
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, PutBucketEncryptionCommand } from '@aws-sdk/client-s3'
import { makeS3, storedBytes } from './s3-helper'
import { fileBytes, handshake, putContent, receivedAtLeast, tempDir, upload, type Handshake } from './helper'
import type { Test } from 'tap'

// The Storage Brain API's uploads follow the bucket's (workspace's) default encryption (#27): into
// an aws:kms default they are sealed under the key ring's key, as an S3 PutObject asking for
// nothing is, with or without an encrypted data dir; downloads and signed URLs decrypt.

function ringFile(t: Test, keys: Record<string, Buffer>): string {
  const file = path.join(tempDir(t, 'coffer-kms-'), 'kms.keys')
  fs.writeFileSync(
    file,
    Object.entries(keys)
      .map(([name, key]) => `${name}=${key.toString('hex')}\n`)
      .join(''),
    { mode: 0o600 },
  )
  return file
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex')

async function kmsBucket(t: Test, env: Record<string, string>, keyId: string | undefined) {
  const ctx = await makeS3(t, { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true', ...env }, { store: 'disk' })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'kms' }))
  await ctx.client.send(
    new PutBucketEncryptionCommand({
      Bucket: 'kms',
      ServerSideEncryptionConfiguration: {
        Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', ...(keyId ? { KMSMasterKeyID: keyId } : {}) } }],
      },
    }),
  )
  const wsId = ctx.core.db.pluck("SELECT id FROM workspaces WHERE slug = 'kms' AND deleted_at IS NULL").get() as string
  return { ctx, wsId }
}

t.test('an API upload into an aws:kms workspace is sealed under the ring key, without an encrypted data dir, and reads back everywhere', async (t) => {
  const ring = { 'ring-1': randomBytes(32), 'ring-2': randomBytes(32) }
  const { ctx, wsId } = await kmsBucket(t, { COFFER_KMS_KEYS_FILE: ringFile(t, ring), COFFER_KMS_DEFAULT_KEY: 'ring-1' }, 'ring-2')
  t.equal(ctx.core.config.encryptionKeyFile, undefined, 'no encrypted data dir')
  const { app, core, client } = ctx

  // Large (a blob file) and small (inline in the database), declared and not.
  const large = fileBytes('image/png', 300_000, 7)
  const small = fileBytes('image/png', 3_000, 8)
  const big = await upload(app, ctx.tenant.headers, { bytes: large, name: 'big.png', extra: { workspaceId: wsId, webhookUrl: 'http://127.0.0.1:9/hook' } })
  t.equal(big.put.statusCode, 200, big.put.body)
  t.equal(big.put.json().sizeBytes, large.length, 'the file reports the plaintext size')
  const tiny = await upload(app, ctx.tenant.headers, { bytes: small, name: 'tiny.png', declare: false, extra: { workspaceId: wsId } })
  t.equal(tiny.put.statusCode, 200, tiny.put.body)

  // What is stored: no plaintext anywhere, under the sealed bytes' hash, the key recorded.
  const stored = await storedBytes(ctx, { tmp: true })
  t.ok(stored.length >= 2)
  for (const [name, body] of [
    ['large', large],
    ['small', small],
  ] as const) {
    for (const at of [100, Math.floor(body.length / 2), body.length - 40]) {
      t.notOk(
        stored.some((b) => b.includes(body.subarray(at, at + 32))),
        `no plaintext of the ${name} file at ${at} in the blob store`,
      )
    }
  }
  const row = core.db.prepare('SELECT sha256, size_bytes, object_info FROM files WHERE id = ?').get(big.fileId) as {
    sha256: string
    size_bytes: number
    object_info: string
  }
  t.not(row.sha256, sha256(large), 'stored under the sealed bytes, not the plaintext hash')
  t.equal(row.size_bytes, large.length)
  t.match(JSON.parse(row.object_info), { sse: { type: 'KMS', keyId: 'ring-2', sha256: sha256(large) } })
  const blob = core.db.pluck('SELECT size_bytes FROM blobs WHERE sha256 = ?').get(row.sha256) as number
  t.ok(blob > large.length, 'the blob is the sealed form')

  // Quota: the plaintext's size, as for S3.
  const usage = (await app.inject({ url: `/api/v1/workspaces/${wsId}`, headers: ctx.tenant.headers })).json<{ usedBytes: number }>()
  t.equal(usage.usedBytes, large.length + small.length, 'the workspace is charged the plaintext sizes')

  // API downloads: whole, ranged, HEAD, signed URL; ETag = the plaintext's SHA-256.
  const whole = await app.inject({ url: `/api/v1/files/${big.fileId}/download`, headers: ctx.tenant.headers })
  t.equal(whole.statusCode, 200)
  t.ok(whole.rawPayload.equals(large), 'whole download decrypts')
  t.equal(whole.headers.etag, `"${sha256(large)}"`, "the ETag is the plaintext's SHA-256")
  t.equal(Number(whole.headers['content-length']), large.length)
  const ranged = await app.inject({ url: `/api/v1/files/${big.fileId}/download`, headers: { ...ctx.tenant.headers, range: 'bytes=70000-200000' } })
  t.equal(ranged.statusCode, 206)
  t.equal(ranged.headers['content-range'], `bytes 70000-200000/${large.length}`)
  t.ok(ranged.rawPayload.equals(large.subarray(70000, 200001)), 'ranged download decrypts')
  const tail = await app.inject({ url: `/api/v1/files/${tiny.fileId}/download`, headers: { ...ctx.tenant.headers, range: 'bytes=-10' } })
  t.ok(tail.rawPayload.equals(small.subarray(small.length - 10)), 'a suffix range of the inline one')
  const signed = (await app.inject({ url: `/api/v1/files/${big.fileId}/signed-url`, headers: ctx.tenant.headers })).json<{ url: string }>()
  const u = new URL(signed.url)
  const viaSigned = await app.inject({ url: `${u.pathname}${u.search}` })
  t.equal(viaSigned.statusCode, 200)
  t.ok(viaSigned.rawPayload.equals(large), 'the signed URL decrypts')
  const head = await app.inject({ method: 'HEAD', url: `/api/v1/files/${tiny.fileId}/download`, headers: ctx.tenant.headers })
  t.equal(head.headers.etag, `"${sha256(small)}"`)
  const notModified = await app.inject({
    url: `/api/v1/files/${big.fileId}/download`,
    headers: { ...ctx.tenant.headers, 'if-none-match': `"${sha256(large)}"` },
  })
  t.equal(notModified.statusCode, 304, 'If-None-Match with the plaintext hash')
  const versions = await app.inject({ url: `/api/v1/files/${big.fileId}/versions`, headers: ctx.tenant.headers })
  t.equal(versions.statusCode, 200)
  t.equal(versions.json().versions[0].sha256, sha256(large), "versions list the plaintext's SHA-256")

  // S3: HEAD and GET report aws:kms and the key id and read the bytes.
  const key = `${big.fileId}/big.png`
  const h = await client.send(new HeadObjectCommand({ Bucket: 'kms', Key: key }))
  t.equal(h.ServerSideEncryption, 'aws:kms')
  t.equal(h.SSEKMSKeyId, 'ring-2')
  t.equal(h.ContentLength, large.length)
  t.equal(h.ETag, `"${sha256(large)}"`, 'the S3 ETag is that of any API upload')
  t.equal(h.ContentType, 'image/png')
  const got = await client.send(new GetObjectCommand({ Bucket: 'kms', Key: key, Range: 'bytes=5-99999' }))
  t.equal(got.SSEKMSKeyId, 'ring-2')
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(large.subarray(5, 100000)), 'S3 GetObject decrypts')

  // The webhook as usual.
  const events = core.db.prepare('SELECT event, payload FROM outbox WHERE file_id = ?').all(big.fileId) as { event: string; payload: string }[]
  t.equal(events.length, 1)
  t.equal(events[0]!.event, 'file.uploaded')
  t.match(JSON.parse(events[0]!.payload), { event: 'file.uploaded', fileId: big.fileId, file: { sizeBytes: large.length, processingStatus: 'completed' } })

  // `coffer verify`'s check: the blob rehashes to its address.
  t.equal(await core.store.hash(row.sha256), row.sha256)
})

t.test('a bucket default of aws:kms without a key id takes the default key; a workspace without a default is untouched', async (t) => {
  const ring = { 'ring-1': randomBytes(32) }
  const { ctx, wsId } = await kmsBucket(t, { COFFER_KMS_KEYS_FILE: ringFile(t, ring), COFFER_KMS_DEFAULT_KEY: 'ring-1' }, undefined)
  const bytes = fileBytes('image/png', 100_000, 3)
  const r = await upload(ctx.app, ctx.tenant.headers, { bytes, extra: { workspaceId: wsId } })
  t.equal(r.put.statusCode, 200)
  const h = await ctx.client.send(new HeadObjectCommand({ Bucket: 'kms', Key: `${r.fileId}/photo.png` }))
  t.equal(h.ServerSideEncryption, 'aws:kms')
  t.equal(h.SSEKMSKeyId, 'ring-1')
  t.notOk(
    (await storedBytes(ctx, { tmp: true })).some((b) => b.includes(bytes.subarray(5000, 5032))),
    'no plaintext',
  )
  // The upload's checks still hold on the plaintext, and a refused PUT leaves nothing.
  const blobsBefore = ctx.core.db.pluck('SELECT count(*) FROM blobs').get()
  const refuse = async (declared: number, body: Buffer, status: number, code: string) => {
    const hs = await handshake(ctx.app, ctx.tenant.headers, { fileType: 'image/png', fileName: 'r.png', fileSizeBytes: declared, workspaceId: wsId })
    const put = await putContent(ctx.app, hs.json<Handshake>(), body)
    t.equal(put.statusCode, status, `${code}: ${put.body}`)
    t.equal(put.json().error.code, code)
  }
  await refuse(100_000, fileBytes('image/jpeg', 100_000), 400, 'INVALID_FILE_TYPE')
  await refuse(1_000, fileBytes('image/png', 90_000), 413, 'FILE_TOO_LARGE')
  await refuse(1_000, Buffer.alloc(0), 400, 'VALIDATION_ERROR')
  t.equal(ctx.core.db.pluck('SELECT count(*) FROM blobs').get(), blobsBefore, 'no blob from a refused PUT')
  t.same(fs.readdirSync(ctx.core.dataDir.tmp), [], 'nothing staged is left')

  // Outside any workspace, and in a workspace with no default: stored as before (the plaintext's hash).
  const plain = await upload(ctx.app, ctx.tenant.headers, { bytes })
  t.equal(ctx.core.db.pluck('SELECT sha256 FROM files WHERE id = ?').get(plain.fileId), sha256(bytes))
  t.equal(ctx.core.db.pluck('SELECT object_info FROM files WHERE id = ?').get(plain.fileId), null)
})

t.test('the default names a key the ring no longer holds: 409 at the handshake, and at a PUT granted before', async (t) => {
  const keep = randomBytes(32)
  const first = await kmsBucket(t, { COFFER_KMS_KEYS_FILE: ringFile(t, { keep, gone: randomBytes(32) }) }, 'gone')
  const hs = await handshake(first.ctx.app, first.ctx.tenant.headers, {
    fileType: 'image/png',
    fileName: 'later.png',
    fileSizeBytes: 5000,
    workspaceId: first.wsId,
  })
  t.equal(hs.statusCode, 200)
  const stored = await upload(first.ctx.app, first.ctx.tenant.headers, { bytes: fileBytes('image/png', 2000), extra: { workspaceId: first.wsId } })
  t.equal(stored.put.statusCode, 200)
  await first.ctx.close()

  // A restart with a ring without that key.
  const ctx = await makeS3(
    t,
    { COFFER_KMS_KEYS_FILE: ringFile(t, { keep }) },
    { dir: first.ctx.dir, storeEnv: first.ctx.storeEnv, existing: { ...first.ctx.tenant, credentials: first.ctx.credentials } },
  )
  const refused = await handshake(ctx.app, ctx.tenant.headers, { fileType: 'image/png', fileName: 'x.png', fileSizeBytes: 5000, workspaceId: first.wsId })
  t.equal(refused.statusCode, 409)
  t.match(refused.json(), { error: { code: 'CONFLICT', message: /"gone"/, details: { field: 'encryption', keyId: 'gone' } } })

  const put = await putContent(ctx.app, hs.json<Handshake>(), fileBytes('image/png', 5000))
  t.equal(put.statusCode, 409, 'the PUT granted before is refused')
  t.match(put.json(), { error: { code: 'CONFLICT', details: { field: 'encryption' } } })
  const file = await ctx.app.inject({ url: `/api/v1/files/${hs.json<Handshake>().fileId}`, headers: ctx.tenant.headers })
  t.equal(file.json().processingStatus, 'failed', 'the upload failed and released its reservation')
  const ws = (await ctx.app.inject({ url: `/api/v1/workspaces/${first.wsId}`, headers: ctx.tenant.headers })).json<{ usedBytes: number }>()
  t.equal(ws.usedBytes, 2000, 'only the file made before')
  t.equal(ctx.core.db.pluck('SELECT count(*) FROM blobs').get(), 1, 'nothing stored but the file made before')
  const unreadable = await ctx.app.inject({ url: `/api/v1/files/${stored.fileId}/download`, headers: ctx.tenant.headers })
  t.equal(unreadable.statusCode, 409, 'a file sealed under a key the ring lost: 409, not 500')
  t.match(unreadable.json(), { error: { code: 'CONFLICT', details: { field: 'encryption', keyId: 'gone' } } })
})

t.test('a workspace default of AES256 with an encrypted data dir: the API upload reports AES256 over S3', async (t) => {
  const file = path.join(tempDir(t, 'coffer-master-'), 'master.key')
  fs.writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600 })
  const ctx = await makeS3(t, { COFFER_ENCRYPTION_KEY_FILE: file }, { store: 'disk' })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'sse' }))
  await ctx.client.send(
    new PutBucketEncryptionCommand({
      Bucket: 'sse',
      ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
    }),
  )
  const wsId = ctx.core.db.pluck("SELECT id FROM workspaces WHERE slug = 'sse' AND deleted_at IS NULL").get() as string
  const bytes = fileBytes('image/png', 150_000, 9)
  const r = await upload(ctx.app, ctx.tenant.headers, { bytes, extra: { workspaceId: wsId } })
  t.equal(r.put.statusCode, 200)
  const h = await ctx.client.send(new HeadObjectCommand({ Bucket: 'sse', Key: `${r.fileId}/photo.png` }))
  t.equal(h.ServerSideEncryption, 'AES256')
  t.notOk(
    (await storedBytes(ctx, { tmp: true })).some((b) => b.includes(bytes.subarray(5000, 5032))),
    'sealed by the data dir',
  )
  const got = await ctx.app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: ctx.tenant.headers })
  t.ok(got.rawPayload.equals(bytes))
})

t.test('a PUT cut off mid-body: what was staged is sealed too, and nothing of it stays', async (t) => {
  const { ctx, wsId } = await kmsBucket(t, { COFFER_KMS_KEYS_FILE: ringFile(t, { 'ring-1': randomBytes(32) }) }, 'ring-1')
  await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const port = (ctx.app.server.address() as AddressInfo).port
  const hs = await handshake(ctx.app, ctx.tenant.headers, { fileType: 'image/png', fileName: 'cut.png', fileSizeBytes: 1_000_000, workspaceId: wsId })
  const h = hs.json<Handshake>()
  const bytes = fileBytes('image/png', 1_000_000, 11)
  const req = http.request({ host: '127.0.0.1', port, method: 'PUT', path: h.presignedUrl, headers: { 'content-type': 'image/png' } })
  req.on('error', () => undefined)
  req.write(bytes.subarray(0, 400_000))
  await receivedAtLeast(ctx.core.dataDir.tmp, 300_000)
  const staged = await storedBytes(ctx, { tmp: true })
  t.notOk(
    staged.some((b) => b.includes(bytes.subarray(200_000, 200_032))),
    'the staging file holds no plaintext',
  )
  req.destroy()
  for (let i = 0; i < 200; i++) {
    const status = (await ctx.app.inject({ url: `/api/v1/files/${h.fileId}`, headers: ctx.tenant.headers })).json().processingStatus
    if (status === 'failed') break
    await new Promise((r) => setTimeout(r, 25))
  }
  t.equal((await ctx.app.inject({ url: `/api/v1/files/${h.fileId}`, headers: ctx.tenant.headers })).json().processingStatus, 'failed')
  await ctx.core.uploads.settled()
  t.same(fs.readdirSync(ctx.core.dataDir.tmp), [], 'nothing staged is left')
  t.equal(ctx.core.db.pluck('SELECT count(*) FROM blobs').get(), 0, 'nothing stored')
  const ws = (await ctx.app.inject({ url: `/api/v1/workspaces/${wsId}`, headers: ctx.tenant.headers })).json<{ usedBytes: number }>()
  t.equal(ws.usedBytes, 0, 'the reservation is released')
})
