// @suites: pg
import t from 'tap'
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  GetObjectRetentionCommand,
  HeadObjectCommand,
  PutBucketLifecycleConfigurationCommand,
  PutObjectCommand,
  type ObjectLockRetentionMode,
} from '@aws-sdk/client-s3'
import { makeS3, s3Error, sendSigned, type S3Context } from './s3-helper'
import type { Test } from 'tap'

// Object lock's dates stay within what a date can say: a default retention past AWS's bounds
// (100 years, 36,500 days) is refused as AWS refuses it, a retain-until date past 9999 is a 400,
// and a date stored before those checks (a default rule or a version's lock) never makes a read
// of either front fail; nor does a lifecycle rule whose expiry no date can write.

const YEAR_9999_END = '9999-12-31T23:59:59.999Z'

const lockConfig = (rule: string) =>
  `<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>GOVERNANCE</Mode>${rule}</DefaultRetention></Rule></ObjectLockConfiguration>`

async function lockedBucket(ctx: S3Context, name: string) {
  await ctx.client.send(new CreateBucketCommand({ Bucket: name, ObjectLockEnabledForBucket: true }))
  return ctx.core.db.pluck('SELECT id FROM workspaces WHERE slug = ? AND deleted_at IS NULL').get(name) as string
}

/** GET, HEAD, GetObjectRetention and the API's object details of `key`: each 200, each reporting `until`. */
async function readsReport(t: Test, ctx: S3Context, bucket: string, wsId: string, key: string, until: string) {
  const got = await ctx.client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))
  t.equal(got.ObjectLockRetainUntilDate?.toISOString(), until, `GET ${key}`)
  await got.Body!.transformToByteArray()
  const head = await ctx.client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))
  t.equal(head.ObjectLockRetainUntilDate?.toISOString(), until, `HEAD ${key}`)
  const retention = await ctx.client.send(new GetObjectRetentionCommand({ Bucket: bucket, Key: key }))
  t.equal(retention.Retention?.RetainUntilDate?.toISOString(), until, `GetObjectRetention ${key}`)
  const details = await ctx.app.inject({ url: `/api/v1/workspaces/${wsId}/objects/details?key=${encodeURIComponent(key)}`, headers: ctx.tenant.headers })
  t.equal(details.statusCode, 200, details.body)
  t.equal(details.json().lock.retainUntil, until, `the API's details of ${key}`)
}

t.test('DefaultRetention beyond 100 years or 36,500 days: 400 InvalidArgument, as AWS; at the bounds, taken and applied', async (t) => {
  const ctx = await makeS3(t)
  await lockedBucket(ctx, 'bounds')
  const put = (rule: string) => sendSigned(ctx, { method: 'PUT', path: '/bounds', query: { 'object-lock': '' }, payload: lockConfig(rule) })
  for (const rule of ['<Days>36501</Days>', '<Years>101</Years>', '<Days>100000000</Days>', '<Years>274000</Years>', '<Days>99999999999999999999</Days>']) {
    const res = await put(rule)
    t.equal(res.status, 400, rule)
    t.match(res.body, /<Code>InvalidArgument<\/Code><Message>Default retention period is too large\.<\/Message>/, rule)
  }
  for (const rule of ['<Days>0</Days>', '<Years>-1</Years>']) {
    t.match(await put(rule), { status: 400, body: /<Code>InvalidRetentionPeriod<\/Code>/ }, `${rule}: still InvalidRetentionPeriod`)
  }

  t.equal((await put('<Days>36500</Days>')).status, 200)
  const before = Date.now()
  await ctx.client.send(new PutObjectCommand({ Bucket: 'bounds', Key: 'days', Body: 'x' }))
  const days = (await ctx.client.send(new HeadObjectCommand({ Bucket: 'bounds', Key: 'days' }))).ObjectLockRetainUntilDate!.getTime()
  t.ok(days >= before + 36_500 * 86_400_000 - 5000 && days <= Date.now() + 36_500 * 86_400_000 + 5000, '36,500 days ahead')

  t.equal((await put('<Years>100</Years>')).status, 200)
  await ctx.client.send(new PutObjectCommand({ Bucket: 'bounds', Key: 'years', Body: 'x' }))
  const years = (await ctx.client.send(new HeadObjectCommand({ Bucket: 'bounds', Key: 'years' }))).ObjectLockRetainUntilDate!
  t.equal(years.getUTCFullYear(), new Date().getUTCFullYear() + 100, '100 years ahead')
})

