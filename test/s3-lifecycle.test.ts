// @suites: pg-all
// S3 lifecycle configuration (#25) through the AWS SDK v3: Put/Get/DeleteBucketLifecycleConfiguration
// and their validation, x-amz-expiration, and the pass that applies the rules: expiry that frees
// disk and quota (and nothing a live version still references), noncurrent expiry with
// NewerNoncurrentVersions, expired object delete markers, incomplete multipart uploads. A lifecycle
// day is a minute here (COFFER_S3_LIFECYCLE_DAY_SECONDS) and the manual clock moves two ahead (within SigV4's skew).
import { execFile, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { promisify } from 'node:util'
import path from 'node:path'
import t from 'tap'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketLifecycleCommand,
  DeleteObjectCommand,
  GetBucketLifecycleConfigurationCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  PutBucketLifecycleConfigurationCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  UploadPartCommand,
  type LifecycleRule,
  type S3Client,
} from '@aws-sdk/client-s3'
import { makeS3, pattern, s3Error, sendSigned } from './s3-helper'
import { admin } from './helper'

const ENV = { COFFER_S3_LIFECYCLE_DAY_SECONDS: '60', COFFER_DELETED_RETENTION_SECONDS: '0' }

const putRules = (client: S3Client, Bucket: string, Rules: LifecycleRule[]) =>
  client.send(new PutBucketLifecycleConfigurationCommand({ Bucket, LifecycleConfiguration: { Rules } }))

/** Bytes of content files in the disk store (content up to 64 KiB is inline in the database: the tests use larger). */
function diskBytes(dir: string): number {
  let total = 0
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) walk(p)
      else total += fs.statSync(p).size
    }
  }
  walk(dir)
  return total
}

t.test('Put/Get/DeleteBucketLifecycleConfiguration: the rules as put; none is 404; delete is 204', async (t) => {
  const { client } = await makeS3(t, ENV)
  const Bucket = 'lc-ops'
  await client.send(new CreateBucketCommand({ Bucket }))
  t.same(await s3Error(client.send(new GetBucketLifecycleConfigurationCommand({ Bucket }))), { name: 'NoSuchLifecycleConfiguration', status: 404 })
  const rules: LifecycleRule[] = [
    { ID: 'legacy', Prefix: 'logs/', Status: 'Enabled', Expiration: { Days: 30 } },
    { ID: 'filter', Filter: { Prefix: 'tmp/' }, Status: 'Disabled', Expiration: { Date: new Date('2030-01-01T00:00:00Z') } },
    {
      ID: 'and',
      Filter: { And: { Prefix: 'a/', Tags: [{ Key: 'k', Value: 'v' }], ObjectSizeGreaterThan: 10, ObjectSizeLessThan: 1000 } },
      Status: 'Enabled',
      NoncurrentVersionExpiration: { NoncurrentDays: 3, NewerNoncurrentVersions: 2 },
    },
    {
      ID: 'marker',
      Filter: {},
      Status: 'Enabled',
      Expiration: { ExpiredObjectDeleteMarker: true },
      AbortIncompleteMultipartUpload: { DaysAfterInitiation: 7 },
    },
    { ID: 'size', Filter: { ObjectSizeGreaterThan: 5 }, Status: 'Enabled', Expiration: { Days: 1 } },
  ]
  await putRules(client, Bucket, rules)
  const got = await client.send(new GetBucketLifecycleConfigurationCommand({ Bucket }))
  t.same(got.Rules, rules)
  t.equal((await client.send(new DeleteBucketLifecycleCommand({ Bucket }))).$metadata.httpStatusCode, 204)
  t.same(await s3Error(client.send(new GetBucketLifecycleConfigurationCommand({ Bucket }))), { name: 'NoSuchLifecycleConfiguration', status: 404 })
  t.equal((await client.send(new DeleteBucketLifecycleCommand({ Bucket }))).$metadata.httpStatusCode, 204, 'none to delete is 204 too')

  // A rule without an ID gets one.
  await putRules(client, Bucket, [{ Prefix: 'x/', Status: 'Enabled', Expiration: { Days: 1 } }])
  const [rule] = (await client.send(new GetBucketLifecycleConfigurationCommand({ Bucket }))).Rules!
  t.ok(rule!.ID && rule!.ID.length > 0)
  t.same(await s3Error(client.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'lc-none' }))), { name: 'NoSuchBucket', status: 404 })
})

