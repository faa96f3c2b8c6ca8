// @suites: pg-all
// S3 object lock (#25) through the AWS SDK v3 and boto3: a bucket created with lock, its
// configuration and default retention, versions' retention and legal hold, the lock headers of
// writes and reads, and enforcement against the server clock through both fronts, tenant deletion
// and the collector.
import { execFile, spawnSync } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectLegalHoldCommand,
  GetObjectLockConfigurationCommand,
  GetObjectRetentionCommand,
  GetBucketVersioningCommand,
  HeadObjectCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectLockConfigurationCommand,
  PutObjectRetentionCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { makeS3, s3Error } from './s3-helper'
import { admin } from './helper'

const DAY = 86_400_000

t.test('a bucket with object lock: configuration, versioning for good; without lock, InvalidBucketState / InvalidRequest', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'locked', ObjectLockEnabledForBucket: true }))
  t.equal((await client.send(new GetBucketVersioningCommand({ Bucket: 'locked' }))).Status, 'Enabled')
  t.same((await client.send(new GetObjectLockConfigurationCommand({ Bucket: 'locked' }))).ObjectLockConfiguration, { ObjectLockEnabled: 'Enabled' })
  t.same(await s3Error(client.send(new PutBucketVersioningCommand({ Bucket: 'locked', VersioningConfiguration: { Status: 'Suspended' } }))), {
    name: 'InvalidBucketState',
    status: 409,
  })
  await client.send(
    new PutObjectLockConfigurationCommand({
      Bucket: 'locked',
      ObjectLockConfiguration: { ObjectLockEnabled: 'Enabled', Rule: { DefaultRetention: { Mode: 'GOVERNANCE', Days: 1 } } },
    }),
  )
  t.same((await client.send(new GetObjectLockConfigurationCommand({ Bucket: 'locked' }))).ObjectLockConfiguration, {
    ObjectLockEnabled: 'Enabled',
    Rule: { DefaultRetention: { Mode: 'GOVERNANCE', Days: 1 } },
  })
  // Days and Years together, or neither: MalformedXML.
  for (const DefaultRetention of [{ Mode: 'COMPLIANCE' as const, Days: 1, Years: 1 }, { Mode: 'COMPLIANCE' as const }]) {
    t.equal(
      (
        await s3Error(
          client.send(
            new PutObjectLockConfigurationCommand({ Bucket: 'locked', ObjectLockConfiguration: { ObjectLockEnabled: 'Enabled', Rule: { DefaultRetention } } }),
          ),
        )
      ).name,
      'MalformedXML',
    )
  }

  await client.send(new CreateBucketCommand({ Bucket: 'plain' }))
  t.same(await s3Error(client.send(new GetObjectLockConfigurationCommand({ Bucket: 'plain' }))), { name: 'ObjectLockConfigurationNotFoundError', status: 404 })
  t.same(await s3Error(client.send(new PutObjectLockConfigurationCommand({ Bucket: 'plain', ObjectLockConfiguration: { ObjectLockEnabled: 'Enabled' } }))), {
    name: 'InvalidBucketState',
    status: 409,
  })
  const until = new Date(Date.now() + DAY)
  t.same(
    await s3Error(client.send(new PutObjectCommand({ Bucket: 'plain', Key: 'k', Body: 'x', ObjectLockMode: 'GOVERNANCE', ObjectLockRetainUntilDate: until }))),
    {
      name: 'InvalidRequest',
      status: 400,
    },
  )
  t.same(await s3Error(client.send(new CreateMultipartUploadCommand({ Bucket: 'plain', Key: 'k', ObjectLockLegalHoldStatus: 'ON' }))), {
    name: 'InvalidRequest',
    status: 400,
  })
  // Mode without a date: InvalidArgument.
  t.same(await s3Error(client.send(new PutObjectCommand({ Bucket: 'locked', Key: 'k', Body: 'x', ObjectLockMode: 'GOVERNANCE' }))), {
    name: 'InvalidArgument',
    status: 400,
  })
})

