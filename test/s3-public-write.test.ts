// @suites: pg-all
// public-read-write and the other writes by anyone but the owner (#26): anonymous and cross-tenant
// PutObject / DeleteObject / POST Object into a bucket that grants them, run as the owner's
// (its quota, its webhooks), under the public access block; a plain bucket name across tenants
// in COFFER_S3_ANONYMOUS_BUCKET_NAMES=unique mode answers as AWS (403 on another owner's private
// bucket), and stays 404 outside it.
import t from 'tap'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketAclCommand,
  GetBucketPolicyStatusCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListObjectsCommand,
  PutBucketAclCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  PutPublicAccessBlockCommand,
  S3Client,
} from '@aws-sdk/client-s3'
import { admin } from './helper'
import { createTenantWithS3, makeS3, s3Client, s3Error, type S3Context } from './s3-helper'

/** The AWS SDK v3 with no credentials: its requests go unsigned, as a browser's or curl's. */
function anonymousClient(endpoint: string): S3Client {
  return new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    // Credentials the SDK insists on having, which the no-op signer never uses.
    credentials: { accessKeyId: 'unused', secretAccessKey: 'unused' },
    signer: { sign: (request) => Promise.resolve(request) },
  })
}

async function used(ctx: S3Context, tenantId: string): Promise<number> {
  const info = await ctx.app.inject({ method: 'GET', url: `/api/v1/admin/tenants/${tenantId}`, headers: admin })
  return (info.json() as { usedBytes: number }).usedBytes
}

const body = async (p: Promise<{ Body?: { transformToString(): Promise<string> } }>) => (await p).Body!.transformToString()

