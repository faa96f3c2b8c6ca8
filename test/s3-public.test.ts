// @suites: pg-all
// Public objects (#26): anonymous requests evaluated against canned ACLs, bucket policies and the
// public access block; `<tenant-id>:<bucket>` names another tenant's bucket; a plain name only
// under COFFER_S3_ANONYMOUS_BUCKET_NAMES=unique and only while one tenant alone has it.
import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import {
  CreateBucketCommand,
  DeleteBucketPolicyCommand,
  DeletePublicAccessBlockCommand,
  GetBucketPolicyCommand,
  GetBucketPolicyStatusCommand,
  GetPublicAccessBlockCommand,
  PutBucketAclCommand,
  PutBucketPolicyCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  PutPublicAccessBlockCommand,
  CopyObjectCommand,
  GetObjectCommand,
} from '@aws-sdk/client-s3'
import { createTenantWithS3, makeS3, s3Client, s3Error, sendSigned } from './s3-helper'

const code = (body: string) => /<Code>([^<]*)<\/Code>/.exec(body)?.[1]

t.test('an anonymous GET/HEAD of a public-read object streams it as a signed one; its private neighbour is AccessDenied', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'pub' }))
  await client.send(new PutObjectCommand({ Bucket: 'pub', Key: 'avatar.png', Body: 'public bytes', ACL: 'public-read', ContentType: 'image/png' }))
  await client.send(new PutObjectCommand({ Bucket: 'pub', Key: 'secret.txt', Body: 'private bytes' }))
  const url = (key: string) => `${endpoint}/${tenant.id}:pub/${key}`

  const res = await fetch(url('avatar.png'))
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'image/png')
  t.equal(res.headers.get('x-content-type-options'), 'nosniff')
  t.equal(await res.text(), 'public bytes')
  const etag = res.headers.get('etag')!
  const ranged = await fetch(url('avatar.png'), { headers: { range: 'bytes=7-11' } })
  t.equal(ranged.status, 206)
  t.equal(await ranged.text(), 'bytes')
  t.equal((await fetch(url('avatar.png'), { headers: { 'if-none-match': etag } })).status, 304)
  t.equal((await fetch(url('avatar.png'), { method: 'HEAD' })).status, 200)

  for (const key of ['secret.txt', 'missing']) {
    const denied = await fetch(url(key))
    t.equal(denied.status, 403, key)
    t.equal(code(await denied.text()), 'AccessDenied', `${key}: a missing key is not revealed without s3:ListBucket`)
  }
  t.equal((await fetch(`${endpoint}/${tenant.id}:pub`)).status, 403, 'no anonymous listing of a private bucket')
  t.equal((await fetch(`${endpoint}/${tenant.id}:pub/avatar.png`, { method: 'PUT', body: 'x' })).status, 403, 'no anonymous write')
  const buckets = await fetch(`${endpoint}/`)
  t.equal(buckets.status, 200, 'anonymous ListBuckets lists what anonymous owns: nothing (as Ceph RGW)')
  t.notMatch(await buckets.text(), /<Name>/)
  t.equal((await fetch(`${endpoint}/pub/avatar.png`)).status, 403, 'a plain name names no bucket for anyone by default')
  // A copy gets the ACL its request asks for, never the source's.
  await client.send(new CopyObjectCommand({ Bucket: 'pub', Key: 'copy.png', CopySource: 'pub/avatar.png' }))
  t.equal((await fetch(url('copy.png'))).status, 403)
  // PutObjectAcl makes the private one public, and back.
  await client.send(new PutObjectAclCommand({ Bucket: 'pub', Key: 'secret.txt', ACL: 'public-read' }))
  t.equal(await (await fetch(url('secret.txt'))).text(), 'private bytes')
  await client.send(new PutObjectAclCommand({ Bucket: 'pub', Key: 'secret.txt', ACL: 'private' }))
  t.equal((await fetch(url('secret.txt'))).status, 403)

  // A public-read bucket may be listed, and then a missing key is 404.
  await client.send(new PutBucketAclCommand({ Bucket: 'pub', ACL: 'public-read' }))
  const list = await fetch(`${endpoint}/${tenant.id}:pub?list-type=2`)
  t.equal(list.status, 200)
  t.match(await list.text(), /<Key>avatar\.png<\/Key>/)
  t.equal((await fetch(url('missing'))).status, 404)
  t.equal((await fetch(url('secret.txt'))).status, 403, 'a listable bucket still keeps its private objects')
})

