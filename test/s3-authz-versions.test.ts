// @suites: pg s3
// S3 authorization decided on what a request does, as AWS decides it: a read naming a version
// (GetObject / HeadObject with versionId, `null` included) is s3:GetObjectVersion on that version
// and is granted by that version's own ACL, never the current one's; a write asking for an object
// lock needs s3:PutObjectRetention / s3:PutObjectLegalHold, which no ACL grants; a versioned delete
// is s3:DeleteObjectVersion (never a bucket WRITE grant's) and the bypass header
// s3:BypassGovernanceRetention. Anonymous callers (unsigned fetch and the SDK without a signer) and
// another tenant (the SDK, by `<tenant-id>:<bucket>`).
import t, { type Test } from 'tap'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  GetObjectLegalHoldCommand,
  GetObjectRetentionCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  PutBucketAclCommand,
  PutBucketPolicyCommand,
  PutBucketVersioningCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  PutObjectRetentionCommand,
  PutObjectTaggingCommand,
  S3Client,
} from '@aws-sdk/client-s3'
import { createTenantWithS3, makeS3, s3Client, s3Error, type S3Context } from './s3-helper'

/** The AWS SDK v3 with no credentials: its requests go unsigned, as a browser's or curl's. */
function anonymousClient(t: Test, endpoint: string): S3Client {
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    // Credentials the SDK insists on having, which the no-op signer never uses.
    credentials: { accessKeyId: 'unused', secretAccessKey: 'unused' },
    signer: { sign: (request) => Promise.resolve(request) },
  })
  t.teardown(() => client.destroy())
  return client
}

/** Another tenant's SDK client. */
async function otherTenant(t: Test, ctx: S3Context): Promise<S3Client> {
  const other = await createTenantWithS3(ctx.app)
  const client = s3Client(ctx.endpoint, other.credentials)
  t.teardown(() => client.destroy())
  return client
}

const text = async (p: Promise<{ Body?: { transformToString(): Promise<string> } }>) => (await p).Body!.transformToString()
const code = (body: string) => /<Code>([^<]*)<\/Code>/.exec(body)?.[1]
const DENIED = { name: 'AccessDenied', status: 403 }

async function putPolicy(client: S3Client, bucket: string, statements: Record<string, unknown>[]): Promise<void> {
  await client.send(new PutBucketPolicyCommand({ Bucket: bucket, Policy: JSON.stringify({ Version: '2012-10-17', Statement: statements }) }))
}

const allow = (bucket: string, action: string | string[]) => ({ Effect: 'Allow', Principal: '*', Action: action, Resource: `arn:aws:s3:::${bucket}/*` })

