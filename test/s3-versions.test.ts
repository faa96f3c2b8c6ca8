// @suites: pg s3
// S3 versioning (#25) through the AWS SDK v3 with its default settings and through boto3: bucket
// versioning, every operation that takes a versionId, delete markers, ListObjectVersions, the null
// version and Suspended as AWS defines them, quotas and webhooks over every stored version.
import { execFile, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { promisify } from 'node:util'
import t from 'tap'
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketVersioningCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  type ListObjectVersionsCommandOutput,
  PutBucketVersioningCommand,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
  type S3Client,
} from '@aws-sdk/client-s3'
import { makeS3, pattern, s3Error, sendSigned } from './s3-helper'
import { admin } from './helper'

const enable = (client: S3Client, Bucket: string, Status: 'Enabled' | 'Suspended' = 'Enabled') =>
  client.send(new PutBucketVersioningCommand({ Bucket, VersioningConfiguration: { Status } }))
const body = async (client: S3Client, Bucket: string, Key: string, VersionId?: string) =>
  (await client.send(new GetObjectCommand({ Bucket, Key, ...(VersionId ? { VersionId } : {}) }))).Body!.transformToString()
/** Every version and marker of the bucket, walking the pages (max-keys `page`), as [key, versionId, isLatest, marker?]. */
async function allVersions(client: S3Client, Bucket: string, extra: { Prefix?: string; MaxKeys?: number } = {}) {
  const out: [string, string, boolean, boolean][] = []
  let KeyMarker: string | undefined
  let VersionIdMarker: string | undefined
  for (let pages = 0; pages < 100; pages++) {
    const r: ListObjectVersionsCommandOutput = await client.send(new ListObjectVersionsCommand({ Bucket, KeyMarker, VersionIdMarker, ...extra }))
    const rows = [
      ...(r.Versions ?? []).map((v) => [v.Key!, v.VersionId!, v.IsLatest!, false] as [string, string, boolean, boolean]),
      ...(r.DeleteMarkers ?? []).map((m) => [m.Key!, m.VersionId!, m.IsLatest!, true] as [string, string, boolean, boolean]),
    ]
    // The SDK splits versions from markers: the page's order is by key, then newest first.
    out.push(...rows)
    if (!r.IsTruncated) return out
    KeyMarker = r.NextKeyMarker
    VersionIdMarker = r.NextVersionIdMarker
  }
  throw new Error('listing did not end')
}

t.test('Get/PutBucketVersioning: Enabled, Suspended, never back to unversioned; MFA delete is 501', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'ver-cfg' }))
  t.equal((await client.send(new GetBucketVersioningCommand({ Bucket: 'ver-cfg' }))).Status, undefined)
  await enable(client, 'ver-cfg')
  t.equal((await client.send(new GetBucketVersioningCommand({ Bucket: 'ver-cfg' }))).Status, 'Enabled')
  await enable(client, 'ver-cfg', 'Suspended')
  t.equal((await client.send(new GetBucketVersioningCommand({ Bucket: 'ver-cfg' }))).Status, 'Suspended')
  t.same(
    await s3Error(client.send(new PutBucketVersioningCommand({ Bucket: 'ver-cfg', VersioningConfiguration: { Status: 'Enabled', MFADelete: 'Enabled' } }))),
    { name: 'NotImplemented', status: 501 },
  )
  t.same(await s3Error(client.send(new PutBucketVersioningCommand({ Bucket: 'ver-cfg', VersioningConfiguration: { Status: 'On' as 'Enabled' } }))), {
    name: 'MalformedXML',
    status: 400,
  })
  t.equal((await client.send(new GetBucketVersioningCommand({ Bucket: 'ver-cfg' }))).Status, 'Suspended', 'a refused request changed nothing')
  t.equal((await s3Error(client.send(new GetBucketVersioningCommand({ Bucket: 'no-such-bucket' })))).name, 'NoSuchBucket')
  // Suspending a bucket never enabled makes it Suspended, as AWS and RGW answer.
  await client.send(new CreateBucketCommand({ Bucket: 'ver-cfg2' }))
  await enable(client, 'ver-cfg2', 'Suspended')
  t.equal((await client.send(new GetBucketVersioningCommand({ Bucket: 'ver-cfg2' }))).Status, 'Suspended')
})