t.test('authenticated-read: any tenant, by <tenant-id>:<bucket>; a plain name is always the signer’s own', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  const other = await createTenantWithS3(ctx.app)
  await client.send(new CreateBucketCommand({ Bucket: 'shared' }))
  await client.send(new PutObjectCommand({ Bucket: 'shared', Key: 'k', Body: 'for members', ACL: 'authenticated-read' }))
  t.equal((await fetch(`${endpoint}/${tenant.id}:shared/k`)).status, 403, 'not anonymous')
  const asOther = { credentials: other.credentials, endpoint }
  const read = await sendSigned(asOther, { method: 'GET', path: `/${tenant.id}%3Ashared/k` })
  t.equal(read.status, 200, read.body)
  t.equal(read.body, 'for members')
  t.equal((await sendSigned(asOther, { method: 'GET', path: '/shared/k' })).status, 404, "the other tenant's plain name is its own (none)")
  const write = await sendSigned(asOther, { method: 'PUT', path: `/${tenant.id}%3Ashared/k`, payload: 'x' })
  t.equal(write.status, 403, 'no cross-tenant write')
  t.equal(await (await client.send(new GetObjectCommand({ Bucket: 'shared', Key: 'k' }))).Body!.transformToString(), 'for members')
})

t.test('COFFER_S3_ANONYMOUS_BUCKET_NAMES=unique: a plain name while one tenant alone has it', async (t) => {
  const ctx = await makeS3(t, { COFFER_S3_ANONYMOUS_BUCKET_NAMES: 'unique' })
  const { client, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'assets' }))
  await client.send(new PutObjectCommand({ Bucket: 'assets', Key: 'logo', Body: 'A', ACL: 'public-read' }))
  t.equal(await (await fetch(`${endpoint}/assets/logo`)).text(), 'A')
  t.equal((await fetch(`${endpoint}/nothing-here/logo`)).status, 404)
  // Another tenant creating the same name cannot make it resolve to its own bucket: it resolves to none.
  const other = await createTenantWithS3(ctx.app)
  const otherClient = s3Client(endpoint, other.credentials)
  await otherClient.send(new CreateBucketCommand({ Bucket: 'assets' }))
  await otherClient.send(new PutObjectCommand({ Bucket: 'assets', Key: 'logo', Body: 'B', ACL: 'public-read' }))
  t.equal((await fetch(`${endpoint}/assets/logo`)).status, 403)
  t.equal(await (await fetch(`${endpoint}/${ctx.tenant.id}:assets/logo`)).text(), 'A', 'the qualified name still works')
})