t.test('public-read-write: anyone writes and deletes the bucket’s objects, as the owner’s (quota, webhooks)', async (t) => {
  const ctx = await makeS3(t, {}, { quotaBytes: 1000 })
  const { client, tenant, endpoint, core } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'dropbox', ACL: 'public-read-write' }))
  core.db.prepare("UPDATE workspaces SET webhook_url = 'http://127.0.0.1:9/hook' WHERE slug = ?").run('dropbox')
  const acl = await client.send(new GetBucketAclCommand({ Bucket: 'dropbox' }))
  t.same(
    acl.Grants!.map((g) => `${g.Grantee!.URI ?? g.Grantee!.ID}:${g.Permission}`),
    ['http://acs.amazonaws.com/groups/global/AllUsers:READ', 'http://acs.amazonaws.com/groups/global/AllUsers:WRITE', `${tenant.id}:FULL_CONTROL`],
  )
  const Bucket = `${tenant.id}:dropbox`
  const anon = anonymousClient(endpoint)
  t.teardown(() => anon.destroy())
  // The SDK's default upload (an unsigned aws-chunked body with a CRC32 trailer) is decoded, not stored as framed.
  await anon.send(new PutObjectCommand({ Bucket, Key: 'from-anyone.txt', Body: 'anonymous bytes' }))
  t.equal(await body(client.send(new GetObjectCommand({ Bucket: 'dropbox', Key: 'from-anyone.txt' }))), 'anonymous bytes')
  t.equal(await used(ctx, tenant.id), 'anonymous bytes'.length, "counted against the owner's quota")
  const events = core.db.prepare<[], { event: string }>("SELECT event FROM outbox WHERE event = 'file.uploaded'").all()
  t.equal(events.length, 1, "the owner's webhook hears of it, as of any write")
  // Over the owner's quota: refused, nothing stored.
  t.same(await s3Error(anon.send(new PutObjectCommand({ Bucket, Key: 'big', Body: Buffer.alloc(2000) }))), { name: 'QuotaExceeded', status: 403 })
  // Reads are the bucket's READ (a listing) and each object's own ACL: an anonymous write is private by default.
  t.same(
    ((await anon.send(new ListObjectsCommand({ Bucket }))).Contents ?? []).map((o) => o.Key),
    ['from-anyone.txt'],
  )
  t.same(await s3Error(anon.send(new GetObjectCommand({ Bucket, Key: 'from-anyone.txt' }))), { name: 'AccessDenied', status: 403 })
  await anon.send(new PutObjectCommand({ Bucket, Key: 'shown.txt', Body: 'shown', ACL: 'public-read' }))
  t.equal(await body(anon.send(new GetObjectCommand({ Bucket, Key: 'shown.txt' }))), 'shown')
  await anon.send(new DeleteObjectCommand({ Bucket, Key: 'from-anyone.txt' }))
  t.equal(await used(ctx, tenant.id), 'shown'.length, 'the delete released its bytes')
  // Another tenant writes too (AllUsers includes every credential), by the qualified name.
  const other = await createTenantWithS3(ctx.app)
  const otherClient = s3Client(endpoint, other.credentials)
  t.teardown(() => otherClient.destroy())
  await otherClient.send(new PutObjectCommand({ Bucket, Key: 'from-other.txt', Body: 'other' }))
  t.equal(await used(ctx, other.id), 0, "nothing counted against the writer's own quota")
  // A copy reads its source as the requester: a private object of the owner is not copied out of reach.
  await client.send(new PutObjectCommand({ Bucket: 'dropbox', Key: 'private.txt', Body: 'secret' }))
  t.same(await s3Error(anon.send(new CopyObjectCommand({ Bucket, Key: 'leak.txt', CopySource: `${Bucket}/private.txt` }))), {
    name: 'AccessDenied',
    status: 403,
  })
  // A batch delete would need a decision per key (a policy may deny some): not built for others, nothing deleted.
  t.same(await s3Error(anon.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: [{ Key: 'shown.txt' }] } }))), {
    name: 'NotImplemented',
    status: 501,
  })
  t.equal(await body(client.send(new GetObjectCommand({ Bucket: 'dropbox', Key: 'shown.txt' }))), 'shown')
  // Bucket configuration stays the owner's.
  t.same(await s3Error(anon.send(new PutBucketAclCommand({ Bucket, ACL: 'public-read' }))), { name: 'AccessDenied', status: 403 })
  // Back to private: anonymous writes are refused again.
  await client.send(new PutBucketAclCommand({ Bucket: 'dropbox', ACL: 'private' }))
  t.same(await s3Error(anon.send(new PutObjectCommand({ Bucket, Key: 'late', Body: 'x' }))), { name: 'AccessDenied', status: 403 })
})

t.test('public-read-write under the public access block: BlockPublicAcls refuses it, IgnorePublicAcls ignores it', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'guarded' }))
  const anon = anonymousClient(endpoint)
  t.teardown(() => anon.destroy())
  const Bucket = `${tenant.id}:guarded`
  const block = (cfg: Record<string, boolean>) => client.send(new PutPublicAccessBlockCommand({ Bucket: 'guarded', PublicAccessBlockConfiguration: cfg }))
  await block({ BlockPublicAcls: true })
  t.same(await s3Error(client.send(new PutBucketAclCommand({ Bucket: 'guarded', ACL: 'public-read-write' }))), { name: 'AccessDenied', status: 403 })
  await block({})
  await client.send(new PutBucketAclCommand({ Bucket: 'guarded', ACL: 'public-read-write' }))
  await anon.send(new PutObjectCommand({ Bucket, Key: 'a', Body: 'a' }))
  // A write by anyone naming a public ACL is refused under BlockPublicAcls, as the owner's would be.
  await block({ BlockPublicAcls: true })
  t.same(await s3Error(anon.send(new PutObjectCommand({ Bucket, Key: 'b', Body: 'b', ACL: 'public-read' }))), { name: 'AccessDenied', status: 403 })
  await anon.send(new PutObjectCommand({ Bucket, Key: 'b', Body: 'b' }))
  await block({ IgnorePublicAcls: true })
  t.same(await s3Error(anon.send(new PutObjectCommand({ Bucket, Key: 'c', Body: 'c' }))), { name: 'AccessDenied', status: 403 })
  t.same(await s3Error(anon.send(new DeleteObjectCommand({ Bucket, Key: 'a' }))), { name: 'AccessDenied', status: 403 })
  t.equal(await body(client.send(new GetObjectCommand({ Bucket: 'guarded', Key: 'a' }))), 'a', 'nothing was deleted')

  // COFFER_S3_BLOCK_PUBLIC_ACCESS: the server-wide block refuses it everywhere.
  const blocked = await makeS3(t, { COFFER_S3_BLOCK_PUBLIC_ACCESS: 'true' })
  t.same(await s3Error(blocked.client.send(new CreateBucketCommand({ Bucket: 'never', ACL: 'public-read-write' }))), {
    name: 'AccessDenied',
    status: 403,
  })
})