t.test('an enabled bucket: versionIds on every read, write, copy and delete; markers; restore by copy', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  const Bucket = 'ver-ops'
  await client.send(new CreateBucketCommand({ Bucket }))
  await enable(client, Bucket)
  const p1 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'one' }))
  const p2 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'two!' }))
  t.ok(p1.VersionId && p2.VersionId && p1.VersionId !== p2.VersionId && p1.VersionId !== 'null', 'new version ids')
  t.equal(await body(client, Bucket, 'k'), 'two!')
  t.equal(await body(client, Bucket, 'k', p1.VersionId), 'one')
  const got = await client.send(new GetObjectCommand({ Bucket, Key: 'k' }))
  t.equal(got.VersionId, p2.VersionId)
  await got.Body!.transformToString()
  const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'k', VersionId: p1.VersionId }))
  t.equal(head.ContentLength, 3)
  t.equal(head.VersionId, p1.VersionId)
  t.equal(head.ETag, p1.ETag)
  // Conditional headers apply to the version named.
  t.equal((await s3Error(client.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: p1.VersionId, IfNoneMatch: p1.ETag })))).status, 304)
  t.equal((await s3Error(client.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: p1.VersionId, IfMatch: p2.ETag })))).status, 412)
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: 'no-such-version' }))), { name: 'NoSuchVersion', status: 404 })
  const attrs = await client.send(new GetObjectAttributesCommand({ Bucket, Key: 'k', VersionId: p1.VersionId, ObjectAttributes: ['ObjectSize', 'ETag'] }))
  t.equal(attrs.ObjectSize, 3)
  t.equal(attrs.VersionId, p1.VersionId)

  // CopyObject from a version, and onto its own key (AWS's way to restore one).
  const copy = await client.send(new CopyObjectCommand({ Bucket, Key: 'copy', CopySource: `${Bucket}/k?versionId=${p1.VersionId}` }))
  t.equal(copy.CopySourceVersionId, p1.VersionId)
  t.ok(copy.VersionId && copy.VersionId !== p1.VersionId)
  t.equal(await body(client, Bucket, 'copy'), 'one')
  const restored = await client.send(new CopyObjectCommand({ Bucket, Key: 'k', CopySource: `${Bucket}/k?versionId=${encodeURIComponent(p1.VersionId!)}` }))
  t.equal(await body(client, Bucket, 'k'), 'one')
  t.equal(await body(client, Bucket, 'k', p2.VersionId), 'two!', 'the overwritten version is kept')

  // A delete without a versionId adds a marker; GET is 404, the marker by id 405.
  const d = await client.send(new DeleteObjectCommand({ Bucket, Key: 'k' }))
  t.equal(d.DeleteMarker, true)
  t.ok(d.VersionId)
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket, Key: 'k' }))), { name: 'NoSuchKey', status: 404 })
  t.equal((await s3Error(client.send(new HeadObjectCommand({ Bucket, Key: 'k', VersionId: d.VersionId })))).status, 405)
  // The headers AWS sends about a marker, which the SDK does not surface on an error.
  const onMarker = await sendSigned(ctx, { method: 'GET', path: `/${Bucket}/k` })
  t.equal(onMarker.status, 404)
  t.equal(onMarker.headers['x-amz-delete-marker'], 'true')
  t.equal(onMarker.headers['x-amz-version-id'], d.VersionId)
  const byId = await sendSigned(ctx, { method: 'GET', path: `/${Bucket}/k`, query: { versionId: d.VersionId! } })
  t.equal(byId.status, 405)
  t.match(byId.body, /<Code>MethodNotAllowed<\/Code>/)
  t.equal(byId.headers['x-amz-delete-marker'], 'true')
  t.same(
    (await allVersions(client, Bucket)).filter(([k]) => k === 'k'),
    [
      ['k', restored.VersionId!, false, false],
      ['k', p2.VersionId!, false, false],
      ['k', p1.VersionId!, false, false],
      ['k', d.VersionId!, true, true],
    ],
    'newest first (the SDK lists versions apart from markers)',
  )
  // Deleting the marker by its id undeletes the key.
  const undelete = await client.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: d.VersionId }))
  t.equal(undelete.DeleteMarker, true)
  t.equal(undelete.VersionId, d.VersionId)
  t.equal(await body(client, Bucket, 'k'), 'one')

  // DeleteObjects: one version for good, and one key's marker.
  const many = await client.send(
    new DeleteObjectsCommand({
      Bucket,
      Delete: {
        Objects: [{ Key: 'k', VersionId: p2.VersionId }, { Key: 'copy' }],
      },
    }),
  )
  const byKey = Object.fromEntries((many.Deleted ?? []).map((x) => [x.Key!, x]))
  t.equal(byKey.k?.VersionId, p2.VersionId)
  t.notOk(byKey.k?.DeleteMarker)
  t.equal(byKey.copy?.DeleteMarker, true)
  t.ok(byKey.copy?.DeleteMarkerVersionId)
  t.same(many.Errors ?? [], [])
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: p2.VersionId }))), { name: 'NoSuchVersion', status: 404 })
  t.equal(await body(client, Bucket, 'copy', copy.VersionId), 'one', 'a marker hides, never deletes')

  // Versioned multipart: Complete answers the new version; UploadPartCopy reads a version.
  const mp = await client.send(new CreateMultipartUploadCommand({ Bucket, Key: 'big' }))
  const part1 = pattern(5 * 1024 * 1024, 3)
  const u1 = await client.send(new UploadPartCommand({ Bucket, Key: 'big', UploadId: mp.UploadId, PartNumber: 1, Body: part1 }))
  const u2 = await client.send(
    new UploadPartCopyCommand({ Bucket, Key: 'big', UploadId: mp.UploadId, PartNumber: 2, CopySource: `${Bucket}/k?versionId=${p1.VersionId}` }),
  )
  t.equal(u2.CopySourceVersionId, p1.VersionId)
  const done = await client.send(
    new CompleteMultipartUploadCommand({
      Bucket,
      Key: 'big',
      UploadId: mp.UploadId,
      MultipartUpload: {
        Parts: [
          { PartNumber: 1, ETag: u1.ETag },
          { PartNumber: 2, ETag: u2.CopyPartResult!.ETag },
        ],
      },
    }),
  )
  t.ok(done.VersionId && done.VersionId !== 'null')
  const big = await client.send(new HeadObjectCommand({ Bucket, Key: 'big', VersionId: done.VersionId }))
  t.equal(big.ContentLength, part1.length + 3)
  t.equal(big.VersionId, done.VersionId)

  // A bucket with versions or markers is not empty, even with no current object.
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'k' }))
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'big' }))
  t.same(await s3Error(client.send(new DeleteBucketCommand({ Bucket }))), { name: 'BucketNotEmpty', status: 409 })
  const every = await allVersions(client, Bucket)
  await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: every.map(([Key, VersionId]) => ({ Key, VersionId })) } }))
  t.same(await allVersions(client, Bucket), [])
  await client.send(new DeleteBucketCommand({ Bucket }))
})

