// ACLs (#24, found by ceph/s3-tests): Coffer has no grants, so the ACL operations answer that
// truth (the owner with FULL_CONTROL) and accept the canned `private` that changes nothing; any
// grant to someone else is 501, never pretended; an x-amz-acl that names no canned ACL is 400
// InvalidArgument wherever it is read, as AWS answers it.
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
  type BucketCannedACL,
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

t.test('PutBucketAcl / PutObjectAcl with the canned private ACL are no-ops; any grant is 501', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'acls' }))
  await client.send(new PutObjectCommand({ Bucket: 'acls', Key: 'k', Body: 'content' }))
  t.equal((await client.send(new PutBucketAclCommand({ Bucket: 'acls', ACL: 'private' }))).$metadata.httpStatusCode, 200)
  t.equal((await client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', ACL: 'private' }))).$metadata.httpStatusCode, 200)
  t.equal((await client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', ACL: 'bucket-owner-full-control' }))).$metadata.httpStatusCode, 200)
  t.equal(await (await client.send(new GetObjectCommand({ Bucket: 'acls', Key: 'k' }))).Body!.transformToString(), 'content', 'the object is untouched')

  const refused = [
    client.send(new PutBucketAclCommand({ Bucket: 'acls', ACL: 'public-read' })),
    client.send(new PutBucketAclCommand({ Bucket: 'acls', ACL: 'bucket-owner-full-control' as BucketCannedACL })),
    client.send(new PutBucketAclCommand({ Bucket: 'acls', GrantRead: 'uri="http://acs.amazonaws.com/groups/global/AllUsers"' })),
    client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', ACL: 'public-read-write' })),
    client.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', ACL: 'private', GrantRead: 'id="someone-else"' })),
    // A policy body, even one that grants the owner alone, is not read as "private".
    client.send(
      new PutBucketAclCommand({
        Bucket: 'acls',
        AccessControlPolicy: {
          Owner: { ID: tenant.id },
          Grants: [{ Grantee: { Type: 'Group', URI: 'http://acs.amazonaws.com/groups/global/AllUsers' }, Permission: 'READ' }],
        },
      }),
    ),
    client.send(
      new PutObjectAclCommand({
        Bucket: 'acls',
        Key: 'k',
        AccessControlPolicy: { Owner: { ID: tenant.id }, Grants: [{ Grantee: { Type: 'CanonicalUser', ID: tenant.id }, Permission: 'FULL_CONTROL' }] },
      }),
    ),
  ]
  for (const [i, p] of refused.entries()) t.same(await s3Error(p), { name: 'NotImplemented', status: 501 }, `refused ${i}`)
  t.equal((await send(ctx, { method: 'PUT', path: '/acls', query: { acl: '' } })).status, 501, 'no ACL at all')
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
    // Checked before the encryption header that is 501.
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