t.test('PutBucketLifecycleConfiguration validates as AWS: MalformedXML, InvalidArgument, 501 for transitions; nothing stored', async (t) => {
  const { client, endpoint, credentials } = await makeS3(t, ENV)
  const Bucket = 'lc-bad'
  await client.send(new CreateBucketCommand({ Bucket }))
  const cases: [string, LifecycleRule[], string][] = [
    ['ID over 255', [{ ID: 'a'.repeat(256), Prefix: '', Status: 'Enabled', Expiration: { Days: 1 } }], 'InvalidArgument'],
    [
      'same ID twice',
      [
        { ID: 'r', Prefix: 'a', Status: 'Enabled', Expiration: { Days: 1 } },
        { ID: 'r', Prefix: 'b', Status: 'Enabled', Expiration: { Days: 1 } },
      ],
      'InvalidArgument',
    ],
    ['Status enabled', [{ ID: 'r', Prefix: '', Status: 'enabled' as 'Enabled', Expiration: { Days: 1 } }], 'MalformedXML'],
    ['Days 0', [{ ID: 'r', Prefix: '', Status: 'Enabled', Expiration: { Days: 0 } }], 'InvalidArgument'],
    ['Date not at midnight', [{ ID: 'r', Prefix: '', Status: 'Enabled', Expiration: { Date: new Date('2030-01-01T12:00:00Z') } }], 'InvalidArgument'],
    ['NoncurrentDays 0', [{ ID: 'r', Prefix: '', Status: 'Enabled', NoncurrentVersionExpiration: { NoncurrentDays: 0 } }], 'InvalidArgument'],
    ['no action', [{ ID: 'r', Prefix: '', Status: 'Enabled' }], 'InvalidArgument'],
    ['Filter and Prefix', [{ ID: 'r', Prefix: 'a', Filter: { Prefix: 'b' }, Status: 'Enabled', Expiration: { Days: 1 } }], 'MalformedXML'],
    ['Days and Date', [{ ID: 'r', Prefix: '', Status: 'Enabled', Expiration: { Days: 1, Date: new Date('2030-01-01T00:00:00Z') } }], 'MalformedXML'],
    [
      'ExpiredObjectDeleteMarker with a tag',
      [{ ID: 'r', Filter: { Tag: { Key: 'k', Value: 'v' } }, Status: 'Enabled', Expiration: { ExpiredObjectDeleteMarker: true } }],
      'InvalidArgument',
    ],
    ['a transition', [{ ID: 'r', Prefix: '', Status: 'Enabled', Transitions: [{ Days: 1, StorageClass: 'GLACIER' }] }], 'NotImplemented'],
    [
      'a transition at a date not at midnight',
      [{ ID: 'r', Prefix: '', Status: 'Enabled', Transitions: [{ Date: new Date('2030-01-01T12:00:00Z'), StorageClass: 'GLACIER' }] }],
      'InvalidArgument',
    ],
    [
      'a noncurrent transition',
      [{ ID: 'r', Prefix: '', Status: 'Enabled', NoncurrentVersionTransitions: [{ NoncurrentDays: 1, StorageClass: 'GLACIER' }] }],
      'NotImplemented',
    ],
  ]
  for (const [what, Rules, code] of cases) {
    const e = await s3Error(putRules(client, Bucket, Rules))
    t.equal(e.name, code, what)
  }
  const tooMany = Array.from({ length: 1001 }, (_, i) => ({ ID: `r${i}`, Prefix: `${i}/`, Status: 'Enabled' as const, Expiration: { Days: 1 } }))
  t.equal((await s3Error(putRules(client, Bucket, tooMany))).name, 'InvalidArgument', '1001 rules')
  const notXml = await sendSigned(
    { endpoint, credentials },
    { method: 'PUT', path: `/${Bucket}`, query: { lifecycle: '' }, payload: '<LifecycleConfiguration><Rule>' },
  )
  t.equal(notXml.status, 400)
  t.match(notXml.body, /MalformedXML/)
  t.same(await s3Error(client.send(new GetBucketLifecycleConfigurationCommand({ Bucket }))), { name: 'NoSuchLifecycleConfiguration', status: 404 })
})