t.test('ListObjectVersions: prefix, delimiter, markers, max-keys, encoding-type, keyset pages', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  const Bucket = 'ver-list'
  await client.send(new CreateBucketCommand({ Bucket }))
  // One version written before versioning: the null version, listed as such.
  await client.send(new PutObjectCommand({ Bucket, Key: 'a', Body: 'a0' }))
  await enable(client, Bucket)
  const ids: Record<string, string[]> = { a: ['null'] }
  for (const [key, n] of [
    ['a', 2],
    ['b/1', 3],
    ['b/2', 1],
    ['c d', 2],
    ['\u00e9', 1],
  ] as const) {
    for (let i = 0; i < n; i++) {
      const r = await client.send(new PutObjectCommand({ Bucket, Key: key, Body: `${key}${i}` }))
      ;(ids[key] ??= []).push(r.VersionId!)
    }
  }
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'b/2' }))
  const full = await allVersions(client, Bucket)
  const expectedKeys = ['a', 'a', 'a', 'b/1', 'b/1', 'b/1', 'b/2', 'b/2', 'c d', 'c d', '\u00e9']
  t.same(full.map(([k]) => k).sort(), [...expectedKeys].sort())
  t.same(
    full.filter(([k]) => k === 'a').map(([, v, latest]) => [v, latest]),
    [...ids.a!].reverse().map((v, i) => [v, i === 0]),
    'a key: newest first, the null version oldest',
  )
  // Every page size walks the same versions, none twice, none lost (keyset inside a key too).
  for (const MaxKeys of [1, 2, 3, 5]) {
    const paged = await allVersions(client, Bucket, { MaxKeys })
    t.same(paged.map((r) => r.join('|')).sort(), full.map((r) => r.join('|')).sort(), `max-keys ${MaxKeys}`)
  }
  const pre = await client.send(new ListObjectVersionsCommand({ Bucket, Prefix: 'b/' }))
  t.same(
    (pre.Versions ?? []).map((v) => v.Key),
    ['b/1', 'b/1', 'b/1', 'b/2'],
  )
  t.same(
    (pre.DeleteMarkers ?? []).map((m) => [m.Key, m.IsLatest]),
    [['b/2', true]],
  )
  const del = await client.send(new ListObjectVersionsCommand({ Bucket, Delimiter: '/' }))
  t.same(
    (del.CommonPrefixes ?? []).map((p) => p.Prefix),
    ['b/'],
  )
  t.same([...new Set((del.Versions ?? []).map((v) => v.Key))], ['a', 'c d', '\u00e9'])
  // A key-marker alone resumes after every version of that key; with a version-id-marker, after that version.
  const afterA = await client.send(new ListObjectVersionsCommand({ Bucket, KeyMarker: 'a' }))
  t.notOk((afterA.Versions ?? []).some((v) => v.Key === 'a'))
  const inA = await client.send(new ListObjectVersionsCommand({ Bucket, KeyMarker: 'a', VersionIdMarker: ids.a![2], MaxKeys: 2 }))
  t.same(
    (inA.Versions ?? []).map((v) => [v.Key, v.VersionId]),
    [
      ['a', ids.a![1]],
      ['a', 'null'],
    ],
  )
  t.equal(inA.IsTruncated, true)
  t.equal(inA.NextKeyMarker, 'a')
  t.equal(inA.NextVersionIdMarker, 'null')
  t.same(await s3Error(client.send(new ListObjectVersionsCommand({ Bucket, VersionIdMarker: ids.a![0] }))), { name: 'InvalidArgument', status: 400 })
  // encoding-type=url: keys encoded as AWS does (the SDK decodes them back).
  const raw = await sendSigned(ctx, { method: 'GET', path: `/${Bucket}`, query: { versions: '', 'encoding-type': 'url', prefix: 'c' } })
  t.equal(raw.status, 200)
  t.match(raw.body, /<Key>c%20d<\/Key>/)
  t.match(raw.body, /<EncodingType>url<\/EncodingType>/)
  const enc = await client.send(new ListObjectVersionsCommand({ Bucket, EncodingType: 'url', Prefix: '\u00e9' }))
  t.same(
    (enc.Versions ?? []).map((v) => v.Key),
    ['%C3%A9'],
    'UTF-8 percent-encoded (SDK v3 leaves decoding to the caller)',
  )
})