t.test('a version is read by its own ACL: an old private version stays private behind a public current one', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'docs' }))
  // The null version: written before versioning was enabled, private.
  await client.send(new PutObjectCommand({ Bucket: 'docs', Key: 'doc', Body: 'private null version' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'docs', VersioningConfiguration: { Status: 'Enabled' } }))
  const v1 = (await client.send(new PutObjectCommand({ Bucket: 'docs', Key: 'doc', Body: 'private v1' }))).VersionId!
  const v2 = (await client.send(new PutObjectCommand({ Bucket: 'docs', Key: 'doc', Body: 'public v2', ACL: 'public-read' }))).VersionId!
  const url = (query = '') => `${endpoint}/${tenant.id}:docs/doc${query}`

  // The current version is public: anyone reads it, also by its own id.
  t.equal(await (await fetch(url())).text(), 'public v2')
  const byId = await fetch(url(`?versionId=${v2}`))
  t.equal(byId.status, 200)
  t.equal(await byId.text(), 'public v2')
  // The older versions are private: their own ACL, not the current one's, decides.
  for (const [what, versionId] of [
    ['an explicit version id', v1],
    ['versionId=null', 'null'],
  ]) {
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(url(`?versionId=${versionId}`), { method })
      t.equal(res.status, 403, `${method} of ${what}`)
      const body = await res.text()
      if (method === 'GET') {
        t.equal(code(body), 'AccessDenied', `${method} of ${what}`)
        t.notMatch(body, /private/, 'no byte of it')
      }
    }
  }
  // The SDK unsigned says the same.
  const anon = anonymousClient(t, endpoint)
  const Bucket = `${tenant.id}:docs`
  t.same(await s3Error(anon.send(new GetObjectCommand({ Bucket, Key: 'doc', VersionId: v1 }))), DENIED)
  t.equal((await s3Error(anon.send(new HeadObjectCommand({ Bucket, Key: 'doc', VersionId: 'null' })))).status, 403)
  t.equal(await text(anon.send(new GetObjectCommand({ Bucket, Key: 'doc', VersionId: v2 }))), 'public v2')

  // A version made public by PutObjectAcl (naming it) is readable, and the others stay as they were.
  await client.send(new PutBucketAclCommand({ Bucket: 'docs', ACL: 'private' }))
  await client.send(new PutObjectAclCommand({ Bucket: 'docs', Key: 'doc', VersionId: v1, ACL: 'public-read' }))
  t.equal(await (await fetch(url(`?versionId=${v1}`))).text(), 'private v1')
  t.equal((await fetch(url('?versionId=null'))).status, 403)

  // A copy reads its source version as the requester: a private version cannot be copied out into
  // a public-read-write bucket (where the copy could then be made public).
  await client.send(new CreateBucketCommand({ Bucket: 'dropbox', ACL: 'public-read-write' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'dropbox', VersioningConfiguration: { Status: 'Enabled' } }))
  const s1 = (await client.send(new PutObjectCommand({ Bucket: 'dropbox', Key: 'src', Body: 'private source' }))).VersionId!
  await client.send(new PutObjectCommand({ Bucket: 'dropbox', Key: 'src', Body: 'public source', ACL: 'public-read' }))
  const drop = `${tenant.id}:dropbox`
  t.same(await s3Error(anon.send(new CopyObjectCommand({ Bucket: drop, Key: 'leak', CopySource: `${drop}/src?versionId=${s1}`, ACL: 'public-read' }))), DENIED)
  t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket: 'dropbox', Key: 'leak' }))), { name: 'NotFound', status: 404 }, 'nothing copied')
  // The current (public) source is copied as before.
  await anon.send(new CopyObjectCommand({ Bucket: drop, Key: 'copied', CopySource: `${drop}/src` }))
  t.equal(await text(client.send(new GetObjectCommand({ Bucket: 'dropbox', Key: 'copied' }))), 'public source')
})

t.test('another tenant: authenticated-read on the current version grants no older one', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant } = ctx
  const other = await otherTenant(t, ctx)
  await client.send(new CreateBucketCommand({ Bucket: 'team' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'team', VersioningConfiguration: { Status: 'Enabled' } }))
  const v1 = (await client.send(new PutObjectCommand({ Bucket: 'team', Key: 'plan', Body: 'draft' }))).VersionId!
  const v2 = (await client.send(new PutObjectCommand({ Bucket: 'team', Key: 'plan', Body: 'shared', ACL: 'authenticated-read' }))).VersionId!
  const Bucket = `${tenant.id}:team`
  t.equal(await text(other.send(new GetObjectCommand({ Bucket, Key: 'plan' }))), 'shared')
  t.equal(await text(other.send(new GetObjectCommand({ Bucket, Key: 'plan', VersionId: v2 }))), 'shared')
  t.same(await s3Error(other.send(new GetObjectCommand({ Bucket, Key: 'plan', VersionId: v1 }))), DENIED)
  t.equal((await s3Error(other.send(new HeadObjectCommand({ Bucket, Key: 'plan', VersionId: v1 })))).status, 403)
  // Not an anonymous reader's either.
  t.equal((await fetch(`${ctx.endpoint}/${Bucket}/plan?versionId=${v2}`)).status, 403)
})

