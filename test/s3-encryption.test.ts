// @suites: pg-all
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteBucketEncryptionCommand,
  GetBucketEncryptionCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketEncryptionCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3'
import { bodyOf, makeS3, pattern, s3Error, sendSigned as send, sseS3Multipart, storedBytes } from './s3-helper'
import { databaseEnvOf, createTenant, fileBytes, makeApp, purgeStoredBlobs, tempDir, testStoreEnv, upload } from './helper'
import { migrateBlobsCommand } from '../src/cli/migrate-blobs'
import { fixtureEnv } from './s3/fixture'
import type { Test } from 'tap'

function keyEnv(t: Test): Record<string, string> {
  const file = path.join(tempDir(t, 'coffer-key-'), 'master.key')
  fs.writeFileSync(file, randomBytes(32).toString('base64'), { mode: 0o600 })
  return { COFFER_ENCRYPTION_KEY_FILE: file }
}

for (const store of ['disk', 's3'] as const) {
  const unavailable = store === 's3' ? fixtureEnv() : undefined
  const skip = unavailable && 'unavailable' in unavailable ? `the Ceph fixture is unavailable: ${unavailable.unavailable}` : false
  t.test(`SSE-S3 on an encrypted data dir (${store} store): accepted, reported, and no plaintext in the store (#27)`, { skip }, async (t) => {
    const ctx = await makeS3(t, keyEnv(t), { store })
    const { client } = ctx
    await client.send(new CreateBucketCommand({ Bucket: 'sse' }))
    const body = pattern(300_000, 1)
    const put = await client.send(new PutObjectCommand({ Bucket: 'sse', Key: 'a', Body: body, ServerSideEncryption: 'AES256' }))
    t.equal(put.ServerSideEncryption, 'AES256', 'PutObject reports it')
    const plainPut = await client.send(new PutObjectCommand({ Bucket: 'sse', Key: 'b', Body: pattern(5000, 2) }))
    t.equal(plainPut.ServerSideEncryption, 'AES256', 'every object of an encrypted data dir is encrypted, asked or not')
    const got = await client.send(new GetObjectCommand({ Bucket: 'sse', Key: 'a' }))
    t.equal(got.ServerSideEncryption, 'AES256', 'GetObject reports it')
    t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(body))
    t.equal((await client.send(new HeadObjectCommand({ Bucket: 'sse', Key: 'a' }))).ServerSideEncryption, 'AES256', 'HeadObject reports it')
    const ranged = await bodyOf(client.send(new GetObjectCommand({ Bucket: 'sse', Key: 'a', Range: 'bytes=70000-200000' })))
    t.ok(ranged.equals(body.subarray(70000, 200001)), 'a ranged GET')
    const copy = await client.send(new CopyObjectCommand({ Bucket: 'sse', Key: 'c', CopySource: 'sse/a', ServerSideEncryption: 'AES256' }))
    t.equal(copy.ServerSideEncryption, 'AES256', 'CopyObject reports it')
    // Multipart.
    const { parts } = await sseS3Multipart(t, client, 'sse', 'mp')
    // What AWS refuses.
    const getSse = await send(ctx, { method: 'GET', path: '/sse/a', headers: { 'x-amz-server-side-encryption': 'AES256' } })
    t.equal(getSse.status, 400, 'GetObject with x-amz-server-side-encryption is 400')
    t.match(getSse.body, '<Code>InvalidArgument</Code>')
    const headSse = await send(ctx, { method: 'HEAD', path: '/sse/a', headers: { 'x-amz-server-side-encryption': 'AES256' } })
    t.equal(headSse.status, 400, 'HeadObject with x-amz-server-side-encryption is 400')
    const bogus = await send(ctx, { method: 'PUT', path: '/sse/x', headers: { 'x-amz-server-side-encryption': 'AES128' }, payload: 'x' })
    t.equal(bogus.status, 400, 'an unknown algorithm is 400')
    t.match(bogus.body, '<Code>InvalidArgument</Code>')
    const customer = {
      'x-amz-server-side-encryption-customer-algorithm': 'AES256',
      'x-amz-server-side-encryption-customer-key': randomBytes(32).toString('base64'),
    }
    const conflicts: Record<string, string>[] = [
      { 'x-amz-server-side-encryption': 'AES256', ...customer },
      { 'x-amz-server-side-encryption': 'aws:kms', ...customer },
      { 'x-amz-server-side-encryption': 'AES256', 'x-amz-server-side-encryption-aws-kms-key-id': 'k1' },
    ]
    for (const conflict of conflicts) {
      const res = await send(ctx, { method: 'PUT', path: '/sse/conflict', headers: conflict, payload: 'x' })
      t.equal(res.status, 400, `two encryptions at once is 400: ${Object.keys(conflict).join(', ')}`)
      t.match(res.body, '<Code>InvalidArgument</Code>')
    }
    // Nothing of any object is in the store in the clear.
    const probes = [body, pattern(5000, 2), ...parts].map((b) => b.subarray(1000, 1032))
    const stored = await storedBytes(ctx)
    t.equal(stored.length, 3, `${stored.length} stored blobs read directly (a and its copy are one; the parts went with the completion)`)
    t.same(stored.filter((s) => probes.some((p) => s.includes(p))).length, 0, 'no stored blob holds plaintext')
  })
}