t.test('an expiry rule frees disk and quota by what it expires; a blob another key shares stays', async (t) => {
  const { client, core, clock, app, tenant, config } = await makeS3(t, ENV, { store: 'disk' })
  const Bucket = 'lc-free'
  await client.send(new CreateBucketCommand({ Bucket }))
  const shared = pattern(200_000, 1)
  const own = pattern(300_000, 2)
  await client.send(new PutObjectCommand({ Bucket, Key: 'old/shared', Body: shared }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'keep/shared', Body: shared }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'old/own', Body: own }))
  await client.send(new CopyObjectCommand({ Bucket, Key: 'keep/copy', CopySource: `${Bucket}/old/own` }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'old/alone', Body: pattern(100_000, 3) }))
  const usage = async () =>
    (await app.inject({ method: 'GET', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin })).json<{ usedBytes: number }>().usedBytes
  const blobsDir = path.join(config.dataDir, 'blobs')
  const usedBefore = await usage()
  const diskBefore = diskBytes(blobsDir)
  t.equal(usedBefore, 200_000 * 2 + 300_000 * 2 + 100_000)

  const put = await putRules(client, Bucket, [{ ID: 'old-goes', Filter: { Prefix: 'old/' }, Status: 'Enabled', Expiration: { Days: 1 } }])
  t.equal(put.$metadata.httpStatusCode, 200)
  // x-amz-expiration: calendar days rounded up to midnight UTC, as AWS and RGW state it.
  const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'old/own' }))
  const created = head.LastModified!.getTime()
  t.equal(head.Expiration, `expiry-date="${new Date(Math.ceil((created + 86_400_000) / 86_400_000) * 86_400_000).toUTCString()}", rule-id="old-goes"`)
  t.equal((await client.send(new HeadObjectCommand({ Bucket, Key: 'keep/copy' }))).Expiration, undefined, 'no rule selects it')
  const putAnswer = await client.send(new PutObjectCommand({ Bucket, Key: 'old/new', Body: 'x' }))
  t.match(putAnswer.Expiration, /rule-id="old-goes"/, 'PutObject says it too')
  t.match((await client.send(new GetObjectCommand({ Bucket, Key: 'old/new' }))).Expiration, /rule-id="old-goes"/, 'and GetObject')

  // Not yet a day old: nothing goes.
  t.match(await core.lifecycle.pass(), { expired: 0, complete: true })
  clock.advance(120_000)
  const r = await core.lifecycle.pass()
  t.match(r, { expired: 4, complete: true })
  // The collector purges what was deleted before its retention (0 s here) ago.
  clock.advance(1_000)
  await core.gc.collect()

  t.equal(await usage(), usedBefore + 1 - 200_000 - 300_000 - 100_000 - 1, 'the tenant is charged for what remains')
  t.equal(diskBefore - diskBytes(blobsDir), 100_000, 'only the blob no one else references left the disk')
  t.same(Buffer.from(await (await client.send(new GetObjectCommand({ Bucket, Key: 'keep/shared' }))).Body!.transformToByteArray()), shared)
  t.same(Buffer.from(await (await client.send(new GetObjectCommand({ Bucket, Key: 'keep/copy' }))).Body!.transformToByteArray()), own)
  for (const Key of ['old/shared', 'old/own', 'old/alone']) {
    t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket, Key }))), { name: 'NotFound', status: 404 }, Key)
  }
  // A second pass finds nothing more to do.
  t.match(await core.lifecycle.pass(), { expired: 0, noncurrentDeleted: 0 })
})