t.test('behind a delete marker in a listable bucket, each version answers by its own ACL', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'listed', ACL: 'public-read' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'listed', VersioningConfiguration: { Status: 'Enabled' } }))
  const secret = (await client.send(new PutObjectCommand({ Bucket: 'listed', Key: 'gone', Body: 'private, deleted' }))).VersionId!
  const shown = (await client.send(new PutObjectCommand({ Bucket: 'listed', Key: 'gone', Body: 'public, deleted', ACL: 'public-read' }))).VersionId!
  const marker = (await client.send(new DeleteObjectCommand({ Bucket: 'listed', Key: 'gone' }))).VersionId!
  const url = (query = '') => `${endpoint}/${tenant.id}:listed/gone${query}`
  // The key's current version is the marker: 404 to a caller who may list (it learns no more).
  const current = await fetch(url())
  t.equal(current.status, 404)
  t.equal(current.headers.get('x-amz-delete-marker'), 'true')
  for (const method of ['GET', 'HEAD']) t.equal((await fetch(url(`?versionId=${secret}`), { method })).status, 403, `${method} of the private version`)
  t.equal(await (await fetch(url(`?versionId=${shown}`))).text(), 'public, deleted', 'the public version, by its own ACL')
  // A version that does not exist is 404 to a caller who may list; the marker by id is 405, as to the owner.
  t.equal((await fetch(url('?versionId=no-such-version'))).status, 404)
  t.equal((await fetch(url(`?versionId=${marker}`))).status, 405)
  // Bucket READ grants listing the versions (s3:ListBucketVersions) and the uploads, as on AWS.
  const anon = anonymousClient(t, endpoint)
  const Bucket = `${tenant.id}:listed`
  const versions = await anon.send(new ListObjectVersionsCommand({ Bucket }))
  t.same(
    (versions.Versions ?? []).map((v) => v.VersionId),
    [shown, secret],
  )
  t.same(
    (versions.DeleteMarkers ?? []).map((m) => m.VersionId),
    [marker],
  )
  await client.send(new CreateMultipartUploadCommand({ Bucket: 'listed', Key: 'big' }))
  t.same(
    ((await anon.send(new ListMultipartUploadsCommand({ Bucket }))).Uploads ?? []).map((u) => u.Key),
    ['big'],
  )
  // Not listable: a missing version is not revealed.
  await client.send(new PutBucketAclCommand({ Bucket: 'listed', ACL: 'private' }))
  t.equal((await fetch(url('?versionId=no-such-version'))).status, 403)
  t.same(await s3Error(anon.send(new ListObjectVersionsCommand({ Bucket }))), DENIED)
})

t.test('a policy: s3:GetObject grants current reads only, s3:GetObjectVersion version reads, and the version variants of tagging', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'pol' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'pol', VersioningConfiguration: { Status: 'Enabled' } }))
  const v1 = (await client.send(new PutObjectCommand({ Bucket: 'pol', Key: 'k', Body: 'one' }))).VersionId!
  await client.send(new PutObjectCommand({ Bucket: 'pol', Key: 'k', Body: 'two' }))
  await client.send(new PutObjectTaggingCommand({ Bucket: 'pol', Key: 'k', VersionId: v1, Tagging: { TagSet: [{ Key: 'old', Value: 'yes' }] } }))
  const url = (query = '') => `${endpoint}/${tenant.id}:pol/k${query}`
  await putPolicy(client, 'pol', [allow('pol', ['s3:GetObject', 's3:GetObjectTagging'])])
  t.equal(await (await fetch(url())).text(), 'two')
  t.equal((await fetch(url(`?versionId=${v1}`))).status, 403, 's3:GetObject is not s3:GetObjectVersion')
  const anon = anonymousClient(t, endpoint)
  const Bucket = `${tenant.id}:pol`
  t.same((await anon.send(new GetObjectTaggingCommand({ Bucket, Key: 'k' }))).TagSet, [])
  t.same(await s3Error(anon.send(new GetObjectTaggingCommand({ Bucket, Key: 'k', VersionId: v1 }))), DENIED)
  // The version actions are AWS's names a policy may grant (and deny).
  await putPolicy(client, 'pol', [allow('pol', ['s3:GetObjectVersion', 's3:GetObjectVersionTagging'])])
  t.equal(await (await fetch(url(`?versionId=${v1}`))).text(), 'one')
  t.equal((await fetch(url())).status, 403, 's3:GetObjectVersion is not s3:GetObject')
  t.same((await anon.send(new GetObjectTaggingCommand({ Bucket, Key: 'k', VersionId: v1 }))).TagSet, [{ Key: 'old', Value: 'yes' }])
  // An explicit Deny of the version read wins over a public ACL on that version, for the owner too.
  await client.send(new PutObjectCommand({ Bucket: 'pol', Key: 'p', Body: 'public', ACL: 'public-read' }))
  await putPolicy(client, 'pol', [{ Effect: 'Deny', Principal: '*', Action: 's3:GetObjectVersion', Resource: 'arn:aws:s3:::pol/*' }])
  t.equal(await (await fetch(`${endpoint}/${tenant.id}:pol/p`)).text(), 'public')
  t.equal((await fetch(`${endpoint}/${tenant.id}:pol/p?versionId=null`)).status, 403)
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket: 'pol', Key: 'k', VersionId: v1 }))), DENIED)
  t.equal(await text(client.send(new GetObjectCommand({ Bucket: 'pol', Key: 'k' }))), 'two')
})