t.test('bucket policies: Deny wins over Allow (for the owner too), conditions on Referer, SourceIp and s3:prefix', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'site' }))
  for (const key of ['index.html', 'private/plan.txt', 'img/a.png']) await client.send(new PutObjectCommand({ Bucket: 'site', Key: key, Body: key }))
  const put = (statements: unknown[]) =>
    client.send(new PutBucketPolicyCommand({ Bucket: 'site', Policy: JSON.stringify({ Version: '2012-10-17', Statement: statements }) }))
  const url = (key: string) => `${endpoint}/${tenant.id}:site/${key}`
  await put([
    { Sid: 'read', Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: 'arn:aws:s3:::site/*' },
    { Sid: 'hide', Effect: 'Deny', Principal: { AWS: '*' }, Action: 's3:GetObject', Resource: 'arn:aws:s3:::site/private/*' },
  ])
  t.equal(await (await fetch(url('index.html'))).text(), 'index.html')
  t.equal((await fetch(url('private/plan.txt'))).status, 403, 'the Deny wins over the Allow')
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket: 'site', Key: 'private/plan.txt' }))), { name: 'AccessDenied', status: 403 }, 'the owner too')
  t.equal((await client.send(new GetBucketPolicyStatusCommand({ Bucket: 'site' }))).PolicyStatus?.IsPublic, true)
  t.match(JSON.parse((await client.send(new GetBucketPolicyCommand({ Bucket: 'site' }))).Policy!), { Statement: [{ Sid: 'read' }, { Sid: 'hide' }] })

  await put([
    {
      Effect: 'Allow',
      Principal: '*',
      Action: 's3:GetObject',
      Resource: 'arn:aws:s3:::site/*',
      Condition: { StringLike: { 'aws:Referer': 'https://example.com/*' } },
    },
  ])
  t.equal((await fetch(url('index.html'))).status, 403, 'no Referer')
  t.equal((await fetch(url('index.html'), { headers: { referer: 'https://evil.example/' } })).status, 403)
  t.equal((await fetch(url('index.html'), { headers: { referer: 'https://example.com/page' } })).status, 200)

  await put([
    { Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: 'arn:aws:s3:::site/*', Condition: { IpAddress: { 'aws:SourceIp': '10.0.0.0/8' } } },
  ])
  t.equal((await fetch(url('index.html'))).status, 403, '127.0.0.1 is outside 10.0.0.0/8')
  t.equal((await client.send(new GetBucketPolicyStatusCommand({ Bucket: 'site' }))).PolicyStatus?.IsPublic, false, 'limited to fixed addresses: not public')
  await put([
    {
      Effect: 'Allow',
      Principal: '*',
      Action: 's3:GetObject',
      Resource: 'arn:aws:s3:::site/*',
      Condition: { IpAddress: { 'aws:SourceIp': ['127.0.0.0/8', '::1/128'] } },
    },
  ])
  t.equal((await fetch(url('index.html'))).status, 200)

  await put([
    { Effect: 'Allow', Principal: '*', Action: ['s3:ListBucket'], Resource: 'arn:aws:s3:::site', Condition: { StringLike: { 's3:prefix': 'img/*' } } },
  ])
  t.equal((await fetch(`${endpoint}/${tenant.id}:site?list-type=2&prefix=img/`)).status, 200)
  t.equal((await fetch(`${endpoint}/${tenant.id}:site?list-type=2&prefix=private/`)).status, 403)
  t.equal((await fetch(`${endpoint}/${tenant.id}:site?list-type=2`)).status, 403)
  t.equal((await fetch(url('img/a.png'))).status, 403, 'listing is no read')

  // What the evaluator cannot decide is refused at Put time, never ignored.
  const allow = { Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: 'arn:aws:s3:::site/*' }
  const malformed = [
    [{ ...allow, Principal: undefined, NotPrincipal: { AWS: '*' } }],
    [{ ...allow, Action: 's3:FlyToTheMoon' }],
    [{ ...allow, Action: 'iam:PassRole' }],
    [{ ...allow, Principal: { AWS: 'arn:aws:iam::123456789012:root' } }],
    [{ ...allow, Resource: 'arn:aws:s3:::another-bucket/*' }],
    [{ ...allow, Condition: { StringEquals: { 'aws:PrincipalOrgID': 'o-1' } } }],
    [{ ...allow, Condition: { DateGreaterThan: { 'aws:CurrentTime': '2020-01-01T00:00:00Z' } } }],
    [{ ...allow, Condition: { IpAddress: { 'aws:SourceIp': 'not-an-ip' } } }],
    [{ ...allow, Resource: 'arn:aws:s3:::site/${aws:username}/*' }],
    [{ ...allow, Effect: 'Maybe' }],
  ]
  for (const [i, statements] of malformed.entries()) t.same(await s3Error(put(statements)), { name: 'MalformedPolicy', status: 400 }, `malformed ${i}`)
  t.same(await s3Error(client.send(new PutBucketPolicyCommand({ Bucket: 'site', Policy: '{not json' }))), { name: 'MalformedPolicy', status: 400 })
  // The owner's own principal may be named, by its id or its account's root ARN.
  await put([{ Effect: 'Deny', Principal: { AWS: `arn:aws:iam::${tenant.id}:root` }, Action: 's3:PutObject', Resource: 'arn:aws:s3:::site/*' }])
  t.same(await s3Error(client.send(new PutObjectCommand({ Bucket: 'site', Key: 'x', Body: 'x' }))), { name: 'AccessDenied', status: 403 })
  await client.send(new DeleteBucketPolicyCommand({ Bucket: 'site' }))
  t.same(await s3Error(client.send(new GetBucketPolicyCommand({ Bucket: 'site' }))), { name: 'NoSuchBucketPolicy', status: 404 })
  await client.send(new PutObjectCommand({ Bucket: 'site', Key: 'x', Body: 'x' }))
  // A policy granting a write to everyone grants it: the write runs as the owner's.
  await put([{ Effect: 'Allow', Principal: '*', Action: 's3:PutObject', Resource: 'arn:aws:s3:::site/*' }])
  t.equal((await fetch(url('upload'), { method: 'PUT', body: 'x' })).status, 200)
  t.equal(await (await client.send(new GetObjectCommand({ Bucket: 'site', Key: 'upload' }))).Body!.transformToString(), 'x')
  // Bucket configuration stays the owner's: granted to others, it is not built (501), not pretended.
  await put([{ Effect: 'Allow', Principal: '*', Action: 's3:PutBucketCORS', Resource: 'arn:aws:s3:::site' }])
  t.equal((await fetch(`${endpoint}/${tenant.id}:site?cors`, { method: 'DELETE' })).status, 501)
})

