// @suites: pg s3
// Object ownership controls: Put/Get/DeleteBucketOwnershipControls and CreateBucket's
// x-amz-object-ownership, the ACL writes a bucket with ACLs disabled (BucketOwnerEnforced) refuses,
// the IAM actions a policy names them by, another tenant's bucket, and a policy naming the bucket
// `<tenant-id>:<bucket>`.
import t from 'tap'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketOwnershipControlsCommand,
  GetBucketAclCommand,
  GetBucketOwnershipControlsCommand,
  GetObjectAclCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutBucketAclCommand,
  PutBucketOwnershipControlsCommand,
  PutBucketPolicyCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  type ObjectOwnership,
} from '@aws-sdk/client-s3'
import { createTenantWithS3, makeS3, s3Client, s3Error, sendSigned } from './s3-helper'

const code = (body: string) => /<Code>([^<]*)<\/Code>/.exec(body)?.[1]
const controls = (o: ObjectOwnership) => ({ Rules: [{ ObjectOwnership: o }] })
const ALL_USERS = 'http://acs.amazonaws.com/groups/global/AllUsers'

t.test('a new bucket has no ownership controls (ACLs enabled); each rule is put, read back and deleted', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'plain' }))
  t.same(await s3Error(client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'plain' }))), { name: 'OwnershipControlsNotFoundError', status: 404 })
  // Without controls, ACLs work as they always did.
  await client.send(new PutObjectCommand({ Bucket: 'plain', Key: 'k', Body: 'x', ACL: 'public-read' }))
  await client.send(new PutBucketAclCommand({ Bucket: 'plain', ACL: 'private' }))
  const noneDeleted = await client.send(new DeleteBucketOwnershipControlsCommand({ Bucket: 'plain' }))
  t.equal(noneDeleted.$metadata.httpStatusCode, 204, 'deleting none is no error')

  for (const rule of ['BucketOwnerPreferred', 'ObjectWriter', 'BucketOwnerEnforced'] as const) {
    const put = await client.send(new PutBucketOwnershipControlsCommand({ Bucket: 'plain', OwnershipControls: controls(rule) }))
    t.equal(put.$metadata.httpStatusCode, 200)
    const got = await client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'plain' }))
    t.same(got.OwnershipControls?.Rules, [{ ObjectOwnership: rule }], rule)
  }
  const del = await client.send(new DeleteBucketOwnershipControlsCommand({ Bucket: 'plain' }))
  t.equal(del.$metadata.httpStatusCode, 204)
  t.same(await s3Error(client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'plain' }))), { name: 'OwnershipControlsNotFoundError', status: 404 })
  // The bucket's ACL survived the controls coming and going.
  await client.send(new PutBucketAclCommand({ Bucket: 'plain', ACL: 'public-read' }))
  const acl = await client.send(new GetBucketAclCommand({ Bucket: 'plain' }))
  t.ok(acl.Grants?.some((g) => g.Grantee?.URI === ALL_USERS && g.Permission === 'READ'))
})

t.test("CreateBucket's x-amz-object-ownership is the bucket's controls; a public ACL with BucketOwnerEnforced is refused", async (t) => {
  const { client } = await makeS3(t)
  for (const rule of ['BucketOwnerPreferred', 'ObjectWriter', 'BucketOwnerEnforced'] as const) {
    const bucket = `made-${rule.toLowerCase()}`
    await client.send(new CreateBucketCommand({ Bucket: bucket, ObjectOwnership: rule }))
    const got = await client.send(new GetBucketOwnershipControlsCommand({ Bucket: bucket }))
    t.same(got.OwnershipControls?.Rules, [{ ObjectOwnership: rule }], rule)
  }
  t.same(await s3Error(client.send(new CreateBucketCommand({ Bucket: 'pub-enforced', ObjectOwnership: 'BucketOwnerEnforced', ACL: 'public-read' }))), {
    name: 'InvalidBucketAclWithObjectOwnership',
    status: 400,
  })
  t.same(await s3Error(client.send(new HeadBucketCommand({ Bucket: 'pub-enforced' }))), { name: 'NotFound', status: 404 }, 'not created')
  t.same(await s3Error(client.send(new CreateBucketCommand({ Bucket: 'bad', ObjectOwnership: 'Nobody' as ObjectOwnership }))), {
    name: 'InvalidArgument',
    status: 400,
  })
})

