// @suites: pg-all
// ACLs (#24, #26): canned ACLs are stored and answered as the grants AWS lists for them; a grant
// no canned ACL expresses (another tenant, an e-mail, WRITE_ACP to everyone) is 501, never pretended;
// an x-amz-acl that names no canned ACL is 400 InvalidArgument wherever it is read, as AWS answers it.
import t from 'tap'
import {
  CreateBucketCommand,
  GetBucketAclCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketAclCommand,
  PutObjectAclCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3'
import { makeS3, s3Error, sendSigned } from './s3-helper'

const send = sendSigned

const code = (body: string) => /<Code>([^<]*)<\/Code>/.exec(body)?.[1]

t.test('GetBucketAcl / GetObjectAcl: the owner with FULL_CONTROL, nothing else', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'acls' }))
  await client.send(new PutObjectCommand({ Bucket: 'acls', Key: 'k', Body: 'x' }))
  for (const acl of [
    await client.send(new GetBucketAclCommand({ Bucket: 'acls' })),
    await client.send(new GetObjectAclCommand({ Bucket: 'acls', Key: 'k' })),
  ]) {
    t.equal(acl.Owner?.ID, tenant.id)
    t.same(
      acl.Grants?.map((g) => ({ type: g.Grantee?.Type, id: g.Grantee?.ID, permission: g.Permission })),
      [{ type: 'CanonicalUser', id: tenant.id, permission: 'FULL_CONTROL' }],
    )
  }
  t.same(await s3Error(client.send(new GetBucketAclCommand({ Bucket: 'missing' }))), { name: 'NoSuchBucket', status: 404 })
  t.same(await s3Error(client.send(new GetObjectAclCommand({ Bucket: 'acls', Key: 'missing' }))), { name: 'NoSuchKey', status: 404 })
})

