// @suites: pg-all
// Object versions (#25) below the S3 operations: what writes and deletes through either front do
// to a key's versions, the quotas and the blobs, whatever the bucket's versioning state.
import t from 'tap'
import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { makeS3, s3Error } from './s3-helper'
import { fileBytes, storedBlobs, upload } from './helper'
import type { Core } from '../src/core'

interface Version {
  version_id: string
  seq: number
  file_id: string | null
  size_bytes: number
  noncurrent_at: number | null
}

const workspaceId = (core: Core, slug: string) => core.db.pluck<[string], string>('SELECT id FROM workspaces WHERE slug = ?').get(slug)!
const versions = (core: Core, ws: string, key: string) =>
  core.db
    .prepare<[string, string], Version>(
      'SELECT version_id, seq, file_id, size_bytes, noncurrent_at FROM object_versions WHERE workspace_id = ? AND object_key = ? ORDER BY seq DESC',
    )
    .all(ws, key)
const used = (core: Core, tenantId: string) => core.db.pluck<[string], number>('SELECT used_bytes FROM tenants WHERE id = ?').get(tenantId)!
const usedIn = (core: Core, ws: string) => core.db.pluck<[string], number>('SELECT used_bytes FROM workspaces WHERE id = ?').get(ws)!
/** What the quotas should say: live files plus noncurrent versions, summed from the rows themselves. */
/** (Number(): PostgreSQL's sum of bigints is a numeric, which comes as a string.) */
const stored = (core: Core, tenantId: string) =>
  Number(
    core.db
      .pluck<[string, string], number | string>(
        `SELECT (SELECT coalesce(sum(size_bytes), 0) FROM files WHERE tenant_id = ? AND deleted_at IS NULL AND status != 'failed')
            + (SELECT coalesce(sum(size_bytes), 0) FROM object_versions WHERE tenant_id = ? AND noncurrent_at IS NOT NULL)`,
      )
      .get(tenantId, tenantId)!,
  )

async function text(p: Promise<{ Body?: { transformToString(): Promise<string> } }>): Promise<string> {
  return (await p).Body!.transformToString()
}

t.test('an enabled bucket keeps every version: counted, retained by the collector, shared blobs', async (t) => {
  const { core, client, tenant, clock, app } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'vbk' }))
  const ws = workspaceId(core, 'vbk')
  core.s3.versions.setStatus(ws, 'Enabled')
  await client.send(new PutObjectCommand({ Bucket: 'vbk', Key: 'k', Body: 'one' }))
  await client.send(new PutObjectCommand({ Bucket: 'vbk', Key: 'k', Body: 'two!' }))
  await client.send(new PutObjectCommand({ Bucket: 'vbk', Key: 'k', Body: 'one' }))
  let v = versions(core, ws, 'k')
  t.same(
    v.map((r) => [r.seq, r.size_bytes, r.noncurrent_at === null]),
    [
      [3, 3, true],
      [2, 4, false],
      [1, 3, false],
    ],
  )
  t.equal(new Set(v.map((r) => r.version_id)).size, 3, 'distinct version ids')
  t.notOk(
    v.some((r) => r.version_id === 'null'),
    'no null version in an enabled bucket',
  )
  t.equal(await text(client.send(new GetObjectCommand({ Bucket: 'vbk', Key: 'k' }))), 'one')
  t.equal(used(core, tenant.id), 10, 'every stored version counts')
  t.equal(usedIn(core, ws), 10)
  t.equal((await storedBlobs(core)).length, 2, 'equal versions share one blob')

  // A delete adds a marker: the key is gone for GET and the API, every version still stored.
  await client.send(new DeleteObjectCommand({ Bucket: 'vbk', Key: 'k' }))
  v = versions(core, ws, 'k')
  t.equal(v.length, 4)
  t.equal(v[0]!.file_id, null, 'the current version is a delete marker')
  t.equal((await s3Error(client.send(new GetObjectCommand({ Bucket: 'vbk', Key: 'k' })))).status, 404)
  const list = await app.inject({ method: 'GET', url: `/api/v1/files?workspaceId=${ws}`, headers: tenant.headers })
  t.equal((list.json() as { files: unknown[] }).files.length, 0, 'the API sees no file')
  t.equal(used(core, tenant.id), 10)

  // The collector purges soft-deleted files after the retention, never a version's.
  clock.advance(core.config.deletedRetentionSeconds * 1000 + 60_000)
  const gc = await core.gc.collect(true)
  t.equal(gc.filesPurged, 0)
  t.equal(gc.blobsRemoved, 0)
  t.equal(used(core, tenant.id), 10)
  t.equal((await storedBlobs(core)).length, 2)

  // Deleting the marker for good makes the newest version current again, for both fronts.
  core.db.transaction(() => core.s3.versions.deleteVersion(ws, 'k', v[0]!.version_id))
  t.equal(await text(client.send(new GetObjectCommand({ Bucket: 'vbk', Key: 'k' }))), 'one')
  const again = await app.inject({ method: 'GET', url: `/api/v1/files?workspaceId=${ws}`, headers: tenant.headers })
  t.equal((again.json() as { files: unknown[]; total: number }).files.length, 1)
  t.equal((again.json() as { total: number }).total, 1, 'counted again')
  t.equal(used(core, tenant.id), 10)

  // Deleting the one version with its own bytes releases them, and the collector its blob.
  const two = versions(core, ws, 'k').find((r) => r.size_bytes === 4)!
  core.db.transaction(() => core.s3.versions.deleteVersion(ws, 'k', two.version_id))
  t.equal(used(core, tenant.id), 6)
  t.equal((await core.gc.collect()).filesPurged, 0, 'the retention of a version deleted for good starts then')
  clock.advance(core.config.deletedRetentionSeconds * 1000 + 60_000)
  const gc2 = await core.gc.collect()
  t.equal(gc2.filesPurged, 1)
  t.equal(gc2.blobsRemoved, 1)
  t.equal((await storedBlobs(core)).length, 1)
  t.equal(used(core, tenant.id), stored(core, tenant.id))
})