t.test('versioned: expiry adds a delete marker; noncurrent expiry keeps NewerNoncurrentVersions; a lone marker goes', async (t) => {
  const { client, core, clock, app, tenant } = await makeS3(t, ENV)
  const Bucket = 'lc-versions'
  await client.send(new CreateBucketCommand({ Bucket }))
  await client.send(new PutBucketVersioningCommand({ Bucket, VersioningConfiguration: { Status: 'Enabled' } }))
  for (let i = 0; i < 6; i++) await client.send(new PutObjectCommand({ Bucket, Key: 'many', Body: `version ${i}` }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'cur/one', Body: 'current' }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'gone/x', Body: 'soon a lone marker' }))
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'gone/x' }))
  await putRules(client, Bucket, [
    { ID: 'noncurrent', Filter: { Prefix: 'many' }, Status: 'Enabled', NoncurrentVersionExpiration: { NoncurrentDays: 1, NewerNoncurrentVersions: 2 } },
    { ID: 'current', Filter: { Prefix: 'cur/' }, Status: 'Enabled', Expiration: { Days: 1 } },
    {
      ID: 'markers',
      Filter: { Prefix: 'gone/' },
      Status: 'Enabled',
      NoncurrentVersionExpiration: { NoncurrentDays: 1 },
      Expiration: { ExpiredObjectDeleteMarker: true },
    },
  ])
  const usedBefore = (await app.inject({ method: 'GET', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin })).json<{ usedBytes: number }>().usedBytes
  clock.advance(120_000)
  const r = await core.lifecycle.pass()
  t.match(r, { expired: 1, noncurrentDeleted: 3 + 1, markersRemoved: 1 })
  const list = await client.send(new ListObjectVersionsCommand({ Bucket }))
  const versions = (list.Versions ?? []).map((v) => [v.Key, v.IsLatest])
  const markers = (list.DeleteMarkers ?? []).map((m) => [m.Key, m.IsLatest])
  t.same(versions, [
    ['cur/one', false],
    ['many', true],
    ['many', false],
    ['many', false],
  ])
  t.same(markers, [['cur/one', true]], 'the expired current version is hidden by a marker; the lone marker is gone')
  t.equal(await (await client.send(new GetObjectCommand({ Bucket, Key: 'many' }))).Body!.transformToString(), 'version 5')
  const usedAfter = (await app.inject({ method: 'GET', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin })).json<{ usedBytes: number }>().usedBytes
  t.equal(
    usedBefore - usedAfter,
    3 * 'version 0'.length + 'soon a lone marker'.length,
    'deleted versions leave the usage; the marked one is still stored and counted',
  )
})

t.test('AbortIncompleteMultipartUpload: uploads under the prefix older than the days are aborted and their parts released', async (t) => {
  const { client, core, clock, app, tenant } = await makeS3(t, ENV)
  const Bucket = 'lc-mpu'
  await client.send(new CreateBucketCommand({ Bucket }))
  const old = await client.send(new CreateMultipartUploadCommand({ Bucket, Key: 'tmp/a' }))
  await client.send(new UploadPartCommand({ Bucket, Key: 'tmp/a', UploadId: old.UploadId, PartNumber: 1, Body: pattern(70_000, 4) }))
  await client.send(new CreateMultipartUploadCommand({ Bucket, Key: 'keep/b' }))
  await putRules(client, Bucket, [{ ID: 'mpu', Filter: { Prefix: 'tmp/' }, Status: 'Enabled', AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 } }])
  const used = async () =>
    (await app.inject({ method: 'GET', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin })).json<{ usedBytes: number }>().usedBytes
  t.equal(await used(), 70_000)
  t.match(await core.lifecycle.pass(), { uploadsAborted: 0 })
  clock.advance(120_000)
  t.match(await core.lifecycle.pass(), { uploadsAborted: 1 })
  const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket }))
  t.same(
    (uploads.Uploads ?? []).map((u) => u.Key),
    ['keep/b'],
  )
  t.equal(await used(), 0)
})

t.test('a pass is bounded: a small budget stops and the next pass resumes where it stopped', async (t) => {
  const { client, core, clock } = await makeS3(t, ENV)
  for (const Bucket of ['lc-bound-a', 'lc-bound-b']) {
    await client.send(new CreateBucketCommand({ Bucket }))
    for (let i = 0; i < 7; i++) await client.send(new PutObjectCommand({ Bucket, Key: `k${i}`, Body: 'x' }))
    await putRules(client, Bucket, [{ ID: 'all', Filter: {}, Status: 'Enabled', Expiration: { Days: 1 } }])
  }
  clock.advance(120_000)
  let expired = 0
  let passes = 0
  for (;;) {
    const r = await core.lifecycle.pass(3)
    t.ok(r.keys <= 3)
    expired += r.expired
    passes++
    if (r.complete) break
    if (passes > 20) throw new Error('the passes never completed')
  }
  t.equal(expired, 14)
  t.ok(passes >= 5)
})