t.test('BucketOwnerEnforced: only no ACL or the owner’s full control is taken, everywhere an ACL is written', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'bkt' }))
  await client.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'was-public', Body: 'before', ACL: 'public-read' }))
  t.equal((await fetch(`${endpoint}/${tenant.id}:bkt/was-public`)).status, 200, 'public before')
  await client.send(new PutBucketOwnershipControlsCommand({ Bucket: 'bkt', OwnershipControls: controls('BucketOwnerEnforced') }))

  const refused = { name: 'AccessControlListNotSupported', status: 400 }
  // No ACL and bucket-owner-full-control are taken.
  await client.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'none', Body: 'x' }))
  await client.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'bofc', Body: 'x', ACL: 'bucket-owner-full-control' }))
  await client.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'grant', Body: 'x', GrantFullControl: `id="${tenant.id}"` }))
  for (const ACL of ['private', 'public-read', 'authenticated-read', 'bucket-owner-read'] as const) {
    t.same(await s3Error(client.send(new PutObjectCommand({ Bucket: 'bkt', Key: `acl-${ACL}`, Body: 'x', ACL }))), refused, `PutObject ${ACL}`)
  }
  t.same(
    await s3Error(client.send(new PutObjectCommand({ Bucket: 'bkt', Key: 'g', Body: 'x', GrantRead: `uri="${ALL_USERS}"` }))),
    refused,
    'a grant to AllUsers',
  )
  t.same(await s3Error(client.send(new CopyObjectCommand({ Bucket: 'bkt', Key: 'copy', CopySource: 'bkt/none', ACL: 'private' }))), refused, 'CopyObject')
  await client.send(new CopyObjectCommand({ Bucket: 'bkt', Key: 'copy', CopySource: 'bkt/none', ACL: 'bucket-owner-full-control' }))
  t.same(await s3Error(client.send(new CreateMultipartUploadCommand({ Bucket: 'bkt', Key: 'mp', ACL: 'private' }))), refused, 'CreateMultipartUpload')
  await client.send(new CreateMultipartUploadCommand({ Bucket: 'bkt', Key: 'mp', ACL: 'bucket-owner-full-control' }))
  t.same(await s3Error(client.send(new PutBucketAclCommand({ Bucket: 'bkt', ACL: 'private' }))), refused, 'PutBucketAcl')
  t.same(await s3Error(client.send(new PutObjectAclCommand({ Bucket: 'bkt', Key: 'none', ACL: 'private' }))), refused, 'PutObjectAcl')
  t.same(await s3Error(client.send(new PutObjectAclCommand({ Bucket: 'bkt', Key: 'none', ACL: 'public-read' }))), refused)
  // The XML form of the owner's full control is taken; anything more is refused.
  const owner = { ID: tenant.id }
  await client.send(
    new PutBucketAclCommand({
      Bucket: 'bkt',
      AccessControlPolicy: { Owner: owner, Grants: [{ Grantee: { Type: 'CanonicalUser', ID: tenant.id }, Permission: 'FULL_CONTROL' }] },
    }),
  )
  t.same(
    await s3Error(
      client.send(
        new PutObjectAclCommand({
          Bucket: 'bkt',
          Key: 'none',
          AccessControlPolicy: {
            Owner: owner,
            Grants: [
              { Grantee: { Type: 'CanonicalUser', ID: tenant.id }, Permission: 'FULL_CONTROL' },
              { Grantee: { Type: 'Group', URI: ALL_USERS }, Permission: 'READ' },
            ],
          },
        }),
      ),
    ),
    refused,
    'an AccessControlPolicy granting AllUsers',
  )
  t.same(
    await s3Error(client.send(new PutObjectAclCommand({ Bucket: 'bkt', Key: 'none', AccessControlPolicy: { Owner: owner, Grants: [] } }))),
    refused,
    'an AccessControlPolicy revoking the owner too',
  )

  // Reads show the owner's full control alone; the old public ACL grants nothing.
  const objAcl = await client.send(new GetObjectAclCommand({ Bucket: 'bkt', Key: 'was-public' }))
  t.same(
    objAcl.Grants?.map((g) => [g.Grantee?.ID ?? g.Grantee?.URI, g.Permission]),
    [[tenant.id, 'FULL_CONTROL']],
  )
  t.equal((await fetch(`${endpoint}/${tenant.id}:bkt/was-public`)).status, 403, 'ACLs disabled: the public-read ACL grants nothing')
  // The API's object details tell what GetObjectAcl tells.
  const ws = (await ctx.app.inject({ url: '/api/v1/workspaces', headers: tenant.headers })).json().workspaces.find((w: { slug: string }) => w.slug === 'bkt')
    .id as string
  const details = () => ctx.app.inject({ url: `/api/v1/workspaces/${ws}/objects/details?key=was-public`, headers: tenant.headers }).then((r) => r.json())
  t.match(await details(), { acl: 'private', public: false }, 'the API details say so too')
  const raw = await sendSigned(ctx, { method: 'PUT', path: '/bkt/raw', headers: { 'x-amz-acl': 'public-read' }, payload: 'x' })
  t.equal(raw.status, 400)
  t.equal(code(raw.body), 'AccessControlListNotSupported')

  // Enabling ACLs again (deleting the controls) brings back what the object's ACL says.
  await client.send(new DeleteBucketOwnershipControlsCommand({ Bucket: 'bkt' }))
  t.equal((await fetch(`${endpoint}/${tenant.id}:bkt/was-public`)).status, 200)
  t.match(await details(), { acl: 'public-read', public: true })
  await client.send(new PutObjectAclCommand({ Bucket: 'bkt', Key: 'none', ACL: 'private' }))
})