t.test('bucket default encryption: Put/Get/DeleteBucketEncryption (#27)', async (t) => {
  const ctx = await makeS3(t, keyEnv(t))
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'enc' }))
  t.match(await s3Error(client.send(new GetBucketEncryptionCommand({ Bucket: 'enc' }))), {
    name: 'ServerSideEncryptionConfigurationNotFoundError',
    status: 404,
  })
  const rules = { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' as const } }] }
  await client.send(new PutBucketEncryptionCommand({ Bucket: 'enc', ServerSideEncryptionConfiguration: rules }))
  const got = await client.send(new GetBucketEncryptionCommand({ Bucket: 'enc' }))
  t.equal(got.ServerSideEncryptionConfiguration?.Rules?.[0]?.ApplyServerSideEncryptionByDefault?.SSEAlgorithm, 'AES256')
  const put = await client.send(new PutObjectCommand({ Bucket: 'enc', Key: 'k', Body: 'x' }))
  t.equal(put.ServerSideEncryption, 'AES256', 'an upload into it is encrypted')
  const kms = { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms' as const, KMSMasterKeyID: 'k1' } }] }
  t.match(
    await s3Error(client.send(new PutBucketEncryptionCommand({ Bucket: 'enc', ServerSideEncryptionConfiguration: kms }))),
    { name: 'InvalidArgument', status: 400 },
    'aws:kms with a key the key ring does not hold',
  )
  const bad = await send(ctx, {
    method: 'PUT',
    path: '/enc',
    query: { encryption: '' },
    payload:
      '<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>ROT13</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>',
  })
  t.equal(bad.status, 400)
  t.match(bad.body, '<Code>MalformedXML</Code>')
  await client.send(new DeleteBucketEncryptionCommand({ Bucket: 'enc' }))
  t.match(await s3Error(client.send(new GetBucketEncryptionCommand({ Bucket: 'enc' }))), { status: 404 })
  t.match(await s3Error(client.send(new GetBucketEncryptionCommand({ Bucket: 'nope' }))), { name: 'NoSuchBucket' })
})

t.test('without an encrypted data dir, SSE-S3 is taken and an object asking for nothing claims nothing (#27)', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'plain' }))
  const put = await send(ctx, { method: 'PUT', path: '/plain/k', headers: { 'x-amz-server-side-encryption': 'AES256' }, payload: 'x' })
  t.equal(put.status, 200, 'sealed under the SSE-S3 key (test/s3-sse-s3.test.ts), not 501')
  t.equal(put.headers['x-amz-server-side-encryption'], 'AES256')
  const rules = { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' as const } }] }
  await client.send(new PutBucketEncryptionCommand({ Bucket: 'plain', ServerSideEncryptionConfiguration: rules }))
  await client.send(new CreateBucketCommand({ Bucket: 'other' }))
  const plain = await client.send(new PutObjectCommand({ Bucket: 'other', Key: 'k', Body: 'x' }))
  t.equal(plain.ServerSideEncryption, undefined, 'nothing reports encryption')
})

t.test('coffer migrate-blobs on an encrypted data dir seals the target too: the bucket holds no plaintext (#27)', { skip: cephSkip() }, async (t) => {
  const key = keyEnv(t)
  // On the disk store whatever the run's COFFER_TEST_BLOB_STORE: the content moves from there to the bucket.
  const disk = await makeApp(t, { ...key, COFFER_BLOB_STORE: 'disk' })
  const tenant = await createTenant(disk.app)
  const contents = [fileBytes('image/png', 3000, 21), fileBytes('image/png', 300_000, 22)]
  const ids: string[] = []
  for (const bytes of contents) ids.push((await upload(disk.app, tenant.headers, { bytes })).fileId)
  const s3env = testStoreEnv('s3')
  const out: string[] = []
  const err: string[] = []
  const sink = (arr: string[]) => ({ write: (s: string) => (arr.push(s), true) }) as unknown as NodeJS.WritableStream
  const code = await migrateBlobsCommand(['--to', 's3', '--json'], {
    env: { ...s3env, ...key, COFFER_DATA_DIR: disk.dir, ...databaseEnvOf(disk.dir) },
    stdout: sink(out),
    stderr: sink(err),
  })
  t.equal(code, 0, `coffer migrate-blobs exits 0 ${err.join('').trim()}`)
  t.match(JSON.parse(out.join('')), { checked: 2, copied: 2, corrupt: [] })
  await disk.app.close()
  const onS3 = await makeS3(t, key, { dir: disk.dir, storeEnv: s3env, existing: undefined })
  for (const [i, id] of ids.entries()) {
    const res = await onS3.app.inject({ url: `/api/v1/files/${id}/download`, headers: tenant.headers })
    t.ok(res.rawPayload.equals(contents[i]!), `file ${i} reads from the bucket`)
  }
  const stored = await storedBytes(onS3)
  t.equal(stored.length, 2, 'two objects in the bucket')
  t.equal(stored.filter((s) => contents.some((c) => s.includes(c.subarray(500, 532)))).length, 0, 'none holds plaintext')
  await purgeStoredBlobs(s3env, disk.dir)
})

function cephSkip(): string | false {
  const f = fixtureEnv()
  return 'unavailable' in f ? `the Ceph fixture is unavailable: ${f.unavailable}` : false
}