t.test('object lock headers from anyone but the owner need s3:PutObjectRetention / s3:PutObjectLegalHold, which no ACL grants', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint, clock } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'worm', ObjectLockEnabledForBucket: true, ACL: 'public-read-write' }))
  const anon = anonymousClient(t, endpoint)
  const other = await otherTenant(t, ctx)
  const Bucket = `${tenant.id}:worm`
  const until = new Date(Math.floor((clock.now() + 10 * 60_000) / 1000) * 1000)
  const retention = { ObjectLockMode: 'COMPLIANCE' as const, ObjectLockRetainUntilDate: until }
  const hold = { ObjectLockLegalHoldStatus: 'ON' as const }
  // A source anyone may read: a copy's refusal is its lock's, not its source's.
  await client.send(new PutObjectCommand({ Bucket: 'worm', Key: 'source', Body: 'source', ACL: 'public-read' }))
  const versions = async () => ((await client.send(new ListObjectVersionsCommand({ Bucket: 'worm' }))).Versions ?? []).length

  for (const [who, c] of [
    ['anonymous', anon],
    ['another tenant', other],
  ] as const) {
    for (const [what, lock] of [
      ['a retention', retention],
      ['a legal hold', hold],
    ] as const) {
      t.same(await s3Error(c.send(new PutObjectCommand({ Bucket, Key: 'locked', Body: 'x', ...lock }))), DENIED, `${who}: PutObject with ${what}`)
      t.same(
        await s3Error(c.send(new CopyObjectCommand({ Bucket, Key: 'locked', CopySource: `${Bucket}/source`, ...lock }))),
        DENIED,
        `${who}: CopyObject with ${what}`,
      )
      t.same(await s3Error(c.send(new CreateMultipartUploadCommand({ Bucket, Key: 'locked', ...lock }))), DENIED, `${who}: CreateMultipartUpload with ${what}`)
    }
  }
  // The same writes without a lock are what the bucket's WRITE grant allows.
  await anon.send(new PutObjectCommand({ Bucket, Key: 'plain', Body: 'plain' }))
  await other.send(new CopyObjectCommand({ Bucket, Key: 'plain-copy', CopySource: `${Bucket}/source` }))
  t.equal(await versions(), 3, 'only the owner’s source and the unlocked writes')

  // A POST form's lock fields are its headers.
  const post = async (fields: Record<string, string>) => {
    const form = new FormData()
    form.append('key', 'posted')
    for (const [k, v] of Object.entries(fields)) form.append(k, v)
    form.append('file', new Blob(['form bytes']), 'a.txt')
    const res = await fetch(`${endpoint}/${Bucket}`, { method: 'POST', body: form })
    return { status: res.status, code: code(await res.text()) }
  }
  t.same(await post({ 'x-amz-object-lock-legal-hold': 'ON' }), { status: 403, code: 'AccessDenied' })
  t.same(await post({ 'x-amz-object-lock-mode': 'COMPLIANCE', 'x-amz-object-lock-retain-until-date': until.toISOString() }), {
    status: 403,
    code: 'AccessDenied',
  })
  t.equal(await versions(), 3, 'nothing stored')

  // A policy may grant them: the legal hold alone first.
  await putPolicy(client, 'worm', [allow('worm', 's3:PutObjectLegalHold')])
  const held = (await anon.send(new PutObjectCommand({ Bucket, Key: 'held', Body: 'held', ...hold }))).VersionId!
  t.equal((await client.send(new GetObjectLegalHoldCommand({ Bucket: 'worm', Key: 'held', VersionId: held }))).LegalHold?.Status, 'ON')
  t.same(await s3Error(anon.send(new PutObjectCommand({ Bucket, Key: 'kept', Body: 'x', ...retention }))), DENIED, 'a retention still needs its own')
  t.same(await post({ 'x-amz-object-lock-legal-hold': 'ON' }), { status: 204, code: undefined })
  t.equal((await client.send(new GetObjectLegalHoldCommand({ Bucket: 'worm', Key: 'posted' }))).LegalHold?.Status, 'ON')
  await putPolicy(client, 'worm', [allow('worm', ['s3:PutObjectLegalHold', 's3:PutObjectRetention'])])
  const kept = (await other.send(new PutObjectCommand({ Bucket, Key: 'kept', Body: 'kept', ...retention }))).VersionId!
  t.same((await client.send(new GetObjectRetentionCommand({ Bucket: 'worm', Key: 'kept', VersionId: kept }))).Retention, {
    Mode: 'COMPLIANCE',
    RetainUntilDate: until,
  })
  await other.send(new CopyObjectCommand({ Bucket, Key: 'copy', CopySource: `${Bucket}/source`, ...hold }))
  t.equal((await client.send(new GetObjectLegalHoldCommand({ Bucket: 'worm', Key: 'copy' }))).LegalHold?.Status, 'ON')
})