t.test('retention and legal hold of versions: headers on writes and reads, default retention, enforcement by the server clock', async (t) => {
  const ctx = await makeS3(t)
  const { client, clock } = ctx
  const Bucket = 'worm'
  await client.send(new CreateBucketCommand({ Bucket, ObjectLockEnabledForBucket: true }))
  // Minutes, not days: the SDK signs with the real clock, and a server clock moved past the allowed
  // skew (15 minutes) would refuse a HEAD with no body to tell the SDK so.
  const MIN = 60_000
  const until = new Date(Math.floor((clock.now() + 4 * MIN) / 1000) * 1000)

  // PutObject with a COMPLIANCE retention: GET/HEAD report it, GetObjectRetention returns it.
  const v1 = (await client.send(new PutObjectCommand({ Bucket, Key: 'c', Body: 'one', ObjectLockMode: 'COMPLIANCE', ObjectLockRetainUntilDate: until })))
    .VersionId!
  const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'c', VersionId: v1 }))
  t.equal(head.ObjectLockMode, 'COMPLIANCE')
  t.equal(head.ObjectLockRetainUntilDate?.getTime(), until.getTime())
  t.same((await client.send(new GetObjectRetentionCommand({ Bucket, Key: 'c', VersionId: v1 }))).Retention, { Mode: 'COMPLIANCE', RetainUntilDate: until })
  // COMPLIANCE: no delete, no shortening, even with the bypass; extending is allowed.
  t.same(await s3Error(client.send(new DeleteObjectCommand({ Bucket, Key: 'c', VersionId: v1, BypassGovernanceRetention: true }))), {
    name: 'AccessDenied',
    status: 403,
  })
  t.same(
    await s3Error(
      client.send(
        new PutObjectRetentionCommand({
          Bucket,
          Key: 'c',
          VersionId: v1,
          BypassGovernanceRetention: true,
          Retention: { Mode: 'COMPLIANCE', RetainUntilDate: new Date(until.getTime() - MIN) },
        }),
      ),
    ),
    { name: 'AccessDenied', status: 403 },
  )
  const later = new Date(until.getTime() + 2 * MIN)
  await client.send(new PutObjectRetentionCommand({ Bucket, Key: 'c', VersionId: v1, Retention: { Mode: 'COMPLIANCE', RetainUntilDate: later } }))
  // DeleteObjects reports the locked version as an error, and deletes nothing of it.
  const batch = await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: [{ Key: 'c', VersionId: v1 }] } }))
  t.same(
    batch.Errors?.map((e) => e.Code),
    ['AccessDenied'],
  )
  // A DELETE without a versionId only adds a marker: allowed, and the version stays.
  t.equal((await client.send(new DeleteObjectCommand({ Bucket, Key: 'c' }))).DeleteMarker, true)
  t.equal((await client.send(new HeadObjectCommand({ Bucket, Key: 'c', VersionId: v1 }))).ContentLength, 3)

  // The server clock, not the client's, decides when it ends.
  clock.advance(6 * MIN + 1000)
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'c', VersionId: v1 }))
  t.equal((await s3Error(client.send(new HeadObjectCommand({ Bucket, Key: 'c', VersionId: v1 })))).status, 404, 'deleted once expired')

  // GOVERNANCE: deletable with the bypass header only; shortening needs it too.
  const g = (await client.send(new PutObjectCommand({ Bucket, Key: 'g', Body: 'gov' }))).VersionId!
  const gUntil = new Date(Math.floor((clock.now() + 4 * MIN) / 1000) * 1000)
  await client.send(new PutObjectRetentionCommand({ Bucket, Key: 'g', VersionId: g, Retention: { Mode: 'GOVERNANCE', RetainUntilDate: gUntil } }))
  t.same(await s3Error(client.send(new DeleteObjectCommand({ Bucket, Key: 'g', VersionId: g }))), { name: 'AccessDenied', status: 403 })
  t.same(await s3Error(client.send(new PutObjectRetentionCommand({ Bucket, Key: 'g', VersionId: g, Retention: {} }))), { name: 'AccessDenied', status: 403 })
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'g', VersionId: g, BypassGovernanceRetention: true }))

  // Legal hold: blocks deletes whatever the retention; OFF lifts it.
  const h = (await client.send(new PutObjectCommand({ Bucket, Key: 'h', Body: 'held', ObjectLockLegalHoldStatus: 'ON' }))).VersionId!
  t.equal((await client.send(new HeadObjectCommand({ Bucket, Key: 'h' }))).ObjectLockLegalHoldStatus, 'ON')
  t.equal((await client.send(new GetObjectLegalHoldCommand({ Bucket, Key: 'h' }))).LegalHold?.Status, 'ON')
  t.same(await s3Error(client.send(new DeleteObjectCommand({ Bucket, Key: 'h', VersionId: h, BypassGovernanceRetention: true }))), {
    name: 'AccessDenied',
    status: 403,
  })
  await client.send(new PutObjectLegalHoldCommand({ Bucket, Key: 'h', VersionId: h, LegalHold: { Status: 'OFF' } }))
  t.equal((await client.send(new GetObjectLegalHoldCommand({ Bucket, Key: 'h', VersionId: h }))).LegalHold?.Status, 'OFF')
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'h', VersionId: h }))

  // The bucket's default retention applies to new versions, PutObject, CopyObject and multipart alike.
  await client.send(
    new PutObjectLockConfigurationCommand({
      Bucket,
      ObjectLockConfiguration: { ObjectLockEnabled: 'Enabled', Rule: { DefaultRetention: { Mode: 'GOVERNANCE', Days: 2 } } },
    }),
  )
  const d = (await client.send(new PutObjectCommand({ Bucket, Key: 'd', Body: 'dflt' }))).VersionId!
  const r = (await client.send(new GetObjectRetentionCommand({ Bucket, Key: 'd', VersionId: d }))).Retention!
  t.equal(r.Mode, 'GOVERNANCE')
  t.equal(r.RetainUntilDate!.getTime(), clock.now() + 2 * DAY)
  const copied = (await client.send(new CopyObjectCommand({ Bucket, Key: 'd2', CopySource: `${Bucket}/d`, ObjectLockLegalHoldStatus: 'ON' }))).VersionId!
  t.equal((await client.send(new HeadObjectCommand({ Bucket, Key: 'd2', VersionId: copied }))).ObjectLockLegalHoldStatus, 'ON')
  const mp = await client.send(
    new CreateMultipartUploadCommand({ Bucket, Key: 'm', ObjectLockMode: 'COMPLIANCE', ObjectLockRetainUntilDate: new Date(clock.now() + 5 * DAY) }),
  )
  const part = await client.send(new UploadPartCommand({ Bucket, Key: 'm', UploadId: mp.UploadId!, PartNumber: 1, Body: 'mp' }))
  const done = await client.send(
    new CompleteMultipartUploadCommand({ Bucket, Key: 'm', UploadId: mp.UploadId!, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag! }] } }),
  )
  t.equal((await client.send(new HeadObjectCommand({ Bucket, Key: 'm', VersionId: done.VersionId! }))).ObjectLockMode, 'COMPLIANCE')
  // A retain-until date in the past (by the server clock) is refused.
  t.same(
    await s3Error(
      client.send(new PutObjectCommand({ Bucket, Key: 'p', Body: 'x', ObjectLockMode: 'GOVERNANCE', ObjectLockRetainUntilDate: new Date(clock.now() - 1000) })),
    ),
    { name: 'InvalidArgument', status: 400 },
  )
})