t.test('the public access block: each setting as AWS honours it', async (t) => {
  const ctx = await makeS3(t)
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'guarded' }))
  await client.send(new PutObjectCommand({ Bucket: 'guarded', Key: 'old', Body: 'old', ACL: 'public-read' }))
  const url = `${endpoint}/${tenant.id}:guarded/old`
  t.same(await s3Error(client.send(new GetPublicAccessBlockCommand({ Bucket: 'guarded' }))), { name: 'NoSuchPublicAccessBlockConfiguration', status: 404 })
  const block = (cfg: Record<string, boolean>) => client.send(new PutPublicAccessBlockCommand({ Bucket: 'guarded', PublicAccessBlockConfiguration: cfg }))

  await block({ BlockPublicAcls: true })
  t.same((await client.send(new GetPublicAccessBlockCommand({ Bucket: 'guarded' }))).PublicAccessBlockConfiguration, {
    BlockPublicAcls: true,
    IgnorePublicAcls: false,
    BlockPublicPolicy: false,
    RestrictPublicBuckets: false,
  })
  t.same(await s3Error(client.send(new PutObjectCommand({ Bucket: 'guarded', Key: 'new', Body: 'x', ACL: 'public-read' }))), {
    name: 'AccessDenied',
    status: 403,
  })
  t.same(await s3Error(client.send(new PutObjectAclCommand({ Bucket: 'guarded', Key: 'old', ACL: 'authenticated-read' }))), {
    name: 'AccessDenied',
    status: 403,
  })
  t.same(await s3Error(client.send(new PutBucketAclCommand({ Bucket: 'guarded', ACL: 'public-read' }))), { name: 'AccessDenied', status: 403 })
  t.equal((await fetch(url)).status, 200, 'BlockPublicAcls refuses new public ACLs; existing ones still count')

  await block({ IgnorePublicAcls: true })
  t.equal((await fetch(url)).status, 403, 'IgnorePublicAcls: existing public ACLs count no more')
  await block({})
  t.equal((await fetch(url)).status, 200)

  const publicPolicy = JSON.stringify({ Statement: [{ Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: 'arn:aws:s3:::guarded/*' }] })
  await block({ BlockPublicPolicy: true })
  t.same(await s3Error(client.send(new PutBucketPolicyCommand({ Bucket: 'guarded', Policy: publicPolicy }))), { name: 'AccessDenied', status: 403 })
  await block({})
  await client.send(new PutBucketPolicyCommand({ Bucket: 'guarded', Policy: publicPolicy }))
  await client.send(new PutObjectCommand({ Bucket: 'guarded', Key: 'by-policy', Body: 'p' }))
  t.equal((await fetch(`${endpoint}/${tenant.id}:guarded/by-policy`)).status, 200)
  await block({ RestrictPublicBuckets: true })
  t.equal((await fetch(`${endpoint}/${tenant.id}:guarded/by-policy`)).status, 403, 'RestrictPublicBuckets: a public policy grants only the owner')
  t.equal((await fetch(url)).status, 403, 'its ACLs too')
  t.equal(await (await client.send(new GetObjectCommand({ Bucket: 'guarded', Key: 'by-policy' }))).Body!.transformToString(), 'p')

  await client.send(new DeletePublicAccessBlockCommand({ Bucket: 'guarded' }))
  t.equal((await fetch(url)).status, 200)
})