t.test('BucketOwnerEnforced is refused while the bucket’s ACL grants others', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'pub', ACL: 'public-read' }))
  t.same(await s3Error(client.send(new PutBucketOwnershipControlsCommand({ Bucket: 'pub', OwnershipControls: controls('BucketOwnerEnforced') }))), {
    name: 'InvalidBucketAclWithObjectOwnership',
    status: 400,
  })
  t.same(await s3Error(client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'pub' }))), { name: 'OwnershipControlsNotFoundError', status: 404 })
  // The other two leave ACLs enabled, so they are taken.
  await client.send(new PutBucketOwnershipControlsCommand({ Bucket: 'pub', OwnershipControls: controls('ObjectWriter') }))
  await client.send(new PutBucketAclCommand({ Bucket: 'pub', ACL: 'private' }))
  await client.send(new PutBucketOwnershipControlsCommand({ Bucket: 'pub', OwnershipControls: controls('BucketOwnerEnforced') }))
  const got = await client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'pub' }))
  t.equal(got.OwnershipControls?.Rules?.[0]?.ObjectOwnership, 'BucketOwnerEnforced')
})

t.test('a malformed PutBucketOwnershipControls is 400 MalformedXML and changes nothing', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'mal' }))
  await ctx.client.send(new PutBucketOwnershipControlsCommand({ Bucket: 'mal', OwnershipControls: controls('ObjectWriter') }))
  const rule = (v: string) => `<Rule><ObjectOwnership>${v}</ObjectOwnership></Rule>`
  const bodies = {
    'not XML': 'ObjectWriter',
    'another root': `<OwnershipRules>${rule('BucketOwnerEnforced')}</OwnershipRules>`,
    'no rule': '<OwnershipControls></OwnershipControls>',
    'two rules': `<OwnershipControls>${rule('BucketOwnerEnforced')}${rule('ObjectWriter')}</OwnershipControls>`,
    'no ObjectOwnership': '<OwnershipControls><Rule></Rule></OwnershipControls>',
    'an unknown value': `<OwnershipControls>${rule('BucketOwnerOnly')}</OwnershipControls>`,
    'an empty body': '',
  }
  for (const [what, payload] of Object.entries(bodies)) {
    const res = await sendSigned(ctx, { method: 'PUT', path: '/mal', query: { ownershipControls: '' }, payload })
    t.equal(res.status, 400, what)
    t.equal(code(res.body), 'MalformedXML', what)
  }
  const got = await ctx.client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'mal' }))
  t.equal(got.OwnershipControls?.Rules?.[0]?.ObjectOwnership, 'ObjectWriter', 'unchanged')
  const xml = await sendSigned(ctx, { method: 'GET', path: '/mal', query: { ownershipControls: '' } })
  t.equal(xml.status, 200)
  t.match(
    xml.body,
    /<OwnershipControls xmlns="http:\/\/s3\.amazonaws\.com\/doc\/2006-03-01\/"><Rule><ObjectOwnership>ObjectWriter<\/ObjectOwnership><\/Rule><\/OwnershipControls>/,
  )
})