t.test('suspended: writes and deletes replace the null version, other versions stay', async (t) => {
  const { core, client, tenant } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'sbk' }))
  const ws = workspaceId(core, 'sbk')
  await client.send(new PutObjectCommand({ Bucket: 'sbk', Key: 'k', Body: 'aa' }))
  t.same(
    versions(core, ws, 'k').map((r) => r.version_id),
    ['null'],
    'an object written while unversioned is the null version',
  )
  core.s3.versions.setStatus(ws, 'Enabled')
  await client.send(new PutObjectCommand({ Bucket: 'sbk', Key: 'k', Body: 'bbb' }))
  core.s3.versions.setStatus(ws, 'Suspended')
  await client.send(new PutObjectCommand({ Bucket: 'sbk', Key: 'k', Body: 'cccc' }))
  let v = versions(core, ws, 'k')
  t.equal(v.length, 2, 'the old null version was replaced, the enabled-era version kept')
  t.same(
    v.map((r) => [r.version_id === 'null', r.size_bytes, r.noncurrent_at === null]),
    [
      [true, 4, true],
      [false, 3, false],
    ],
  )
  t.equal(used(core, tenant.id), 7)
  await client.send(new PutObjectCommand({ Bucket: 'sbk', Key: 'k', Body: 'ddddd' }))
  t.equal(versions(core, ws, 'k').length, 2)
  t.equal(used(core, tenant.id), 8)
  // A delete while suspended: the null version becomes a null delete marker.
  await client.send(new DeleteObjectCommand({ Bucket: 'sbk', Key: 'k' }))
  v = versions(core, ws, 'k')
  t.same(
    v.map((r) => [r.version_id === 'null', r.file_id === null, r.noncurrent_at === null]),
    [
      [true, true, true],
      [false, false, false],
    ],
  )
  t.equal(used(core, tenant.id), 3)
  t.equal(used(core, tenant.id), stored(core, tenant.id))
})

t.test('unversioned: one null version per key, as before versions', async (t) => {
  const { core, client, tenant } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'ubk' }))
  const ws = workspaceId(core, 'ubk')
  await client.send(new PutObjectCommand({ Bucket: 'ubk', Key: 'k', Body: 'aa' }))
  await client.send(new PutObjectCommand({ Bucket: 'ubk', Key: 'k', Body: 'bbb' }))
  t.same(
    versions(core, ws, 'k').map((r) => [r.version_id, r.size_bytes]),
    [['null', 3]],
  )
  t.equal(used(core, tenant.id), 3)
  await client.send(new DeleteObjectCommand({ Bucket: 'ubk', Key: 'k' }))
  t.same(versions(core, ws, 'k'), [], 'no delete marker in an unversioned bucket')
  t.equal(used(core, tenant.id), 0)
})

t.test('the API: an upload settles as a version, a delete in a versioned bucket adds a marker, deleting the workspace releases every version', async (t) => {
  const { core, client, tenant, app } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'abk' }))
  const ws = workspaceId(core, 'abk')
  core.s3.versions.setStatus(ws, 'Enabled')
  const bytes = fileBytes('image/png', 500)
  const { put, fileId } = await upload(app, tenant.headers, { bytes, name: 'a.png', extra: { workspaceId: ws } })
  t.equal(put.statusCode, 200, put.body)
  const key = `${fileId}/a.png`
  let v = versions(core, ws, key)
  t.equal(v.length, 1)
  t.not(v[0]!.version_id, 'null')
  t.equal(v[0]!.file_id, fileId)
  const del = await app.inject({ method: 'DELETE', url: `/api/v1/files/${fileId}`, headers: tenant.headers })
  t.equal(del.statusCode, 200, del.body)
  v = versions(core, ws, key)
  t.same(
    v.map((r) => [r.file_id, r.noncurrent_at === null]),
    [
      [null, true],
      [fileId, false],
    ],
  )
  t.equal(used(core, tenant.id), 500, 'the deleted file is a noncurrent version, still stored')
  const gone = await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${ws}`, headers: tenant.headers })
  t.equal(gone.statusCode, 200, gone.body)
  t.equal(used(core, tenant.id), 0)
  t.same(versions(core, ws, key), [])
})
