// @suites: pg-all
// Object and bucket tagging (#26) through the AWS SDK v3: round trips, AWS's limits, x-amz-tagging
// on PutObject / CopyObject / CreateMultipartUpload, x-amz-tagging-count, and the lifecycle matcher.
import { execFile, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { promisify } from 'node:util'
import t from 'tap'
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketTaggingCommand,
  DeleteObjectTaggingCommand,
  GetBucketTaggingCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  PutBucketTaggingCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  UploadPartCommand,
  type Tag,
} from '@aws-sdk/client-s3'
import { createTenantWithS3, makeS3, s3Client, s3Error, sendSigned } from './s3-helper'
import { hasTags, parseTagQuery, tagsOf } from '../src/services/tagging'

const tagsOfObject = async (client: ReturnType<typeof s3Client>, Bucket: string, Key: string) =>
  Object.fromEntries(((await client.send(new GetObjectTaggingCommand({ Bucket, Key }))).TagSet ?? []).map((x) => [x.Key, x.Value]))

t.test('object tagging: put, get, delete, and x-amz-tagging-count on GET and HEAD', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'tags' }))
  await client.send(new PutObjectCommand({ Bucket: 'tags', Key: 'k', Body: 'hello' }))
  t.same(await tagsOfObject(client, 'tags', 'k'), {}, 'an untagged object has an empty TagSet')
  t.equal((await client.send(new HeadObjectCommand({ Bucket: 'tags', Key: 'k' }))).$metadata.httpStatusCode, 200)
  t.equal((await client.send(new GetObjectCommand({ Bucket: 'tags', Key: 'k' }))).TagCount, undefined, 'no count without tags')

  const TagSet: Tag[] = [
    { Key: 'project', Value: 'blue & <green>' },
    { Key: 'empty', Value: '' },
    { Key: 'ünïcödé', Value: 'é'.repeat(256) },
  ]
  await client.send(new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'k', Tagging: { TagSet } }))
  t.same(await tagsOfObject(client, 'tags', 'k'), { project: 'blue & <green>', empty: '', ünïcödé: 'é'.repeat(256) })
  const order = (await client.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'k' }))).TagSet?.map((x) => x.Key)
  t.same(order, ['empty', 'project', 'ünïcödé'], 'in key order, as RGW')
  const got = await client.send(new GetObjectCommand({ Bucket: 'tags', Key: 'k' }))
  t.equal(got.TagCount, 3)
  t.equal(await got.Body!.transformToString(), 'hello', 'the content is untouched')
  t.equal((await client.send(new HeadObjectCommand({ Bucket: 'tags', Key: 'k' }))).$metadata.httpStatusCode, 200)

  await client.send(new DeleteObjectTaggingCommand({ Bucket: 'tags', Key: 'k' }))
  t.same(await tagsOfObject(client, 'tags', 'k'), {})
  t.equal((await client.send(new GetObjectCommand({ Bucket: 'tags', Key: 'k' }))).TagCount, undefined)

  t.same(await s3Error(client.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'missing' }))), { name: 'NoSuchKey', status: 404 })
  t.same(await s3Error(client.send(new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'missing', Tagging: { TagSet } }))), {
    name: 'NoSuchKey',
    status: 404,
  })
  t.same(await s3Error(client.send(new GetObjectTaggingCommand({ Bucket: 'nobucket', Key: 'k' }))), { name: 'NoSuchBucket', status: 404 })
})

t.test("HEAD's x-amz-tagging-count header", async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'head' }))
  await ctx.client.send(new PutObjectCommand({ Bucket: 'head', Key: 'k', Body: 'x', Tagging: 'a=1&b=2' }))
  const res = await sendSigned(ctx, { method: 'HEAD', path: '/head/k' })
  t.equal(res.status, 200)
  t.equal(res.headers['x-amz-tagging-count'], '2')
})

