// @suites: pg-all
// What a plain PutObject reads (#29): a 4 KiB PutObject's CPU is mostly its SQL statements, so a
// read that cannot change the answer is not made.
import t from 'tap'
import { CreateBucketCommand, GetObjectCommand, ListObjectVersionsCommand, PutBucketVersioningCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { ObjectsRepo } from '../src/db/repos/objects'
import { VersionsRepo } from '../src/db/repos/versions'
import { makeS3, s3Error } from './s3-helper'

t.test('a PutObject without a condition never reads the object at its key', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'reads' }))
  await client.send(new PutObjectCommand({ Bucket: 'reads', Key: 'k', Body: 'old' }))
  // eslint-disable-next-line @typescript-eslint/unbound-method -- re-bound with apply below
  const get = ObjectsRepo.prototype.get
  let reads = 0
  ObjectsRepo.prototype.get = function (this: ObjectsRepo, ...args: Parameters<ObjectsRepo['get']>) {
    reads++
    return get.apply(this, args)
  }
  t.teardown(() => {
    ObjectsRepo.prototype.get = get
  })
  await client.send(new PutObjectCommand({ Bucket: 'reads', Key: 'k', Body: 'new' }))
  // No read for If-Match / If-None-Match before the body nor in the commit (there were two), and
  // the answer is the row as written, not read back (#29).
  t.equal(reads, 0)

  // A condition is still checked, before the body and in the commit.
  reads = 0
  t.same(await s3Error(client.send(new PutObjectCommand({ Bucket: 'reads', Key: 'k', Body: 'again', IfNoneMatch: '*' }))), {
    name: 'PreconditionFailed',
    status: 412,
  })
  t.equal(reads, 1, 'read once, before the body, and refused there')
  reads = 0
  await client.send(new PutObjectCommand({ Bucket: 'reads', Key: 'fresh', Body: 'x', IfNoneMatch: '*' }))
  t.equal(reads, 2, 'before the body and in the commit')
})

t.test("a PutObject over a key of a bucket never versioned reads its null version by primary key, not the key's newest", async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'plain' }))
  await client.send(new PutObjectCommand({ Bucket: 'plain', Key: 'k', Body: 'old' }))
  // eslint-disable-next-line @typescript-eslint/unbound-method -- re-bound with apply below
  const latest = VersionsRepo.prototype.latest
  let newest = 0
  VersionsRepo.prototype.latest = function (this: VersionsRepo, ...args: Parameters<VersionsRepo['latest']>) {
    newest++
    return latest.apply(this, args)
  }
  t.teardown(() => {
    VersionsRepo.prototype.latest = latest
  })
  await client.send(new PutObjectCommand({ Bucket: 'plain', Key: 'k', Body: 'new' }))
  // Such a bucket holds only null versions: one per key at most (#29: the ORDER BY seq read was
  // 4.6% of a 4 KiB PutObject's main thread).
  t.equal(newest, 0)
  newest = 0
  // The null version was still replaced: one version of the key, the new content.
  const listed = await client.send(new ListObjectVersionsCommand({ Bucket: 'plain' }))
  t.same(
    (listed.Versions ?? []).map((v) => [v.Key, v.VersionId, v.IsLatest, v.Size]),
    [['k', 'null', true, 3]],
  )
  t.equal(await (await client.send(new GetObjectCommand({ Bucket: 'plain', Key: 'k' }))).Body!.transformToString(), 'new')

  // A versioned bucket still reads the key's newest version (its seq is above every version's).
  await client.send(new CreateBucketCommand({ Bucket: 'kept' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'kept', VersioningConfiguration: { Status: 'Enabled' } }))
  newest = 0
  await client.send(new PutObjectCommand({ Bucket: 'kept', Key: 'k', Body: 'one' }))
  await client.send(new PutObjectCommand({ Bucket: 'kept', Key: 'k', Body: 'two' }))
  t.ok(newest >= 2)
  const kept = await client.send(new ListObjectVersionsCommand({ Bucket: 'kept' }))
  t.equal(kept.Versions?.length, 2)
})

t.test('a PutObject reads the data version once as it is read: the credential and the bucket share it', async (t) => {
  const { client, core } = await makeS3(t)
  // PRAGMA data_version is SQLite's (a core over PostgreSQL reads auth_version instead).
  if (!core.sqlite) return t.comment('not on SQLite: nothing to count')
  await client.send(new CreateBucketCommand({ Bucket: 'pragma' }))
  await client.send(new PutObjectCommand({ Bucket: 'pragma', Key: 'warm', Body: 'x' }))
  const proto = Object.getPrototypeOf(core.sqlite.prepare('SELECT 1')) as { get: (...args: unknown[]) => unknown }
  const get = proto.get
  let pragmas = 0
  proto.get = function (this: { source: string }, ...args: unknown[]) {
    if (this.source === 'PRAGMA data_version') pragmas++
    return get.apply(this, args)
  }
  t.teardown(() => {
    proto.get = get
  })
  await client.send(new PutObjectCommand({ Bucket: 'pragma', Key: 'k', Body: 'one' }))
  // One as the request is read (SigV4's credential, then the bucket: there were two), one for its
  // commit's batch, one as it is answered (the lifecycle rules of x-amz-expiration) (#29).
  t.equal(pragmas, 3)
  t.equal(await (await client.send(new GetObjectCommand({ Bucket: 'pragma', Key: 'k' }))).Body!.transformToString(), 'one')
})