t.test('an anonymous POST form (no policy) into a public-read-write bucket is stored; into a private one refused', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'forms', ACL: 'public-read-write' }))
  await client.send(new CreateBucketCommand({ Bucket: 'closed' }))
  const post = async (bucket: string) => {
    const form = new FormData()
    form.append('key', 'posted-${filename}')
    form.append('Content-Type', 'text/plain')
    form.append('file', new Blob(['form bytes']), 'a.txt')
    const res = await fetch(`${endpoint}/${tenant.id}:${bucket}`, { method: 'POST', body: form })
    return { status: res.status, body: await res.text() }
  }
  t.equal((await post('forms')).status, 204)
  const got = await client.send(new GetObjectCommand({ Bucket: 'forms', Key: 'posted-a.txt' }))
  t.equal(got.ContentType, 'text/plain')
  t.equal(await got.Body!.transformToString(), 'form bytes')
  const refused = await post('closed')
  t.equal(refused.status, 403)
  t.match(refused.body, /<Code>AccessDenied<\/Code>/)
})

t.test('unique mode: a plain name of another tenant’s bucket is 403 where private, and what its ACLs grant', async (t) => {
  const ctx = await makeS3(t, { COFFER_S3_ANONYMOUS_BUCKET_NAMES: 'unique' })
  const { client, endpoint } = ctx
  const other = await createTenantWithS3(ctx.app)
  const alt = s3Client(endpoint, other.credentials)
  t.teardown(() => alt.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'mains-private' }))
  await client.send(new PutObjectCommand({ Bucket: 'mains-private', Key: 'k', Body: 'main' }))
  const refused = [
    ['GetObject', () => alt.send(new GetObjectCommand({ Bucket: 'mains-private', Key: 'k' }))],
    ['GetObject of a missing key', () => alt.send(new GetObjectCommand({ Bucket: 'mains-private', Key: 'missing' }))],
    ['ListObjects', () => alt.send(new ListObjectsCommand({ Bucket: 'mains-private' }))],
    ['PutObject', () => alt.send(new PutObjectCommand({ Bucket: 'mains-private', Key: 'k', Body: 'overwrite' }))],
    ['DeleteObject', () => alt.send(new DeleteObjectCommand({ Bucket: 'mains-private', Key: 'k' }))],
  ] as const
  for (const [what, call] of refused) t.same(await s3Error(call()), { name: 'AccessDenied', status: 403 }, what)
  t.equal(await body(client.send(new GetObjectCommand({ Bucket: 'mains-private', Key: 'k' }))), 'main', 'untouched')
  // What its ACLs grant, by the plain name.
  await client.send(new PutBucketAclCommand({ Bucket: 'mains-private', ACL: 'public-read-write' }))
  await alt.send(new PutObjectCommand({ Bucket: 'mains-private', Key: 'new', Body: 'from alt' }))
  t.same(
    ((await alt.send(new ListObjectsCommand({ Bucket: 'mains-private' }))).Contents ?? []).map((o) => o.Key),
    ['k', 'new'],
  )
  // RGW's `:<bucket>` (the default tenant's bucket) is the plain name.
  t.same(((await alt.send(new ListObjectsCommand({ Bucket: ':mains-private' }))).Contents ?? []).length, 2)
  // The requester's own bucket of that name wins; creating it makes the name ambiguous for everyone else.
  await alt.send(new CreateBucketCommand({ Bucket: 'mains-private' }))
  t.same((await alt.send(new ListObjectsCommand({ Bucket: 'mains-private' }))).Contents ?? [], [], "alt's own, empty")
  t.same(((await client.send(new ListObjectsCommand({ Bucket: 'mains-private' }))).Contents ?? []).length, 2, "main's own")
})