t.test("object tagging: AWS's limits, each refused whole with nothing changed", async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'lim' }))
  await client.send(new PutObjectCommand({ Bucket: 'lim', Key: 'k', Body: 'x', Tagging: 'keep=me' }))
  const tags = (n: number) => Array.from({ length: n }, (_, i) => ({ Key: `k${i}`, Value: `v${i}` }))
  await client.send(new PutObjectTaggingCommand({ Bucket: 'lim', Key: 'k', Tagging: { TagSet: tags(10) } }))
  t.equal(Object.keys(await tagsOfObject(client, 'lim', 'k')).length, 10, 'ten tags are allowed')
  const refused: [string, Tag[], string][] = [
    ['eleven tags', tags(11), 'InvalidTag'],
    ['a 129-character key', [{ Key: 'k'.repeat(129), Value: 'v' }], 'InvalidTag'],
    ['an empty key', [{ Key: '', Value: 'v' }], 'InvalidTag'],
    ['a 257-character value', [{ Key: 'k', Value: 'v'.repeat(257) }], 'InvalidTag'],
    [
      'a duplicate key',
      [
        { Key: 'k', Value: '1' },
        { Key: 'k', Value: '2' },
      ],
      'InvalidTag',
    ],
    ['an aws: key', [{ Key: 'aws:x', Value: '1' }], 'InvalidTag'],
  ]
  for (const [what, TagSet, name] of refused) {
    t.same(await s3Error(client.send(new PutObjectTaggingCommand({ Bucket: 'lim', Key: 'k', Tagging: { TagSet } }))), { name, status: 400 }, what)
  }
  t.equal(Object.keys(await tagsOfObject(client, 'lim', 'k')).length, 10, 'the refused sets changed nothing')
  t.equal(
    (await sendSigned(ctx, { method: 'PUT', path: '/lim/k', query: { tagging: '' }, payload: '<Tagging><TagSet><Tag><Key>a</Key>' })).status,
    400,
    'malformed XML',
  )
  // The header form: the same limits, and nothing stored when refused.
  t.same(await s3Error(client.send(new PutObjectCommand({ Bucket: 'lim', Key: 'h', Body: 'x', Tagging: 'a=1&a=2' }))), { name: 'InvalidTag', status: 400 })
  t.same(
    await s3Error(
      client.send(
        new PutObjectCommand({
          Bucket: 'lim',
          Key: 'h',
          Body: 'x',
          Tagging: tags(11)
            .map((x) => `${x.Key}=${x.Value}`)
            .join('&'),
        }),
      ),
    ),
    { name: 'InvalidTag', status: 400 },
  )
  t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket: 'lim', Key: 'h' }))), { name: 'NotFound', status: 404 }, 'nothing was stored')
})

t.test('x-amz-tagging on PutObject (URL-encoded), CopyObject (directive) and multipart (at completion)', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'hdr' }))
  await client.send(new PutObjectCommand({ Bucket: 'hdr', Key: 'src', Body: 'source', Tagging: 'color=r%C3%A9d&a%20b=c%26d&flag' }))
  t.same(await tagsOfObject(client, 'hdr', 'src'), { color: 'réd', 'a b': 'c&d', flag: '' })

  await client.send(new CopyObjectCommand({ Bucket: 'hdr', Key: 'copied', CopySource: 'hdr/src' }))
  t.same(await tagsOfObject(client, 'hdr', 'copied'), { color: 'réd', 'a b': 'c&d', flag: '' }, 'COPY (the default) keeps the source tags')
  await client.send(
    new CopyObjectCommand({ Bucket: 'hdr', Key: 'replaced', CopySource: 'hdr/src', TaggingDirective: 'REPLACE', Tagging: 'new=1', MetadataDirective: 'COPY' }),
  )
  t.same(await tagsOfObject(client, 'hdr', 'replaced'), { new: '1' }, 'REPLACE takes the request tags')
  await client.send(new CopyObjectCommand({ Bucket: 'hdr', Key: 'bare', CopySource: 'hdr/src', TaggingDirective: 'REPLACE' }))
  t.same(await tagsOfObject(client, 'hdr', 'bare'), {}, 'REPLACE without x-amz-tagging: no tags')
  await client.send(
    new CopyObjectCommand({ Bucket: 'hdr', Key: 'meta', CopySource: 'hdr/src', MetadataDirective: 'REPLACE', Tagging: 'ignored=1', ContentType: 'text/x' }),
  )
  t.same(await tagsOfObject(client, 'hdr', 'meta'), { color: 'réd', 'a b': 'c&d', flag: '' }, 'the metadata directive does not govern tags')
  t.same(await s3Error(client.send(new CopyObjectCommand({ Bucket: 'hdr', Key: 'x', CopySource: 'hdr/src', TaggingDirective: 'MOVE' as 'COPY' }))), {
    name: 'InvalidArgument',
    status: 400,
  })

  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'hdr', Key: 'mp', Tagging: 'stage=upload' }))
  const part = await client.send(new UploadPartCommand({ Bucket: 'hdr', Key: 'mp', UploadId, PartNumber: 1, Body: 'part one' }))
  await t.rejects(client.send(new GetObjectTaggingCommand({ Bucket: 'hdr', Key: 'mp' })), { name: 'NoSuchKey' }, 'no object before completion')
  await client.send(
    new CompleteMultipartUploadCommand({ Bucket: 'hdr', Key: 'mp', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag! }] } }),
  )
  t.same(await tagsOfObject(client, 'hdr', 'mp'), { stage: 'upload' }, 'applied at completion')
  t.equal((await client.send(new GetObjectCommand({ Bucket: 'hdr', Key: 'mp' }))).TagCount, 1)

  // A new PutObject replaces the object whole, tags included.
  await client.send(new PutObjectCommand({ Bucket: 'hdr', Key: 'src', Body: 'v2' }))
  t.same(await tagsOfObject(client, 'hdr', 'src'), {})
})