t.test('retain-until dates: the year 9999 is kept and reported everywhere; past it, a 400 on every write that takes one', async (t) => {
  const ctx = await makeS3(t)
  const wsId = await lockedBucket(ctx, 'far')
  for (const [key, until] of [
    ['z', '9999-12-31T23:59:59.999Z'],
    ['plus', '9999-12-31T23:59:59.999+01:00'],
  ] as const) {
    await ctx.client.send(
      new PutObjectCommand({ Bucket: 'far', Key: key, Body: 'x', ObjectLockMode: 'GOVERNANCE', ObjectLockRetainUntilDate: new Date(until) }),
    )
    await readsReport(t, ctx, 'far', wsId, key, new Date(until).toISOString())
  }
  // A four-digit year with a negative offset is in the year 10000: no S3 date can report it.
  const past = '9999-12-31T23:00:00-05:00'
  const headers = { 'x-amz-object-lock-mode': 'GOVERNANCE', 'x-amz-object-lock-retain-until-date': past }
  const writes: Parameters<typeof sendSigned>[1][] = [
    { method: 'PUT', path: '/far/p', headers, payload: 'x' },
    { method: 'PUT', path: '/far/c', headers: { ...headers, 'x-amz-copy-source': '/far/z' } },
    { method: 'POST', path: '/far/m', query: { uploads: '' }, headers },
    {
      method: 'PUT',
      path: '/far/z',
      query: { retention: '' },
      payload: `<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>${past}</RetainUntilDate></Retention>`,
    },
  ]
  for (const req of writes) {
    const res = await sendSigned(ctx, req)
    t.equal(res.status, 400, `${req.method} ${req.path}: ${res.body}`)
    t.match(res.body, /<Code>InvalidArgument<\/Code><Message>[^<]*must be before the year 10000/)
  }
  for (const key of ['p', 'c', 'm']) {
    t.same(await s3Error(ctx.client.send(new HeadObjectCommand({ Bucket: 'far', Key: key }))), { name: 'NotFound', status: 404 }, `${key}: nothing made`)
  }
})

t.test('a default rule or a lock stored before the bounds: writes lock for as long as a date can say, reads never fail', async (t) => {
  const ctx = await makeS3(t)
  const wsId = await lockedBucket(ctx, 'old')
  const { core, client } = ctx
  // What a server without the bounds stored for PutObjectLockConfiguration.
  const stored = async (rule: { days?: number; years?: number }, key: string) => {
    core.bucketConfigs.put(wsId, 'object-lock', { enabled: true, rule: { mode: 'COMPLIANCE', ...rule } })
    const put = await client.send(new PutObjectCommand({ Bucket: 'old', Key: key, Body: 'x' }))
    t.ok(put.VersionId, `${key}: written`)
    await readsReport(t, ctx, 'old', wsId, key, YEAR_9999_END)
    const del = await sendSigned(ctx, { method: 'DELETE', path: `/old/${key}`, query: { versionId: put.VersionId! } })
    t.equal(del.status, 403, `${key}: its version is locked, not left unlocked`)
  }
  await stored({ days: 100_000_000 }, 'days')
  await stored({ years: 274_000 }, 'years')

  // A version whose stored date no Date can hold (a lock written before the bounds).
  core.bucketConfigs.put(wsId, 'object-lock', { enabled: true })
  const v = await client.send(
    new PutObjectCommand({
      Bucket: 'old',
      Key: 'row',
      Body: 'x',
      ObjectLockMode: 'GOVERNANCE' as ObjectLockRetentionMode,
      ObjectLockRetainUntilDate: new Date(Date.now() + 86_400_000),
    }),
  )
  core.db
    .prepare('UPDATE object_versions SET lock_until = ? WHERE workspace_id = ? AND version_id = ?')
    .run(Date.now() + 100_000_000 * 86_400_000, wsId, v.VersionId!)
  await readsReport(t, ctx, 'old', wsId, 'row', YEAR_9999_END)
  t.same(await s3Error(client.send(new DeleteObjectCommand({ Bucket: 'old', Key: 'row', VersionId: v.VersionId! }))), { name: 'AccessDenied', status: 403 })
})

t.test('a lifecycle rule whose expiry no date can write: GET and HEAD answer without x-amz-expiration', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'lcx' }))
  await client.send(
    new PutBucketLifecycleConfigurationCommand({
      Bucket: 'lcx',
      LifecycleConfiguration: { Rules: [{ ID: 'far', Status: 'Enabled', Filter: { Prefix: '' }, Expiration: { Days: 9_999_999_999 } }] },
    }),
  )
  await client.send(new PutObjectCommand({ Bucket: 'lcx', Key: 'o', Body: 'x' }))
  for (const method of ['GET', 'HEAD']) {
    const res = await sendSigned(ctx, { method, path: '/lcx/o' })
    t.equal(res.status, 200, method)
    t.equal(res.headers['x-amz-expiration'], undefined, `${method}: no expiry header (it would read "Invalid Date")`)
  }
})
