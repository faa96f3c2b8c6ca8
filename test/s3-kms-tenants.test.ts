// @suites: pg
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { createPresignedPost } from '@aws-sdk/s3-presigned-post'
import { CreateBucketCommand, GetObjectCommand, PutBucketEncryptionCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { bodyOf, createTenantWithS3, makeS3, s3Client, sendSigned, type S3Context } from './s3-helper'
import { fileBytes, handshake, tempDir } from './helper'
import { parseKmsKeys } from '../src/lib/kms-keys'
import type { Test } from 'tap'

// The SSE-KMS key ring per tenant: an entry may list the tenants that may seal objects under it;
// to any other tenant that key is exactly a key the ring does not hold, on every path a key id is
// taken (PutObject, CopyObject, CreateMultipartUpload, POST forms, PutBucketEncryption, the API's
// uploads into a bucket whose default names it); an entry without a list stays open to all.

const hex = () => randomBytes(32).toString('hex')

function ringFile(t: Test, lines: string[]): string {
  const file = path.join(tempDir(t, 'coffer-kms-'), 'kms.keys')
  fs.writeFileSync(file, lines.join('\n') + '\n', { mode: 0o600 })
  return file
}

/** An S3 error answer's status, code and message, the key name it echoes replaced by `<id>`. */
function answer(res: { status: number; body: string }, keyId: string) {
  const code = /<Code>([^<]*)<\/Code>/.exec(res.body)?.[1]
  const message = /<Message>([^<]*)<\/Message>/.exec(res.body)?.[1]
  return { status: res.status, code, message: message?.split(keyId).join('<id>') }
}

t.test('the ring file: a tenant list per key, in lines and in JSON; an empty or malformed list refused', async (t) => {
  const k = randomBytes(32)
  const lines = parseKmsKeys(`open=${k.toString('hex')}\nmine=${k.toString('base64')} tenants=t1,t2\n`)
  t.equal(lines.get('open')?.tenants, undefined, 'no list: every tenant')
  t.same([...lines.get('mine')!.tenants!], ['t1', 't2'])
  t.ok(lines.get('mine')!.key.equals(k))
  const json = parseKmsKeys(JSON.stringify({ open: k.toString('hex'), mine: { key: k.toString('hex'), tenants: ['t3'] } }))
  t.same([...json.get('mine')!.tenants!], ['t3'])
  t.equal(json.get('open')?.tenants, undefined)
  t.throws(() => parseKmsKeys(`a=${k.toString('hex')} tenants=`), /tenants of key "a" must be one or more tenant ids/)
  t.throws(() => parseKmsKeys(`a=${k.toString('hex')} owner=x`), /line 1: after the key only tenants=id,id may follow/)
  t.throws(() => parseKmsKeys(JSON.stringify({ a: { key: k.toString('hex'), tenants: [] } })), /one or more tenant ids/)
  t.throws(() => parseKmsKeys(JSON.stringify({ a: { key: k.toString('hex'), owner: 'x' } })), /unknown field "owner"/)
  t.throws(() => parseKmsKeys(JSON.stringify({ a: { key: k.toString('hex'), tenants: 't1' } })), /tenants must be a list/)
})

t.test("a tenant cannot seal under another tenant's key, and learns nothing of its name", async (t) => {
  // Before: a ring without lists, which every tenant may use (rings written before the lists).
  const keys = { shared: hex(), acme: hex(), zq: hex(), gone: hex() }
  const before = ringFile(t, [`shared=${keys.shared}`, `acme=${keys.acme}`, `zq=${keys.zq}`, `gone=${keys.gone}`])
  const first = await makeS3(t, { COFFER_KMS_KEYS_FILE: before, COFFER_KMS_DEFAULT_KEY: 'zq' }, { store: 'disk' })
  const other = await createTenantWithS3(first.app)
  const b1 = s3Client(first.endpoint, other.credentials)
  await b1.send(new CreateBucketCommand({ Bucket: 'b-acme' }))
  await b1.send(new CreateBucketCommand({ Bucket: 'b-gone' }))
  for (const [bucket, key] of [
    ['b-acme', 'acme'],
    ['b-gone', 'gone'],
  ]) {
    await b1.send(
      new PutBucketEncryptionCommand({
        Bucket: bucket,
        ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: key } }] },
      }),
    )
  }
  const old = await b1.send(new PutObjectCommand({ Bucket: 'b-acme', Key: 'old', Body: 'sealed before the list' }))
  t.equal(old.SSEKMSKeyId, 'acme', 'an entry without a tenant list is usable by every tenant')
  b1.destroy()
  await first.close()

  // After: `acme` and the default key are the first tenant's only; `gone` is gone.
  const owner = first.tenant
  const after = ringFile(t, [`shared=${keys.shared}`, `acme=${keys.acme} tenants=${owner.id}`, `zq=${keys.zq} tenants=${owner.id}`])
  const ctx = await makeS3(
    t,
    { COFFER_KMS_KEYS_FILE: after, COFFER_KMS_DEFAULT_KEY: 'zq' },
    { dir: first.dir, storeEnv: first.storeEnv, existing: { ...owner, credentials: first.credentials } },
  )
  const b: Pick<S3Context, 'credentials' | 'endpoint'> = { credentials: other.credentials, endpoint: ctx.endpoint }
  const bClient = s3Client(ctx.endpoint, other.credentials)
  t.teardown(() => bClient.destroy())

  // The owner of `acme` seals under it; the default key is its default.
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'a-bucket' }))
  const mine = await ctx.client.send(new PutObjectCommand({ Bucket: 'a-bucket', Key: 'k', Body: 'x', ServerSideEncryption: 'aws:kms', SSEKMSKeyId: 'acme' }))
  t.equal(mine.SSEKMSKeyId, 'acme')
  const byDefault = await ctx.client.send(new PutObjectCommand({ Bucket: 'a-bucket', Key: 'd', Body: 'x', ServerSideEncryption: 'aws:kms' }))
  t.equal(byDefault.SSEKMSKeyId, 'zq')

  // The other tenant: `acme` answers exactly as a name the ring does not hold, on every write path.
  await bClient.send(new CreateBucketCommand({ Bucket: 'b-new' }))
  const put = (keyId: string) =>
    sendSigned(b, {
      method: 'PUT',
      path: '/b-new/o',
      headers: { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': keyId },
      payload: 'data',
    })
  const copy = (keyId: string) =>
    sendSigned(b, {
      method: 'PUT',
      path: '/b-new/copy',
      headers: {
        'x-amz-copy-source': '/b-acme/old',
        'x-amz-server-side-encryption': 'aws:kms',
        'x-amz-server-side-encryption-aws-kms-key-id': keyId,
      },
    })
  const multipart = (keyId: string) =>
    sendSigned(b, {
      method: 'POST',
      path: '/b-new/mp',
      query: { uploads: '' },
      headers: { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': keyId },
    })
  const bucketDefault = (keyId: string) => {
    const body = `<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>aws:kms</SSEAlgorithm><KMSMasterKeyID>${keyId}</KMSMasterKeyID></ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>`
    return sendSigned(b, { method: 'PUT', path: '/b-new', query: { encryption: '' }, payload: body })
  }
  const form = async (keyId: string) => {
    const fields = { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': keyId }
    const p = await createPresignedPost(bClient, {
      Bucket: 'b-new',
      Key: 'form',
      Fields: fields,
      Conditions: Object.entries(fields).map(([k, v]) => ['eq', `$${k}`, v]) as never,
      Expires: 600,
    })
    const data = new FormData()
    for (const [k, v] of Object.entries(p.fields)) data.append(k, v)
    data.append('file', new Blob(['form body']), 'f.txt')
    const res = await fetch(`${ctx.endpoint}/b-new`, { method: 'POST', body: data })
    return { status: res.status, body: await res.text() }
  }
  const paths = { PutObject: put, CopyObject: copy, CreateMultipartUpload: multipart, PutBucketEncryption: bucketDefault, 'POST form': form }
  for (const [name, send] of Object.entries(paths)) {
    const forbidden = await send('acme')
    const unknown = await send('no-such-key')
    t.equal(forbidden.status, 400, `${name}: another tenant's key is refused`)
    t.same(answer(forbidden, 'acme'), answer(unknown, 'no-such-key'), `${name}: the same answer as an unknown key`)
    t.match(answer(forbidden, 'acme'), { code: 'InvalidArgument' }, name)
    const shared = await send('shared')
    t.ok(
      shared.status === 200 || shared.status === 204,
      `${name}: a key without a tenant list is still the other tenant's to use (${shared.status} ${shared.body})`,
    )
  }
  const none = await bClient.send(new GetObjectCommand({ Bucket: 'b-new', Key: 'o' }))
  t.equal(none.SSEKMSKeyId, 'shared', 'what was stored is under the shared key')
  const noAcme = ctx.core.db
    .pluck("SELECT count(*) FROM files WHERE object_info LIKE '%\"acme\"%' AND workspace_id IN (SELECT id FROM workspaces WHERE slug = 'b-new')")
    .get()
  t.equal(Number(noAcme), 0, "nothing of the other tenant's bucket is sealed under acme")

  // The default key the other tenant may not use: as a server without a default key.
  const noDefault = await sendSigned(b, { method: 'PUT', path: '/b-new/d', headers: { 'x-amz-server-side-encryption': 'aws:kms' }, payload: 'x' })
  t.equal(noDefault.status, 400)
  t.match(noDefault.body, /<Code>InvalidArgument<\/Code><Message>Server Side Encryption with KMS needs a key id: none was given and Coffer has no default key/)
  t.notMatch(noDefault.body, /zq/, 'the default key is not named')

  // A bucket default set before the list: the API's upload is refused as for a key the ring lost.
  const wsOf = (slug: string) => ctx.core.db.pluck('SELECT id FROM workspaces WHERE slug = ? AND deleted_at IS NULL').get(slug) as string
  const apiUpload = (slug: string) =>
    handshake(ctx.app, other.headers, { fileType: 'image/png', fileName: 'x.png', fileSizeBytes: 5000, workspaceId: wsOf(slug) })
  const [forbidden, lost] = [await apiUpload('b-acme'), await apiUpload('b-gone')]
  t.equal(forbidden.statusCode, 409)
  const strip = (r: typeof forbidden, id: string) => r.body.split(id).join('<id>')
  t.same(
    strip(forbidden, 'acme'),
    strip(lost, 'gone'),
    "the API answers a key the tenant may not use as a key the ring lost (the workspace's own key name aside)",
  )
  // And S3's PutObject into that bucket asking for nothing.
  const s3Default = await sendSigned(b, { method: 'PUT', path: '/b-acme/n', payload: 'x' })
  const s3Lost = await sendSigned(b, { method: 'PUT', path: '/b-gone/n', payload: 'x' })
  t.equal(s3Default.status, 400)
  t.same(answer(s3Default, 'acme'), answer(s3Lost, 'gone'))

  // An object sealed under the key before the list still opens: the list governs new objects.
  t.equal((await bodyOf(bClient.send(new GetObjectCommand({ Bucket: 'b-acme', Key: 'old' })))).toString(), 'sealed before the list')

  // The API's uploads into a bucket of the owner whose default is its own restricted key: sealed.
  await ctx.client.send(
    new PutBucketEncryptionCommand({
      Bucket: 'a-bucket',
      ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: 'acme' } }] },
    }),
  )
  const hs = await handshake(ctx.app, owner.headers, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: 3000, workspaceId: wsOf('a-bucket') })
  t.equal(hs.statusCode, 200, hs.body)
  const putRes = await ctx.app.inject({
    method: 'PUT',
    url: hs.json().presignedUrl,
    headers: { 'content-type': 'image/png' },
    payload: fileBytes('image/png', 3000),
  })
  t.equal(putRes.statusCode, 200, putRes.body)
})