t.test('COFFER_S3_BLOCK_PUBLIC_ACCESS=true blocks public access on every bucket', async (t) => {
  const ctx = await makeS3(t, { COFFER_S3_BLOCK_PUBLIC_ACCESS: 'true' })
  const { client, tenant, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'blk' }))
  t.same(await s3Error(client.send(new CreateBucketCommand({ Bucket: 'ccc', ACL: 'public-read' }))), { name: 'AccessDenied', status: 403 })
  t.same(await s3Error(client.send(new PutObjectCommand({ Bucket: 'blk', Key: 'k', Body: 'x', ACL: 'public-read' }))), { name: 'AccessDenied', status: 403 })
  const publicPolicy = JSON.stringify({ Statement: [{ Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: 'arn:aws:s3:::blk/*' }] })
  t.same(await s3Error(client.send(new PutBucketPolicyCommand({ Bucket: 'blk', Policy: publicPolicy }))), { name: 'AccessDenied', status: 403 })
  // Whatever the bucket's own block says, and for what was made public before the setting.
  await client.send(new PutPublicAccessBlockCommand({ Bucket: 'blk', PublicAccessBlockConfiguration: { BlockPublicAcls: false } }))
  t.same(await s3Error(client.send(new PutObjectCommand({ Bucket: 'blk', Key: 'k', Body: 'x', ACL: 'public-read' }))), { name: 'AccessDenied', status: 403 })
  await client.send(new PutObjectCommand({ Bucket: 'blk', Key: 'k', Body: 'x' }))
  t.equal((await fetch(`${endpoint}/${tenant.id}:blk/k`)).status, 403)
  await ctx.close()
  const reopened = await makeS3(t, {}, { dir: ctx.dir, storeEnv: ctx.storeEnv, existing: { ...ctx.tenant, credentials: ctx.credentials } })
  await reopened.client.send(new PutObjectAclCommand({ Bucket: 'blk', Key: 'k', ACL: 'public-read' }))
  t.equal((await fetch(`${reopened.endpoint}/${tenant.id}:blk/k`)).status, 200, 'without the setting the same object may be public')
  await reopened.close()
  const blocked = await makeS3(
    t,
    { COFFER_S3_BLOCK_PUBLIC_ACCESS: 'true' },
    { dir: ctx.dir, storeEnv: ctx.storeEnv, existing: { ...ctx.tenant, credentials: ctx.credentials } },
  )
  t.equal((await fetch(`${blocked.endpoint}/${tenant.id}:blk/k`)).status, 403, 'and with it back, public no more')
})

t.test('boto3 (Debian): an anonymous GET of a public-read object, AccessDenied for its neighbour, a Deny over an Allow', async (t) => {
  const ctx = await makeS3(t, { COFFER_S3_ANONYMOUS_BUCKET_NAMES: 'unique' })
  const script = `
import sys, json, boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError
endpoint, ak, sk = sys.argv[1:4]
cfg = Config(s3={'addressing_style': 'path'})
s3 = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk, region_name='us-east-1', config=cfg)
anon = boto3.client('s3', endpoint_url=endpoint, region_name='us-east-1', config=Config(signature_version=UNSIGNED, s3={'addressing_style': 'path'}))
out = {}
s3.create_bucket(Bucket='boto-public')
s3.put_object(Bucket='boto-public', Key='open', Body=b'hello', ACL='public-read')
s3.put_object(Bucket='boto-public', Key='closed', Body=b'no')
out['open'] = anon.get_object(Bucket='boto-public', Key='open')['Body'].read().decode()
def err(f):
    try:
        f(); return 'ok'
    except ClientError as e:
        return e.response['Error']['Code']
out['closed'] = err(lambda: anon.get_object(Bucket='boto-public', Key='closed'))
s3.put_bucket_policy(Bucket='boto-public', Policy=json.dumps({'Version': '2012-10-17', 'Statement': [
  {'Effect': 'Allow', 'Principal': '*', 'Action': 's3:GetObject', 'Resource': 'arn:aws:s3:::boto-public/*'},
  {'Effect': 'Deny', 'Principal': '*', 'Action': 's3:GetObject', 'Resource': 'arn:aws:s3:::boto-public/open'}]}))
out['closed_by_policy'] = anon.get_object(Bucket='boto-public', Key='closed')['Body'].read().decode()
out['open_denied'] = err(lambda: anon.get_object(Bucket='boto-public', Key='open'))
print(json.dumps(out))
`
  // Asynchronously: the server answering boto3 runs in this process.
  const { stdout: out } = await promisify(execFile)(
    '/usr/bin/python3',
    ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey],
    {
      encoding: 'utf8',
    },
  )
  t.same(JSON.parse(out), { open: 'hello', closed: 'AccessDenied', closed_by_policy: 'no', open_denied: 'AccessDenied' })
})
