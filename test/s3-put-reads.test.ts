// What a plain PutObject reads (#29): a 4 KiB PutObject's CPU is mostly its SQL statements, so a
// read that cannot change the answer is not made.
import t from 'tap'
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { ObjectsRepo } from '../src/db/repos/objects'
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