t.test('the null version and Suspended, as AWS defines them', async (t) => {
  const { client } = await makeS3(t)
  const Bucket = 'ver-null'
  await client.send(new CreateBucketCommand({ Bucket }))
  const plain = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'plain' }))
  t.equal(plain.VersionId, undefined, 'no x-amz-version-id in a bucket never versioned')
  t.same(
    (await allVersions(client, Bucket)).map(([, v, latest]) => [v, latest]),
    [['null', true]],
  )
  await enable(client, Bucket)
  const v1 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'enabled' }))
  t.equal(await body(client, Bucket, 'k', 'null'), 'plain', 'the object from before is the null version')
  await enable(client, Bucket, 'Suspended')
  const s1 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'suspended' }))
  t.equal(s1.VersionId, undefined, 'a write while suspended answers no version id (AWS, RGW)')
  const headNull = await client.send(new HeadObjectCommand({ Bucket, Key: 'k' }))
  t.equal(headNull.VersionId, 'null', 'reads name the null version')
  t.same(
    (await allVersions(client, Bucket)).map(([, v, latest]) => [v, latest]),
    [
      ['null', true],
      [v1.VersionId, false],
    ],
    'the earlier null version was replaced',
  )
  t.equal(await body(client, Bucket, 'k', 'null'), 'suspended')
  const d = await client.send(new DeleteObjectCommand({ Bucket, Key: 'k' }))
  t.equal(d.DeleteMarker, true)
  t.equal(d.VersionId, 'null', 'a delete while suspended is a null marker')
  t.same(
    (await allVersions(client, Bucket)).map(([, v, latest, marker]) => [v, latest, marker]),
    [
      [v1.VersionId, false, false],
      ['null', true, true],
    ],
  )
  // Deleting the enabled-era version by id while suspended deletes it for good.
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: v1.VersionId }))
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: 'null' }))
  t.same(await allVersions(client, Bucket), [])
})