t.test('bucket tagging: NoSuchTagSet, round trip, limits, delete; tenants see only their own', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'btag' }))
  t.same(await s3Error(client.send(new GetBucketTaggingCommand({ Bucket: 'btag' }))), { name: 'NoSuchTagSet', status: 404 })
  const TagSet = Array.from({ length: 50 }, (_, i) => ({ Key: `key${i}`, Value: `value${i}` }))
  await client.send(new PutBucketTaggingCommand({ Bucket: 'btag', Tagging: { TagSet } }))
  const byKey = (a: Tag, b: Tag) => Buffer.compare(Buffer.from(a.Key!), Buffer.from(b.Key!))
  t.same((await client.send(new GetBucketTaggingCommand({ Bucket: 'btag' }))).TagSet, [...TagSet].sort(byKey), 'in key order')
  t.same(
    await s3Error(client.send(new PutBucketTaggingCommand({ Bucket: 'btag', Tagging: { TagSet: [...TagSet, { Key: 'one', Value: 'more' }] } }))),
    { name: 'InvalidTag', status: 400 },
    '51 tags',
  )
  t.same(await s3Error(client.send(new PutBucketTaggingCommand({ Bucket: 'btag', Tagging: { TagSet: [{ Key: 'aws:x', Value: '' }] } }))), {
    name: 'InvalidTag',
    status: 400,
  })
  t.equal((await client.send(new GetBucketTaggingCommand({ Bucket: 'btag' }))).TagSet?.length, 50, 'refused sets changed nothing')

  // Another tenant's bucket of the same name is another bucket.
  const other = await createTenantWithS3(ctx.app)
  const otherClient = s3Client(ctx.endpoint, other.credentials)
  t.teardown(() => otherClient.destroy())
  await otherClient.send(new CreateBucketCommand({ Bucket: 'btag' }))
  t.same(await s3Error(otherClient.send(new GetBucketTaggingCommand({ Bucket: 'btag' }))), { name: 'NoSuchTagSet', status: 404 })

  await client.send(new DeleteBucketTaggingCommand({ Bucket: 'btag' }))
  t.same(await s3Error(client.send(new GetBucketTaggingCommand({ Bucket: 'btag' }))), { name: 'NoSuchTagSet', status: 404 })
  await client.send(new DeleteBucketTaggingCommand({ Bucket: 'btag' }))
  t.pass('deleting no tags is no error')
  t.same(await s3Error(client.send(new GetBucketTaggingCommand({ Bucket: 'nobucket' }))), { name: 'NoSuchBucket', status: 404 })
})

t.test('the matcher lifecycle filters use', async (t) => {
  const info = { tags: parseTagQuery('env=prod&team=a') }
  t.same(tagsOf(info), { env: 'prod', team: 'a' })
  t.same(tagsOf(null), {})
  t.ok(hasTags(info, { env: 'prod' }))
  t.ok(hasTags(info, { env: 'prod', team: 'a' }))
  t.ok(hasTags(info, {}), 'an empty filter matches everything')
  t.notOk(hasTags(info, { env: 'dev' }))
  t.notOk(hasTags(info, { env: 'prod', other: '' }))
  t.notOk(hasTags(null, { env: 'prod' }))
  t.notOk(hasTags({ tags: {} }, { toString: '' }), 'no inherited property is a tag')
})