t.test('versioned deletes need s3:DeleteObjectVersion, which a bucket WRITE grant never gives', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'drop', ACL: 'public-read-write' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'drop', VersioningConfiguration: { Status: 'Enabled' } }))
  const v1 = (await client.send(new PutObjectCommand({ Bucket: 'drop', Key: 'k', Body: 'one' }))).VersionId!
  await client.send(new PutObjectCommand({ Bucket: 'drop', Key: 'k', Body: 'two' }))
  const anon = anonymousClient(t, endpoint)
  const other = await otherTenant(t, ctx)
  const Bucket = `${tenant.id}:drop`
  t.same(await s3Error(anon.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: v1 }))), DENIED, 'anonymous')
  t.same(await s3Error(other.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: v1 }))), DENIED, 'another tenant')
  const unsigned = await fetch(`${endpoint}/${Bucket}/k?versionId=${v1}`, { method: 'DELETE' })
  t.equal(unsigned.status, 403)
  t.equal(code(await unsigned.text()), 'AccessDenied')
  t.equal(await text(client.send(new GetObjectCommand({ Bucket: 'drop', Key: 'k', VersionId: v1 }))), 'one', 'the version is kept')
  // A delete without a version id only adds a marker: the WRITE grant allows it, and nothing is lost.
  t.equal((await anon.send(new DeleteObjectCommand({ Bucket, Key: 'k' }))).DeleteMarker, true)
  t.equal(((await client.send(new ListObjectVersionsCommand({ Bucket: 'drop' }))).Versions ?? []).length, 2)

  // Granted by a policy: the version goes for good.
  await putPolicy(client, 'drop', [allow('drop', 's3:DeleteObjectVersion')])
  await anon.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: v1 }))
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket: 'drop', Key: 'k', VersionId: v1 }))), { name: 'NoSuchVersion', status: 404 })

  // The owner's own versioned delete is subject to its policy's Deny, the plain delete is not.
  const v3 = (await client.send(new PutObjectCommand({ Bucket: 'drop', Key: 'mine', Body: 'three' }))).VersionId!
  await putPolicy(client, 'drop', [{ Effect: 'Deny', Principal: '*', Action: 's3:DeleteObjectVersion', Resource: 'arn:aws:s3:::drop/*' }])
  t.same(await s3Error(client.send(new DeleteObjectCommand({ Bucket: 'drop', Key: 'mine', VersionId: v3 }))), DENIED)
  t.equal((await client.send(new DeleteObjectCommand({ Bucket: 'drop', Key: 'mine' }))).DeleteMarker, true)
})