t.test('PutBucketAcl / PutObjectAcl: canned ACLs and the grants they amount to; any other grant is 501 (#26)', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'acls' }))
  await client.send(new PutObjectCommand({ Bucket: 'acls', Key: 'k', Body: 'content' }))
  const grants = async (p: Promise<{ Grants?: { Grantee?: { Type?: string; ID?: string; URI?: string }; Permission?: string }[] }>) =>
    (await p).Grants?.map((g) => `${g.Grantee?.Type}:${g.Grantee?.ID ?? g.Grantee?.URI}:${g.Permission}`)
  const ownerGrant = `CanonicalUser:${tenant.id}:FULL_CONTROL`
  const allUsers = 'http://acs.amazonaws.com/groups/global/AllUsers'
  const authUsers = 'http://acs.amazonaws.com/groups/global/AuthenticatedUsers'
  const bucketAcl = () => grants(client.send(new GetBucketAclCommand({ Bucket: 'acls' })))
  const objectAcl = () => grants(client.send(new GetObjectAclCommand({ Bucket: 'acls', Key: 'k' })))

  t.equal((await client.send(new PutBucketAclCommand({ Bucket: 'acls', ACL: 'public-read' }))).$metadata.httpStatusCode, 200)
  t.same(await bucketAcl(), [`Group:${allUsers}:READ`, ownerGrant])
  await client.send(new PutBucketAclCommand({ Bucket: 'acls', GrantRead: `uri="${authUsers}"` }))
  t.same(await bucketAcl(), [`Group:${authUsers}:READ`, ownerGrant], 'a grant header read as the canned ACL it is')
  await client.send(new PutBucketAclCommand({ Bucket: 'acls', ACL: 'private' }))
  t.same(await bucketAcl(), [ownerGrant])
  await client.send(
    new PutObjectAclCommand({
      Bucket: 'acls',
      Key: 'k',
      AccessControlPolicy: {
        Owner: { ID: tenant.id },
        Grants: [
          { Grantee: { Type: 'CanonicalUser', ID: tenant.id }, Permission: 'FULL_CONTROL' },
          { Grantee: { Type: 'Group', URI: allUsers }, Permission: 'READ' },
        ],
      },
    }),
  )
  t.same(await objectAcl(), [`Group:${allUsers}:READ`, ownerGrant], 'an AccessControlPolicy body')
  await client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', ACL: 'bucket-owner-full-control' }))
  t.same(await objectAcl(), [ownerGrant], 'bucket-owner-full-control is private: the bucket owner owns every object')
  t.equal(await (await client.send(new GetObjectCommand({ Bucket: 'acls', Key: 'k' }))).Body!.transformToString(), 'content', 'the object is untouched')

  const refused = [
    client.send(new PutBucketAclCommand({ Bucket: 'acls', GrantRead: 'id="someone-else"' })),
    client.send(new PutBucketAclCommand({ Bucket: 'acls', GrantRead: 'emailAddress="a@example.com"' })),
    client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', GrantWriteACP: `uri="${allUsers}"` })),
    client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', GrantRead: `id="${tenant.id}"` })),
    client.send(
      new PutBucketAclCommand({
        Bucket: 'acls',
        AccessControlPolicy: { Owner: { ID: tenant.id }, Grants: [{ Grantee: { Type: 'CanonicalUser', ID: 'another-tenant' }, Permission: 'READ' }] },
      }),
    ),
  ]
  for (const [i, p] of refused.entries()) t.same(await s3Error(p), { name: 'NotImplemented', status: 501 }, `refused ${i}`)
  t.same(await objectAcl(), [ownerGrant], 'nothing refused was applied')
  t.same(await s3Error(client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', ACL: 'private', GrantRead: `uri="${allUsers}"` }))), {
    name: 'InvalidRequest',
    status: 400,
  })
  t.equal((await send(ctx, { method: 'PUT', path: '/acls', query: { acl: '' } })).status, 400, 'no ACL at all')
  t.same(await s3Error(client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'missing', ACL: 'private' }))), { name: 'NoSuchKey', status: 404 })
  t.same(await s3Error(client.send(new PutBucketAclCommand({ Bucket: 'missing', ACL: 'private' }))), { name: 'NoSuchBucket', status: 404 })
})

t.test('x-amz-acl that names no canned ACL is 400 InvalidArgument wherever it is read', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'acls' }))
  await client.send(new PutObjectCommand({ Bucket: 'acls', Key: 'src', Body: 'x' }))
  const bad = { 'x-amz-acl': 'public-ready' }
  const requests: { what: string; method: string; path: string; query?: Record<string, string>; headers: Record<string, string>; payload?: string }[] = [
    { what: 'PutBucketAcl', method: 'PUT', path: '/acls', query: { acl: '' }, headers: bad },
    { what: 'PutObjectAcl', method: 'PUT', path: '/acls/src', query: { acl: '' }, headers: bad },
    { what: 'CreateBucket', method: 'PUT', path: '/acls-new', headers: bad },
    { what: 'PutObject', method: 'PUT', path: '/acls/new', headers: bad, payload: 'x' },
    // Checked before the encryption header is taken.
    { what: 'PutObject with SSE', method: 'PUT', path: '/acls/new', headers: { ...bad, 'x-amz-server-side-encryption': 'AES256' }, payload: 'x' },
    { what: 'CopyObject', method: 'PUT', path: '/acls/copy', headers: { ...bad, 'x-amz-copy-source': '/acls/src' } },
    { what: 'CreateMultipartUpload', method: 'POST', path: '/acls/mp', query: { uploads: '' }, headers: bad },
  ]
  for (const { what, ...req } of requests) {
    const res = await send(ctx, req)
    t.equal(res.status, 400, what)
    t.equal(code(res.body), 'InvalidArgument', what)
  }
  t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket: 'acls', Key: 'new' }))), { name: 'NotFound', status: 404 }, 'nothing was written')
  t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket: 'acls', Key: 'copy' }))), { name: 'NotFound', status: 404 })
})