t.test('quotas count every stored version; a version deleted for good frees its bytes', async (t) => {
  const { client, app, tenant } = await makeS3(t, {}, { quotaBytes: 10 })
  const Bucket = 'ver-quota'
  await client.send(new CreateBucketCommand({ Bucket }))
  await enable(client, Bucket)
  const v1 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: '123456' }))
  // Overwriting in place would fit an unversioned bucket; here the first version stays stored.
  t.same(await s3Error(client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'abcdef' }))), { name: 'QuotaExceeded', status: 403 })
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'k' }))
  t.same(
    await s3Error(client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'abcdef' }))),
    { name: 'QuotaExceeded', status: 403 },
    'a marker frees nothing',
  )
  await client.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: v1.VersionId }))
  await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'abcdef' }))
  const info = await app.inject({ method: 'GET', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin })
  t.match(info.json(), { usedBytes: 6, quotaBytes: 10 })
})

t.test('webhooks of a versioned bucket carry the versionId', async (t) => {
  const { client, core } = await makeS3(t)
  const Bucket = 'ver-hooks'
  await client.send(new CreateBucketCommand({ Bucket }))
  core.db.prepare("UPDATE workspaces SET webhook_url = 'http://127.0.0.1:9/hook' WHERE slug = ?").run(Bucket)
  await client.send(new PutObjectCommand({ Bucket, Key: 'plain', Body: 'x' }))
  await enable(client, Bucket)
  const v1 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'one' }))
  const v2 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'two' }))
  const events = core.db
    .prepare<[], { event: string; payload: string }>('SELECT event, payload FROM outbox ORDER BY created_at, id')
    .all()
    .map((e) => ({ event: e.event, ...(JSON.parse(e.payload) as { versionId?: string; file: { originalName: string } }) }))
  t.same(
    events.map((e) => [e.event, e.file.originalName, e.versionId]),
    [
      ['file.uploaded', 'plain', undefined],
      ['file.uploaded', 'k', v1.VersionId],
      // The overwritten version leaves the API's view (file.deleted) but stays a version.
      ['file.deleted', 'k', v1.VersionId],
      ['file.uploaded', 'k', v2.VersionId],
    ],
  )
})

