// @suites: pg
import t from 'tap'
import {
  CreateBucketCommand,
  GetBucketPolicyStatusCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
  PutPublicAccessBlockCommand,
  type PublicAccessBlockConfiguration,
} from '@aws-sdk/client-s3'
import { makeS3, s3Error, type S3Context } from './s3-helper'

// "Is this policy public" decided on the addresses a policy admits, not on how they are spelt: an
// Allow to everyone limited by aws:SourceIp ranges that together still cover every IPv4 (or every
// IPv6) address is public, for GetBucketPolicyStatus, BlockPublicPolicy, RestrictPublicBuckets and
// the server-wide COFFER_S3_BLOCK_PUBLIC_ACCESS, which then leaves anonymous requests nothing.

/** Spellings of "every address" that are not the literal 0.0.0.0/0 or ::/0. */
const EVERYONE: (string | string[])[] = [
  '1.2.3.4/0',
  '0.0.0.0/00',
  '::0/0',
  '0:0:0:0:0:0:0:0/000',
  '::ffff:0.0.0.0/96',
  '::ffff:0:0/96',
  ['0.0.0.0/1', '128.0.0.0/1'],
  ['128.0.0.0/1', '0.0.0.0/2', '64.0.0.0/2'],
  ['::/1', '8000::/1'],
]
/** Everyone bar a condition that proves nothing. */
const UNPROVEN: Record<string, unknown>[] = [
  { NotIpAddress: { 'aws:SourceIp': '10.0.0.0/8' } },
  { IpAddressIfExists: { 'aws:SourceIp': '127.0.0.0/8' } },
  { StringEquals: { 's3:x-amz-server-side-encryption-aws-kms-key-id': 'some-key' } },
]

const policyOf = (bucket: string, condition: Record<string, unknown>) =>
  JSON.stringify({
    Statement: [{ Effect: 'Allow', Principal: '*', Action: ['s3:GetObject', 's3:PutObject'], Resource: `arn:aws:s3:::${bucket}/*`, Condition: condition }],
  })

const conditions = [...EVERYONE.map((ips) => ({ IpAddress: { 'aws:SourceIp': ips } })), ...UNPROVEN]

async function anonymous(ctx: S3Context, bucket: string) {
  const base = `${ctx.endpoint}/${ctx.tenant.id}:${bucket}`
  const get = await fetch(`${base}/k`)
  const put = await fetch(`${base}/anon`, { method: 'PUT', body: 'written by anyone' })
  return { get: get.status, put: put.status }
}

const isPublic = async (ctx: S3Context, bucket: string) => (await ctx.client.send(new GetBucketPolicyStatusCommand({ Bucket: bucket }))).PolicyStatus?.IsPublic

t.test('each spelling of everyone: IsPublic true, refused by BlockPublicPolicy, granting nothing under RestrictPublicBuckets', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  const block = (bucket: string, c: PublicAccessBlockConfiguration) =>
    client.send(new PutPublicAccessBlockCommand({ Bucket: bucket, PublicAccessBlockConfiguration: c }))
  for (const [i, condition] of conditions.entries()) {
    const bucket = `spelt-${i}`
    const what = JSON.stringify(condition)
    await client.send(new CreateBucketCommand({ Bucket: bucket }))
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'private bytes' }))
    const policy = policyOf(bucket, condition)
    await client.send(new PutBucketPolicyCommand({ Bucket: bucket, Policy: policy }))
    t.equal(await isPublic(ctx, bucket), true, `${what}: GetBucketPolicyStatus IsPublic`)
    await block(bucket, { BlockPublicPolicy: true })
    t.same(
      await s3Error(client.send(new PutBucketPolicyCommand({ Bucket: bucket, Policy: policy }))),
      { name: 'AccessDenied', status: 403 },
      `${what}: BlockPublicPolicy`,
    )
    await block(bucket, { RestrictPublicBuckets: true })
    t.same(await anonymous(ctx, bucket), { get: 403, put: 403 }, `${what}: RestrictPublicBuckets leaves anonymous nothing`)
  }
})

t.test('COFFER_S3_BLOCK_PUBLIC_ACCESS=true: no spelling of everyone is taken, nor grants anything if stored before', async (t) => {
  const ctx = await makeS3(t, { COFFER_S3_BLOCK_PUBLIC_ACCESS: 'true' })
  const { client, core } = ctx
  for (const [i, condition] of conditions.entries()) {
    const bucket = `blocked-${i}`
    const what = JSON.stringify(condition)
    await client.send(new CreateBucketCommand({ Bucket: bucket }))
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'private bytes' }))
    const policy = policyOf(bucket, condition)
    t.same(
      await s3Error(client.send(new PutBucketPolicyCommand({ Bucket: bucket, Policy: policy }))),
      { name: 'AccessDenied', status: 403 },
      `${what}: refused`,
    )
    // A policy stored before the server-wide block was turned on.
    const wsId = core.db.pluck('SELECT id FROM workspaces WHERE slug = ? AND deleted_at IS NULL').get(bucket) as string
    core.publicAccess.putPolicy(wsId, policy)
    t.equal(await isPublic(ctx, bucket), true, `${what}: IsPublic`)
    t.same(await anonymous(ctx, bucket), { get: 403, put: 403 }, `${what}: anonymous gets nothing`)
  }
  t.equal(Number(core.db.pluck("SELECT count(*) FROM files WHERE object_key = 'anon' AND deleted_at IS NULL").get()), 0, 'no anonymous write landed')

  // A policy really limited to fixed addresses (the test client's among them) is not public: taken, and it grants.
  await client.send(new CreateBucketCommand({ Bucket: 'limited' }))
  await client.send(new PutObjectCommand({ Bucket: 'limited', Key: 'k', Body: 'shared bytes' }))
  for (const ips of ['127.0.0.0/8', ['127.0.0.0/9', '10.0.0.0/8', '::1/128'], '::ffff:127.0.0.0/104']) {
    await client.send(new PutBucketPolicyCommand({ Bucket: 'limited', Policy: policyOf('limited', { IpAddress: { 'aws:SourceIp': ips } }) }))
    t.equal(await isPublic(ctx, 'limited'), false, `${JSON.stringify(ips)}: not public`)
    t.same(await anonymous(ctx, 'limited'), { get: 200, put: 200 }, `${JSON.stringify(ips)}: grants the addresses it names`)
  }
})
