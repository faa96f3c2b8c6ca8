// @suites: pg-all
// CreateBucket as an AWS regional endpoint answers it (#24, found by ceph/s3-tests): re-creating a
// bucket the tenant owns is 200 and changes nothing in us-east-1, 409 BucketAlreadyOwnedByYou in
// any other region; a LocationConstraint that is not this endpoint's region is
// InvalidLocationConstraint (not a region, or us-east-1 given explicitly) or
// IllegalLocationConstraintException (another region).
import t from 'tap'
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type BucketLocationConstraint,
} from '@aws-sdk/client-s3'
import { createTenantWithS3, makeS3, s3Client, type S3Context, s3Error, sendSigned } from './s3-helper'

async function createWith(ctx: S3Context, bucket: string, location: string): Promise<{ status: number; body: string }> {
  const payload = `<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>${location}</LocationConstraint></CreateBucketConfiguration>`
  return sendSigned(ctx, { method: 'PUT', path: `/${bucket}`, payload })
}

t.test('us-east-1: re-creating a bucket the tenant owns is 200 and keeps its content', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'again' }))
  await client.send(new PutObjectCommand({ Bucket: 'again', Key: 'kept', Body: 'still here' }))
  const second = await client.send(new CreateBucketCommand({ Bucket: 'again' }))
  t.equal(second.$metadata.httpStatusCode, 200)
  t.equal(second.Location, '/again')
  t.same(
    (await client.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name),
    ['again'],
    'still one bucket',
  )
  t.same(
    (await client.send(new ListObjectsV2Command({ Bucket: 'again' }))).Contents?.map((o) => o.Key),
    ['kept'],
  )
  t.equal(await (await client.send(new GetObjectCommand({ Bucket: 'again', Key: 'kept' }))).Body!.transformToString(), 'still here')
})

t.test('another tenant may still make its own bucket of that name', async (t) => {
  const one = await makeS3(t)
  const other = s3Client(one.endpoint, (await createTenantWithS3(one.app)).credentials)
  t.teardown(() => other.destroy())
  await one.client.send(new CreateBucketCommand({ Bucket: 'shared-name' }))
  await one.client.send(new PutObjectCommand({ Bucket: 'shared-name', Key: 'a', Body: '1' }))
  t.equal((await other.send(new CreateBucketCommand({ Bucket: 'shared-name' }))).$metadata.httpStatusCode, 200)
  t.equal((await other.send(new ListObjectsV2Command({ Bucket: 'shared-name' }))).KeyCount, 0, "the other tenant's bucket is its own")
  t.equal((await one.client.send(new ListObjectsV2Command({ Bucket: 'shared-name' }))).KeyCount, 1)
})

t.test('another region: re-creating is 409 BucketAlreadyOwnedByYou', async (t) => {
  const { client } = await makeS3(t, { COFFER_S3_REGION: 'eu-west-1' })
  const make = (Bucket: string) => new CreateBucketCommand({ Bucket, CreateBucketConfiguration: { LocationConstraint: 'eu-west-1' } })
  await client.send(make('mine'))
  await client.send(new PutObjectCommand({ Bucket: 'mine', Key: 'kept', Body: 'x' }))
  t.same(await s3Error(client.send(make('mine'))), { name: 'BucketAlreadyOwnedByYou', status: 409 })
  t.same(
    (await client.send(new ListObjectsV2Command({ Bucket: 'mine' }))).Contents?.map((o) => o.Key),
    ['kept'],
  )
  // EU is eu-west-1's old name; an absent constraint is this endpoint's region.
  await client.send(new CreateBucketCommand({ Bucket: 'legacy-eu', CreateBucketConfiguration: { LocationConstraint: 'EU' } }))
  await client.send(new CreateBucketCommand({ Bucket: 'no-constraint' }))
  t.same(
    (await client.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name),
    ['legacy-eu', 'mine', 'no-constraint'],
  )
})

t.test('a LocationConstraint other than the region: InvalidLocationConstraint or IllegalLocationConstraintException', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  const make = (Bucket: string, LocationConstraint: string) =>
    client.send(new CreateBucketCommand({ Bucket, CreateBucketConfiguration: { LocationConstraint: LocationConstraint as BucketLocationConstraint } }))
  t.same(await s3Error(make('explicit', 'us-east-1')), { name: 'InvalidLocationConstraint', status: 400 }, 'us-east-1 given explicitly, as AWS')
  t.same(await s3Error(make('other', 'eu-central-1')), { name: 'IllegalLocationConstraintException', status: 400 }, 'another region')
  t.same(await s3Error(make('other', 'EU')), { name: 'IllegalLocationConstraintException', status: 400 }, 'EU, another region here')
  t.same(await s3Error(make('unknown', 'mars-1')), { name: 'InvalidLocationConstraint', status: 400 }, 'no region')
  t.same(await s3Error(make('unknown', 'default')), { name: 'InvalidLocationConstraint', status: 400 }, "RGW's zonegroup name")
  const raw = await createWith(ctx, 'raw', 'mars-1')
  t.equal(raw.status, 400)
  t.match(raw.body, '<LocationConstraint>mars-1</LocationConstraint>', 'the value is named, as AWS does')
  t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [], 'nothing was created')
  t.equal((await createWith(ctx, 'empty-constraint', '')).status, 200, 'an empty constraint is none')
})

t.test('a region that is no AWS name accepts itself, and refuses AWS regions as another region', async (t) => {
  const { client } = await makeS3(t, { COFFER_S3_REGION: 'garage' })
  await client.send(new CreateBucketCommand({ Bucket: 'here', CreateBucketConfiguration: { LocationConstraint: 'garage' as BucketLocationConstraint } }))
  t.same(await s3Error(client.send(new CreateBucketCommand({ Bucket: 'there', CreateBucketConfiguration: { LocationConstraint: 'us-west-2' } }))), {
    name: 'IllegalLocationConstraintException',
    status: 400,
  })
  t.same(await s3Error(client.send(new CreateBucketCommand({ Bucket: 'here' }))), { name: 'BucketAlreadyOwnedByYou', status: 409 })
})