t.test('outside unique mode a plain name never reaches another tenant’s bucket: 404', async (t) => {
  const ctx = await makeS3(t)
  const { client, endpoint } = ctx
  const other = await createTenantWithS3(ctx.app)
  const alt = s3Client(endpoint, other.credentials)
  t.teardown(() => alt.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'mine', ACL: 'public-read-write' }))
  t.same(await s3Error(alt.send(new ListObjectsCommand({ Bucket: 'mine' }))), { name: 'NoSuchBucket', status: 404 })
  t.same(await s3Error(alt.send(new PutObjectCommand({ Bucket: 'mine', Key: 'k', Body: 'x' }))), { name: 'NoSuchBucket', status: 404 })
})

t.test('anonymous ListBuckets is an empty list (as Ceph RGW); a re-create asking for another ACL is BucketAlreadyExists', async (t) => {
  const ctx = await makeS3(t)
  const { client, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'listed' }))
  const anon = anonymousClient(endpoint)
  t.teardown(() => anon.destroy())
  t.same((await anon.send(new ListBucketsCommand({}))).Buckets ?? [], [])
  await client.send(new CreateBucketCommand({ Bucket: 'listed' }))
  t.same(await s3Error(client.send(new CreateBucketCommand({ Bucket: 'listed', ACL: 'public-read' }))), { name: 'BucketAlreadyExists', status: 409 })
  await client.send(new CreateBucketCommand({ Bucket: 'was-public', ACL: 'public-read' }))
  t.same(await s3Error(client.send(new CreateBucketCommand({ Bucket: 'was-public' }))), { name: 'BucketAlreadyExists', status: 409 })
  await client.send(new CreateBucketCommand({ Bucket: 'was-public', ACL: 'public-read' }))
})