t.test('locked versions survive the API workspace delete, tenant deletion and the collector', async (t) => {
  const ctx = await makeS3(t)
  const { client, clock, app, core } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'keep', ObjectLockEnabledForBucket: true }))
  const v = (await client.send(new PutObjectCommand({ Bucket: 'keep', Key: 'doc', Body: 'kept', ObjectLockLegalHoldStatus: 'ON' }))).VersionId!
  // A delete marker over it (allowed), and its file is no longer live.
  await client.send(new DeleteObjectCommand({ Bucket: 'keep', Key: 'doc' }))
  const list = await app.inject({ method: 'GET', url: '/api/v1/workspaces', headers: ctx.tenant.headers })
  const id = (list.json().workspaces as { id: string; slug: string }[]).find((w) => w.slug === 'keep')!.id
  const wsDel = await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${id}`, headers: ctx.tenant.headers })
  t.equal(wsDel.statusCode, 409)
  t.equal(wsDel.json().error.code, 'OBJECT_LOCKED')
  const tDel = await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${ctx.tenant.id}`, headers: admin })
  t.equal(tDel.statusCode, 409)
  t.equal(tDel.json().error.code, 'OBJECT_LOCKED')
  t.match(tDel.json().error.message, /doc \(version /, 'the refusal names the locked versions')
  // Long after any retention of deleted files, the collector keeps the locked version's bytes.
  clock.advance(400 * DAY)
  await core.gc.collect()
  t.equal(
    await (
      await client.send(new (await import('@aws-sdk/client-s3')).GetObjectCommand({ Bucket: 'keep', Key: 'doc', VersionId: v }))
    ).Body!.transformToString(),
    'kept',
  )
  // Lifted, the tenant can go.
  await client.send(new PutObjectLegalHoldCommand({ Bucket: 'keep', Key: 'doc', VersionId: v, LegalHold: { Status: 'OFF' } }))
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${ctx.tenant.id}`, headers: admin })).statusCode, 204)
})

t.test(
  'boto3: every object lock operation',
  { skip: spawnSync('python3', ['-c', 'import boto3']).status !== 0 && 'python3-boto3 is not installed' },
  async (t) => {
    const ctx = await makeS3(t)
    const script = `
import boto3, datetime, sys
from botocore.config import Config
s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], region_name='us-east-1', config=Config(s3={'addressing_style': 'path'}))
s3.create_bucket(Bucket='boto-lock', ObjectLockEnabledForBucket=True)
s3.put_object_lock_configuration(Bucket='boto-lock', ObjectLockConfiguration={'ObjectLockEnabled': 'Enabled', 'Rule': {'DefaultRetention': {'Mode': 'GOVERNANCE', 'Years': 1}}})
assert s3.get_object_lock_configuration(Bucket='boto-lock')['ObjectLockConfiguration']['Rule']['DefaultRetention'] == {'Mode': 'GOVERNANCE', 'Years': 1}
v = s3.put_object(Bucket='boto-lock', Key='k', Body=b'b')['VersionId']
r = s3.get_object_retention(Bucket='boto-lock', Key='k', VersionId=v)['Retention']
assert r['Mode'] == 'GOVERNANCE', r
until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=30)
try:
    s3.put_object_retention(Bucket='boto-lock', Key='k', VersionId=v, Retention={'Mode': 'GOVERNANCE', 'RetainUntilDate': until})
    raise SystemExit('shortened GOVERNANCE without bypass')