// boto3 (the pyenv Python's, else Debian's python3-boto3): the same round trips as a Python client sends them.
const python = [process.env.COFFER_TEST_BOTO3_PYTHON, '/root/.pyenv/versions/3.11.7/bin/python3', 'python3'].find(
  (p) => p !== undefined && (p === 'python3' || fs.existsSync(p)) && spawnSync(p, ['-c', 'import boto3'], { encoding: 'utf8' }).status === 0,
)

t.test('boto3: object and bucket tagging, the header forms, limits', { skip: python === undefined && 'no python3 with boto3' }, async (t) => {
  const ctx = await makeS3(t)
  const script = `
import sys, boto3, botocore
from botocore.config import Config
endpoint, key, secret = sys.argv[1:4]
c = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret, region_name='us-east-1',
                 config=Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))
def err(f, **kw):
    try:
        f(**kw)
        return 'no error'
    except botocore.exceptions.ClientError as e:
        return '%s %s' % (e.response['Error']['Code'], e.response['ResponseMetadata']['HTTPStatusCode'])
def tags(k):
    return sorted((t['Key'], t['Value']) for t in c.get_object_tagging(Bucket='boto', Key=k)['TagSet'])
c.create_bucket(Bucket='boto')
c.put_object(Bucket='boto', Key='a', Body=b'x', Tagging='k1=v1&k2=v%202')
print(tags('a'), c.head_object(Bucket='boto', Key='a')['ResponseMetadata']['HTTPHeaders'].get('x-amz-tagging-count'))
c.put_object_tagging(Bucket='boto', Key='a', Tagging={'TagSet': [{'Key': 'x', 'Value': 'y'}]})
print(tags('a'), c.get_object(Bucket='boto', Key='a').get('TagCount'))
c.copy_object(Bucket='boto', Key='b', CopySource={'Bucket': 'boto', 'Key': 'a'})
c.copy_object(Bucket='boto', Key='c', CopySource={'Bucket': 'boto', 'Key': 'a'}, TaggingDirective='REPLACE', Tagging='r=1')
print(tags('b'), tags('c'))
u = c.create_multipart_upload(Bucket='boto', Key='m', Tagging='mp=yes')['UploadId']
p = c.upload_part(Bucket='boto', Key='m', UploadId=u, PartNumber=1, Body=b'part')
c.complete_multipart_upload(Bucket='boto', Key='m', UploadId=u, MultipartUpload={'Parts': [{'PartNumber': 1, 'ETag': p['ETag']}]})
print(tags('m'))
print(err(c.put_object_tagging, Bucket='boto', Key='a', Tagging={'TagSet': [{'Key': 'k%d' % i, 'Value': ''} for i in range(11)]}))
print(err(c.put_object_tagging, Bucket='boto', Key='a', Tagging={'TagSet': [{'Key': 'k' * 129, 'Value': ''}]}))
c.delete_object_tagging(Bucket='boto', Key='a')
print(tags('a'))
print(err(c.get_bucket_tagging, Bucket='boto'))
c.put_bucket_tagging(Bucket='boto', Tagging={'TagSet': [{'Key': 'team', 'Value': 'web'}]})
print(c.get_bucket_tagging(Bucket='boto')['TagSet'])
c.delete_bucket_tagging(Bucket='boto')
print(err(c.get_bucket_tagging, Bucket='boto'))
print(boto3.__version__, file=sys.stderr)
`
  const run = await promisify(execFile)(python!, ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey], {
    encoding: 'utf8',
    timeout: 60_000,
  }).catch((e: { stdout: string; stderr: string }) => e)
  t.equal(
    run.stdout,
    [
      "[('k1', 'v1'), ('k2', 'v 2')] 2",
      "[('x', 'y')] 1",
      "[('x', 'y')] [('r', '1')]",
      "[('mp', 'yes')]",
      'InvalidTag 400',
      'InvalidTag 400',
      '[]',
      'NoSuchTagSet 404',
      "[{'Key': 'team', 'Value': 'web'}]",
      'NoSuchTagSet 404',
      '',
    ].join('\n'),
    `boto3 ${run.stderr.trim().split('\n').at(-1)}`,
  )
})