t.test('x-amz-bypass-governance-retention needs s3:BypassGovernanceRetention: others only by a policy, the owner unless denied', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint, clock } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'gov', ObjectLockEnabledForBucket: true, ACL: 'public-read-write' }))
  const until = new Date(Math.floor((clock.now() + 10 * 60_000) / 1000) * 1000)
  const governed = async (Key: string) =>
    (await client.send(new PutObjectCommand({ Bucket: 'gov', Key, Body: Key, ObjectLockMode: 'GOVERNANCE', ObjectLockRetainUntilDate: until }))).VersionId!
  const exists = async (Key: string, VersionId: string) => (await client.send(new HeadObjectCommand({ Bucket: 'gov', Key, VersionId }))).ContentLength
  const anon = anonymousClient(t, endpoint)
  const other = await otherTenant(t, ctx)
  const Bucket = `${tenant.id}:gov`
  const a = await governed('a')
  // Even with the version delete granted, the bypass is not.
  await putPolicy(client, 'gov', [allow('gov', ['s3:DeleteObjectVersion', 's3:PutObjectRetention', 's3:GetObjectRetention'])])
  for (const [who, c] of [
    ['anonymous', anon],
    ['another tenant', other],
  ] as const) {
    t.same(await s3Error(c.send(new DeleteObjectCommand({ Bucket, Key: 'a', VersionId: a, BypassGovernanceRetention: true }))), DENIED, who)
    t.same(
      await s3Error(c.send(new PutObjectRetentionCommand({ Bucket, Key: 'a', VersionId: a, BypassGovernanceRetention: true, Retention: {} }))),
      DENIED,
      `${who}: removing a governance retention`,
    )
  }
  t.equal(await exists('a', a), 1, 'still there, still retained')
  t.equal((await anon.send(new GetObjectRetentionCommand({ Bucket, Key: 'a', VersionId: a }))).Retention?.Mode, 'GOVERNANCE')
  // Without the bypass the lock refuses it, as it refuses the owner.
  t.same(await s3Error(anon.send(new DeleteObjectCommand({ Bucket, Key: 'a', VersionId: a }))), DENIED)
  // Extending a retention needs no bypass: s3:PutObjectRetention granted by the policy.
  const later = new Date(until.getTime() + 60_000)
  await anon.send(new PutObjectRetentionCommand({ Bucket, Key: 'a', VersionId: a, Retention: { Mode: 'GOVERNANCE', RetainUntilDate: later } }))
  t.same((await client.send(new GetObjectRetentionCommand({ Bucket: 'gov', Key: 'a', VersionId: a }))).Retention?.RetainUntilDate, later)

  // Granted: the bypass works for others.
  await putPolicy(client, 'gov', [allow('gov', ['s3:DeleteObjectVersion', 's3:BypassGovernanceRetention'])])
  await other.send(new DeleteObjectCommand({ Bucket, Key: 'a', VersionId: a, BypassGovernanceRetention: true }))
  t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket: 'gov', Key: 'a', VersionId: a }))), { name: 'NotFound', status: 404 })

  // The owner may bypass unless its policy denies it.
  const b = await governed('b')
  await putPolicy(client, 'gov', [{ Effect: 'Deny', Principal: '*', Action: 's3:BypassGovernanceRetention', Resource: 'arn:aws:s3:::gov/*' }])
  t.same(await s3Error(client.send(new DeleteObjectCommand({ Bucket: 'gov', Key: 'b', VersionId: b, BypassGovernanceRetention: true }))), DENIED)
  t.equal(await exists('b', b), 1)
  await putPolicy(client, 'gov', [allow('gov', 's3:GetObject')])
  await client.send(new DeleteObjectCommand({ Bucket: 'gov', Key: 'b', VersionId: b, BypassGovernanceRetention: true }))
  t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket: 'gov', Key: 'b', VersionId: b }))), { name: 'NotFound', status: 404 })
})