t.test("another tenant cannot read or change a bucket's ownership controls; its plain name is its own bucket", async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  const other = await createTenantWithS3(ctx.app)
  const otherClient = s3Client(endpoint, other.credentials)
  t.teardown(() => otherClient.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'mine', ObjectOwnership: 'BucketOwnerEnforced' }))
  const foreign = `${tenant.id}:mine`
  const calls = {
    Get: () => otherClient.send(new GetBucketOwnershipControlsCommand({ Bucket: foreign })),
    Put: () => otherClient.send(new PutBucketOwnershipControlsCommand({ Bucket: foreign, OwnershipControls: controls('ObjectWriter') })),
    Delete: () => otherClient.send(new DeleteBucketOwnershipControlsCommand({ Bucket: foreign })),
  }
  for (const [what, call] of Object.entries(calls)) t.same(await s3Error(call()), { name: 'AccessDenied', status: 403 }, what)
  t.same(await s3Error(otherClient.send(new GetBucketOwnershipControlsCommand({ Bucket: 'mine' }))), { name: 'NoSuchBucket', status: 404 }, 'its own name')
  t.same(await s3Error(otherClient.send(new PutBucketOwnershipControlsCommand({ Bucket: 'mine', OwnershipControls: controls('ObjectWriter') }))), {
    name: 'NoSuchBucket',
    status: 404,
  })
  // Even a policy granting everything to everyone shares objects, never the bucket's configuration.
  const everything = JSON.stringify({
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', Principal: '*', Action: 's3:*', Resource: ['arn:aws:s3:::mine', 'arn:aws:s3:::mine/*'] }],
  })
  await client.send(new PutBucketPolicyCommand({ Bucket: 'mine', Policy: everything }))
  t.same(
    await s3Error(otherClient.send(new DeleteBucketOwnershipControlsCommand({ Bucket: foreign }))),
    { name: 'NotImplemented', status: 501 },
    'granted, but not built for anyone but the owner',
  )
  // The other tenant's writes under it follow the owner's controls: ACLs disabled.
  t.same(await s3Error(otherClient.send(new PutObjectCommand({ Bucket: foreign, Key: 'k', Body: 'x', ACL: 'private' }))), {
    name: 'AccessControlListNotSupported',
    status: 400,
  })
  t.same(await s3Error(otherClient.send(new PutBucketAclCommand({ Bucket: foreign, ACL: 'private' }))), { name: 'AccessControlListNotSupported', status: 400 })
  await otherClient.send(new PutObjectCommand({ Bucket: foreign, Key: 'k', Body: 'x', ACL: 'bucket-owner-full-control' }))
  const got = await client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'mine' }))
  t.equal(got.OwnershipControls?.Rules?.[0]?.ObjectOwnership, 'BucketOwnerEnforced', 'unchanged')
})

t.test('a policy names the operations by their IAM actions (DeleteBucketOwnershipControls is s3:PutBucketOwnershipControls)', async (t) => {
  const { client, tenant } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'pol' }))
  const deny = (action: string) =>
    JSON.stringify({
      Version: '2012-10-17',
      Statement: [{ Effect: 'Deny', Principal: { AWS: tenant.id }, Action: action, Resource: 'arn:aws:s3:::pol' }],
    })
  await client.send(new PutBucketPolicyCommand({ Bucket: 'pol', Policy: deny('s3:PutBucketOwnershipControls') }))
  t.same(await s3Error(client.send(new PutBucketOwnershipControlsCommand({ Bucket: 'pol', OwnershipControls: controls('ObjectWriter') }))), {
    name: 'AccessDenied',
    status: 403,
  })
  t.same(await s3Error(client.send(new DeleteBucketOwnershipControlsCommand({ Bucket: 'pol' }))), { name: 'AccessDenied', status: 403 })
  t.same(await s3Error(client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'pol' }))), { name: 'OwnershipControlsNotFoundError', status: 404 })
  await client.send(new PutBucketPolicyCommand({ Bucket: 'pol', Policy: deny('s3:GetBucketOwnershipControls') }))
  t.same(await s3Error(client.send(new GetBucketOwnershipControlsCommand({ Bucket: 'pol' }))), { name: 'AccessDenied', status: 403 })
  await client.send(new PutBucketOwnershipControlsCommand({ Bucket: 'pol', OwnershipControls: controls('ObjectWriter') }))
})

t.test('a policy may name its bucket as others do, <tenant-id>:<bucket>, and grants what it says', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  const other = await createTenantWithS3(ctx.app)
  const otherClient = s3Client(endpoint, other.credentials)
  t.teardown(() => otherClient.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'shared' }))
  await client.send(new PutObjectCommand({ Bucket: 'shared', Key: 'asdf', Body: 'asdf' }))
  const policy = (resources: string[], action = 's3:ListBucket') =>
    JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Principal: { AWS: '*' }, Action: action, Resource: resources }] })
  const qualified = `${tenant.id}:shared`
  t.same(await s3Error(otherClient.send(new ListObjectsV2Command({ Bucket: qualified }))), { name: 'AccessDenied', status: 403 }, 'not before')
  await client.send(new PutBucketPolicyCommand({ Bucket: 'shared', Policy: policy([`arn:aws:s3:::${qualified}`, `arn:aws:s3:::${qualified}/*`]) }))
  const listed = await otherClient.send(new ListObjectsV2Command({ Bucket: qualified }))
  t.same(
    listed.Contents?.map((o) => o.Key),
    ['asdf'],
  )
  // Ceph RGW's ARN with the tenant in the account field names it too, for an object read.
  await client.send(new PutBucketPolicyCommand({ Bucket: 'shared', Policy: policy([`arn:aws:s3::${tenant.id}:shared/*`], 's3:GetObject') }))
  const read = await fetch(`${endpoint}/${qualified}/asdf`)
  t.equal(read.status, 200)
  t.equal(await read.text(), 'asdf')
  t.same(await s3Error(otherClient.send(new ListObjectsV2Command({ Bucket: qualified }))), { name: 'AccessDenied', status: 403 }, 'that one grants no listing')
  // Another tenant's id names another bucket: refused as any resource outside this bucket.
  for (const r of [`arn:aws:s3:::${other.id}:shared`, `arn:aws:s3::${other.id}:shared/*`, 'arn:aws:s3::nobody:shared']) {
    t.same(await s3Error(client.send(new PutBucketPolicyCommand({ Bucket: 'shared', Policy: policy([r]) }))), { name: 'MalformedPolicy', status: 400 }, r)
  }
})

t.test("HeadBucket with Ceph RGW's read-stats=true tells the bucket's object count and bytes", async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'stats' }))
  const head = (query: Record<string, string>) => sendSigned(ctx, { method: 'HEAD', path: '/stats', query })
  const empty = await head({ 'read-stats': 'true' })
  t.equal(empty.status, 200)
  t.equal(empty.headers['x-rgw-object-count'], '0')
  t.equal(empty.headers['x-rgw-bytes-used'], '0')
  for (const k of ['foo', 'bar', 'baz']) await ctx.client.send(new PutObjectCommand({ Bucket: 'stats', Key: k, Body: k }))
  await ctx.client.send(new PutObjectCommand({ Bucket: 'stats', Key: 'foo', Body: 'foo!' }))
  const full = await head({ 'read-stats': 'true' })
  t.equal(full.headers['x-rgw-object-count'], '3')
  t.equal(full.headers['x-rgw-bytes-used'], '10', 'the current objects')
  const plain = await head({})
  t.equal(plain.status, 200)
  t.equal(plain.headers['x-rgw-object-count'], undefined, 'only when asked')
})