except s3.exceptions.ClientError as e:
    assert e.response['Error']['Code'] == 'AccessDenied', e.response
s3.put_object_retention(Bucket='boto-lock', Key='k', VersionId=v, Retention={'Mode': 'GOVERNANCE', 'RetainUntilDate': until}, BypassGovernanceRetention=True)
s3.put_object_legal_hold(Bucket='boto-lock', Key='k', VersionId=v, LegalHold={'Status': 'ON'})
assert s3.get_object_legal_hold(Bucket='boto-lock', Key='k', VersionId=v)['LegalHold']['Status'] == 'ON'
h = s3.head_object(Bucket='boto-lock', Key='k', VersionId=v)
assert h['ObjectLockMode'] == 'GOVERNANCE' and h['ObjectLockLegalHoldStatus'] == 'ON', h
try:
    s3.delete_object(Bucket='boto-lock', Key='k', VersionId=v, BypassGovernanceRetention=True)
    raise SystemExit('deleted a version under legal hold')
except s3.exceptions.ClientError as e:
    assert e.response['Error']['Code'] == 'AccessDenied', e.response
s3.put_object_legal_hold(Bucket='boto-lock', Key='k', VersionId=v, LegalHold={'Status': 'OFF'})
s3.delete_object(Bucket='boto-lock', Key='k', VersionId=v, BypassGovernanceRetention=True)
print('ok')
`
    // Asynchronously: the server answering the script runs in this process.
    const r = await promisify(execFile)('python3', ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey], {
      timeout: 60_000,
    })
    t.equal(r.stdout.trim(), 'ok')
  },
)