t.test("conditional deletes: If-Match (and RGW's last-modified-time and size) on DeleteObject and DeleteObjects, per version", async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  const Bucket = 'ver-cond'
  await client.send(new CreateBucketCommand({ Bucket }))
  await enable(client, Bucket)
  const v1 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'one' }))
  const v2 = await client.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'three' }))
  t.same(await s3Error(client.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: v1.VersionId, IfMatch: v2.ETag }))), {
    name: 'PreconditionFailed',
    status: 412,
  })
  t.equal(await body(client, Bucket, 'k', v1.VersionId), 'one', 'a failed condition deletes nothing')
  const bySize = await sendSigned(ctx, { method: 'DELETE', path: `/${Bucket}/k`, query: { versionId: v1.VersionId! }, headers: { 'x-amz-if-match-size': '4' } })
  t.equal(bySize.status, 412)
  const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'k', VersionId: v1.VersionId }))
  const byTime = await sendSigned(ctx, {
    method: 'DELETE',
    path: `/${Bucket}/k`,
    query: { versionId: v1.VersionId! },
    headers: { 'x-amz-if-match-last-modified-time': head.LastModified!.toUTCString(), 'x-amz-if-match-size': '3' },
  })
  t.equal(byTime.status, 204)
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: v1.VersionId }))), { name: 'NoSuchVersion', status: 404 })
  // A version that is gone: the delete is a no-op, whatever its condition.
  t.equal((await client.send(new DeleteObjectCommand({ Bucket, Key: 'k', VersionId: v1.VersionId, IfMatch: '"bad"' }))).$metadata.httpStatusCode, 204)
  // Without a versionId the condition is on the current version; a current marker matches nothing.
  t.equal((await s3Error(client.send(new DeleteObjectCommand({ Bucket, Key: 'k', IfMatch: v1.ETag })))).status, 412)
  t.equal((await client.send(new DeleteObjectCommand({ Bucket, Key: 'k', IfMatch: v2.ETag }))).DeleteMarker, true)
  t.equal((await s3Error(client.send(new DeleteObjectCommand({ Bucket, Key: 'k', IfMatch: '*' })))).status, 412)
  const many = await client.send(
    new DeleteObjectsCommand({
      Bucket,
      Delete: {
        Objects: [
          { Key: 'k', VersionId: v2.VersionId, ETag: '"bad"' },
          { Key: 'k', VersionId: v2.VersionId, ETag: v2.ETag, Size: 5 },
        ],
      },
    }),
  )
  t.same(
    (many.Errors ?? []).map((e) => [e.Key, e.VersionId, e.Code]),
    [['k', v2.VersionId, 'PreconditionFailed']],
  )
  t.same(
    (many.Deleted ?? []).map((d) => [d.Key, d.VersionId]),
    [['k', v2.VersionId]],
  )
})

// Debian's boto3 (or COFFER_TEST_BOTO3_PYTHON), as the other boto3 tests find it.
const python = [process.env.COFFER_TEST_BOTO3_PYTHON, '/root/.pyenv/versions/3.11.7/bin/python3', 'python3'].find(
  (p) => p !== undefined && (p === 'python3' || fs.existsSync(p)) && spawnSync(p, ['-c', 'import boto3'], { encoding: 'utf8' }).status === 0,
)