t.test('policy condition keys: s3:ExistingObjectTag/<key>, s3:x-amz-metadata-directive, s3:x-amz-copy-source', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'tagged' }))
  for (const key of ['public', 'private', 'untagged']) await client.send(new PutObjectCommand({ Bucket: 'tagged', Key: key, Body: key }))
  await client.send(new PutObjectTaggingCommand({ Bucket: 'tagged', Key: 'public', Tagging: { TagSet: [{ Key: 'Security', Value: 'public' }] } }))
  await client.send(new PutObjectTaggingCommand({ Bucket: 'tagged', Key: 'private', Tagging: { TagSet: [{ Key: 'Security', Value: 'private' }] } }))
  const policy = (statement: Record<string, unknown>) =>
    client.send(new PutBucketPolicyCommand({ Bucket: 'tagged', Policy: JSON.stringify({ Version: '2012-10-17', Statement: [statement] }) }))
  await policy({
    Effect: 'Allow',
    Principal: '*',
    Action: 's3:GetObject',
    Resource: 'arn:aws:s3:::tagged/*',
    Condition: { StringEquals: { 's3:ExistingObjectTag/security': 'public' } },
  })
  const url = (key: string) => `${endpoint}/${tenant.id}:tagged/${key}`
  t.equal(await (await fetch(url('public'))).text(), 'public')
  t.equal((await fetch(url('private'))).status, 403)
  t.equal((await fetch(url('untagged'))).status, 403)

  // A copy into the bucket granted only with the metadata directive COPY; its source named by s3:x-amz-copy-source.
  await policy({
    Effect: 'Allow',
    Principal: '*',
    Action: ['s3:PutObject', 's3:GetObject'],
    Resource: 'arn:aws:s3:::tagged/*',
    Condition: { StringEquals: { 's3:x-amz-metadata-directive': 'COPY' }, StringLike: { 's3:x-amz-copy-source': '*:tagged/public*' } },
  })
  const anon = anonymousClient(endpoint)
  t.teardown(() => anon.destroy())
  const Bucket = `${tenant.id}:tagged`
  t.same(
    await s3Error(anon.send(new CopyObjectCommand({ Bucket, Key: 'c1', CopySource: `${Bucket}/public` }))),
    { name: 'AccessDenied', status: 403 },
    'no directive',
  )
  t.same(await s3Error(anon.send(new PutObjectCommand({ Bucket, Key: 'p', Body: 'x' }))), { name: 'AccessDenied', status: 403 }, 'not a copy')
  for (const key of ['private', 'untagged']) {
    t.same(await s3Error(anon.send(new CopyObjectCommand({ Bucket, Key: 'c2', CopySource: `${Bucket}/${key}`, MetadataDirective: 'COPY' }))), {
      name: 'AccessDenied',
      status: 403,
    })
  }
  await anon.send(new CopyObjectCommand({ Bucket, Key: 'copied', CopySource: `${Bucket}/public`, MetadataDirective: 'COPY' }))
  t.equal(await body(client.send(new GetObjectCommand({ Bucket: 'tagged', Key: 'copied' }))), 'public', 'the copy granted')
  const SSE = { Effect: 'Deny', Principal: '*', Action: 's3:PutObject', Resource: 'arn:aws:s3:::tagged/*' }
  // The SSE request headers are condition keys too (their meaning is the encryption family's).
  for (const key of [
    's3:x-amz-server-side-encryption',
    's3:x-amz-server-side-encryption-aws-kms-key-id',
    's3:x-amz-server-side-encryption-customer-algorithm',
  ]) {
    await policy({ ...SSE, Condition: { Null: { [key]: 'true' } } })
  }
})

t.test('GetBucketPolicyStatus as Ceph RGW: a public ACL makes the bucket public, no policy is IsPublic false', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'status' }))
  const isPublic = async () => (await client.send(new GetBucketPolicyStatusCommand({ Bucket: 'status' }))).PolicyStatus?.IsPublic
  t.equal(await isPublic(), false, 'no policy, a private ACL')
  for (const ACL of ['public-read', 'public-read-write', 'authenticated-read'] as const) {
    await client.send(new PutBucketAclCommand({ Bucket: 'status', ACL }))
    t.equal(await isPublic(), true, ACL)
  }
  await client.send(new PutPublicAccessBlockCommand({ Bucket: 'status', PublicAccessBlockConfiguration: { IgnorePublicAcls: true } }))
  t.equal(await isPublic(), false, 'an ignored public ACL grants nothing')
})

t.test('an AccessControlPolicy with no grant at all is listed as none, and the owner keeps its bucket', async (t) => {
  const { client, tenant } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'revoked' }))
  await client.send(new PutObjectCommand({ Bucket: 'revoked', Key: 'k', Body: 'kept' }))
  const before = await client.send(new GetBucketAclCommand({ Bucket: 'revoked' }))
  await client.send(new PutBucketAclCommand({ Bucket: 'revoked', AccessControlPolicy: { Owner: before.Owner, Grants: [] } }))
  const after = await client.send(new GetBucketAclCommand({ Bucket: 'revoked' }))
  t.same(after.Grants ?? [], [])
  t.equal(after.Owner?.ID, tenant.id)
  t.equal(await body(client.send(new GetObjectCommand({ Bucket: 'revoked', Key: 'k' }))), 'kept')
  await client.send(new PutBucketAclCommand({ Bucket: 'revoked', AccessControlPolicy: { Owner: before.Owner, Grants: before.Grants } }))
  t.same((await client.send(new GetBucketAclCommand({ Bucket: 'revoked' }))).Grants, before.Grants, 'restored')
})