t.test('a Filter of a Prefix and size bounds side by side (as RGW takes it) selects by both', async (t) => {
  const { client, core, clock } = await makeS3(t, ENV)
  const Bucket = 'lc-size'
  await client.send(new CreateBucketCommand({ Bucket }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'small', Body: pattern(1000) }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'big', Body: pattern(3000) }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'other/big', Body: pattern(3000) }))
  const Rules: LifecycleRule[] = [{ ID: 'gt', Filter: { Prefix: 'b', ObjectSizeGreaterThan: 2000 }, Status: 'Enabled', Expiration: { Days: 1 } }]
  await putRules(client, Bucket, Rules)
  t.same((await client.send(new GetBucketLifecycleConfigurationCommand({ Bucket }))).Rules, Rules)
  clock.advance(120_000)
  t.match(await core.lifecycle.pass(), { expired: 1 })
  t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket, Key: 'big' }))), { name: 'NotFound', status: 404 })
  t.equal((await client.send(new HeadObjectCommand({ Bucket, Key: 'small' }))).ContentLength, 1000)
  t.equal((await client.send(new HeadObjectCommand({ Bucket, Key: 'other/big' }))).ContentLength, 3000)
})

// Debian's boto3 (or COFFER_TEST_BOTO3_PYTHON), as the other boto3 tests find it.
const python = [process.env.COFFER_TEST_BOTO3_PYTHON, '/root/.pyenv/versions/3.11.7/bin/python3', 'python3'].find(
  (p) => p !== undefined && (p === 'python3' || fs.existsSync(p)) && spawnSync(p, ['-c', 'import boto3'], { encoding: 'utf8' }).status === 0,
)

t.test(
  'boto3: Put/Get/DeleteBucketLifecycleConfiguration, its errors, and x-amz-expiration',
  { skip: python === undefined && 'no python3 with boto3' },
  async (t) => {
    const ctx = await makeS3(t, ENV)
    const script = `
import sys, boto3, botocore
from botocore.config import Config
endpoint, key, secret = sys.argv[1:4]
c = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret, region_name='us-east-1',
                 config=Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))
B = 'lc-boto'
c.create_bucket(Bucket=B)
def code(f, **kw):
    try:
        f(Bucket=B, **kw)
        return 'ok'
    except botocore.exceptions.ClientError as e:
        return e.response['Error']['Code']
print('none', code(c.get_bucket_lifecycle_configuration))
rules = [{'ID': 'r1', 'Expiration': {'Days': 3}, 'Prefix': 'logs/', 'Status': 'Enabled'},
         {'ID': 'r2', 'NoncurrentVersionExpiration': {'NoncurrentDays': 2, 'NewerNoncurrentVersions': 1}, 'Filter': {'Prefix': ''}, 'Status': 'Disabled'}]
c.put_bucket_lifecycle_configuration(Bucket=B, LifecycleConfiguration={'Rules': rules})
print('same', c.get_bucket_lifecycle_configuration(Bucket=B)['Rules'] == rules)
print('expiration', 'rule-id="r1"' in c.put_object(Bucket=B, Key='logs/a', Body=b'x').get('Expiration', ''),
      'Expiration' in c.head_object(Bucket=B, Key='logs/a'), 'Expiration' in c.put_object(Bucket=B, Key='other', Body=b'x'))
print('status', code(c.put_bucket_lifecycle_configuration, LifecycleConfiguration={'Rules': [{'ID': 'x', 'Expiration': {'Days': 1}, 'Prefix': '', 'Status': 'enabled'}]}))
print('days0', code(c.put_bucket_lifecycle_configuration, LifecycleConfiguration={'Rules': [{'ID': 'x', 'Expiration': {'Days': 0}, 'Prefix': '', 'Status': 'Enabled'}]}))
print('delete', c.delete_bucket_lifecycle(Bucket=B)['ResponseMetadata']['HTTPStatusCode'], code(c.get_bucket_lifecycle_configuration))
`
    const run = await promisify(execFile)(python!, ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey], {
      encoding: 'utf8',
      timeout: 120_000,
    }).catch((e: { stdout: string; stderr: string }) => e)
    t.equal(
      run.stdout,
      [
        'none NoSuchLifecycleConfiguration',
        'same True',
        'expiration True True False',
        'status MalformedXML',
        'days0 InvalidArgument',
        'delete 204 NoSuchLifecycleConfiguration',
        '',
      ].join('\n'),
      run.stderr,
    )
  },
)