t.test('boto3: every versioning operation', { skip: python === undefined && 'no python3 with boto3' }, async (t) => {
  const ctx = await makeS3(t)
  const script = `
import sys, boto3, botocore
from botocore.config import Config
endpoint, key, secret = sys.argv[1:4]
c = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret, region_name='us-east-1',
                 config=Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))
B = 'ver-boto'
c.create_bucket(Bucket=B)
print('status', c.get_bucket_versioning(Bucket=B).get('Status'))
c.put_bucket_versioning(Bucket=B, VersioningConfiguration={'Status': 'Enabled'})
print('status', c.get_bucket_versioning(Bucket=B).get('Status'))
v1 = c.put_object(Bucket=B, Key='k', Body=b'one')['VersionId']
v2 = c.put_object(Bucket=B, Key='k', Body=b'two')['VersionId']
print('distinct', v1 != v2 and 'null' not in (v1, v2))
print('get', c.get_object(Bucket=B, Key='k', VersionId=v1)['Body'].read().decode(), c.get_object(Bucket=B, Key='k')['VersionId'] == v2)
print('head', c.head_object(Bucket=B, Key='k', VersionId=v1)['ContentLength'])
print('attrs', c.get_object_attributes(Bucket=B, Key='k', VersionId=v1, ObjectAttributes=['ObjectSize'])['ObjectSize'])
cp = c.copy_object(Bucket=B, Key='copy', CopySource={'Bucket': B, 'Key': 'k', 'VersionId': v1})
print('copy', cp['CopySourceVersionId'] == v1, c.get_object(Bucket=B, Key='copy')['Body'].read().decode())
d = c.delete_object(Bucket=B, Key='k')
print('marker', d['DeleteMarker'], d['VersionId'] not in (v1, v2))
try:
    c.get_object(Bucket=B, Key='k')
except botocore.exceptions.ClientError as e:
    print('gone', e.response['Error']['Code'])
mp = c.create_multipart_upload(Bucket=B, Key='big')
part = c.upload_part(Bucket=B, Key='big', UploadId=mp['UploadId'], PartNumber=1, Body=b'x' * (5 * 1024 * 1024))
done = c.complete_multipart_upload(Bucket=B, Key='big', UploadId=mp['UploadId'], MultipartUpload={'Parts': [{'PartNumber': 1, 'ETag': part['ETag']}]})
print('multipart', bool(done.get('VersionId')) and done['VersionId'] != 'null')
seen = []
for page in c.get_paginator('list_object_versions').paginate(Bucket=B, PaginationConfig={'PageSize': 2}):
    seen += [(v['Key'], v['IsLatest']) for v in page.get('Versions', [])]
    seen += [(m['Key'], 'marker', m['IsLatest']) for m in page.get('DeleteMarkers', [])]
print('listed', sorted(seen, key=str))
r = c.delete_objects(Bucket=B, Delete={'Objects': [{'Key': 'k', 'VersionId': v1}, {'Key': 'copy'}]})
print('deleted', sorted((x['Key'], x.get('VersionId') == v1, x.get('DeleteMarker', False), bool(x.get('DeleteMarkerVersionId'))) for x in r['Deleted']))
c.put_bucket_versioning(Bucket=B, VersioningConfiguration={'Status': 'Suspended'})
print('suspended', c.put_object(Bucket=B, Key='s', Body=b's').get('VersionId'), c.head_object(Bucket=B, Key='s')['VersionId'])
`
  const run = await promisify(execFile)(python!, ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey], {
    encoding: 'utf8',
    timeout: 120_000,
  }).catch((e: { stdout: string; stderr: string }) => e)
  t.equal(
    run.stdout,
    [
      'status None',
      'status Enabled',
      'distinct True',
      'get one True',
      'head 3',
      'attrs 3',
      'copy True one',
      'marker True True',
      'gone NoSuchKey',
      'multipart True',
      "listed [('big', True), ('copy', True), ('k', 'marker', True), ('k', False), ('k', False)]",
      "deleted [('copy', False, True, True), ('k', True, False, False)]",
      'suspended None null',
      '',
    ].join('\n'),
    run.stderr,
  )
})
