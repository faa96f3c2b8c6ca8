// @suites: pg-all
// A file's versions through the Storage Brain API (#25): the listing of its key's versions, the
// restore of one by copy over the current version, and the deleted files that can be restored.
// The versions are made through S3 (the AWS SDK), as users make them; the API reads and restores.
import { createHash } from 'node:crypto'
import t from 'tap'
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  PutObjectLockConfigurationCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3'
import { completeCommand, makeS3, pattern, type S3Context } from './s3-helper'
import { bearer, createTenant, putContent, handshake } from './helper'

const sha = (s: string) => createHash('sha256').update(s).digest('hex')

async function bucket(ctx: S3Context, name: string, versioned: boolean): Promise<string> {
  await ctx.client.send(new CreateBucketCommand({ Bucket: name }))
  if (versioned) await ctx.client.send(new PutBucketVersioningCommand({ Bucket: name, VersioningConfiguration: { Status: 'Enabled' } }))
  const { workspaces } = (await ctx.app.inject({ url: '/api/v1/workspaces', headers: ctx.tenant.headers })).json()
  return (workspaces as { id: string; slug: string }[]).find((w) => w.slug === name)!.id
}

const put = (client: S3Client, Bucket: string, Key: string, Body: string) => client.send(new PutObjectCommand({ Bucket, Key, Body }))

async function currentFile(ctx: S3Context, workspaceId: string, name: string): Promise<{ id: string; sizeBytes: number }> {
  const { files } = (await ctx.app.inject({ url: `/api/v1/files?workspaceId=${workspaceId}`, headers: ctx.tenant.headers })).json()
  return (files as { id: string; originalName: string; sizeBytes: number }[]).find((f) => f.originalName === name)!
}

const used = async (ctx: S3Context) => (await ctx.app.inject({ url: '/api/v1/tenant/quota', headers: ctx.tenant.headers })).json().usedBytes as number

t.test('a versioned key: its versions newest first, paged; a restore copies an older one over the current', async (t) => {
  const ctx = await makeS3(t, { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' })
  const { app, client } = ctx
  const headers = ctx.tenant.headers
  const ws = await bucket(ctx, 'docs', true)
  t.equal((await app.inject({ method: 'PATCH', url: `/api/v1/workspaces/${ws}`, headers, payload: { webhookUrl: 'http://127.0.0.1:1/hook' } })).statusCode, 200)
  const v1 = (await put(client, 'docs', 'notes/plan.txt', 'first draft')).VersionId!
  const v2 = (await put(client, 'docs', 'notes/plan.txt', 'second draft, longer')).VersionId!
  const v3 = (await put(client, 'docs', 'notes/plan.txt', 'third')).VersionId!
  const current = await currentFile(ctx, ws, 'plan.txt')
  const usedBefore = await used(ctx)
  t.equal(usedBefore, 'first draft'.length + 'second draft, longer'.length + 'third'.length, 'every version counts')

  const list = await app.inject({ url: `/api/v1/files/${current.id}/versions`, headers })
  t.equal(list.statusCode, 200)
  const body = list.json()
  t.equal(body.total, 3)
  t.equal(body.nextCursor, null)
  t.same(
    body.versions.map((v: { versionId: string; isLatest: boolean; sizeBytes: number; sha256: string; isDeleteMarker: boolean }) => [
      v.versionId,
      v.isLatest,
      v.isDeleteMarker,
      v.sizeBytes,
      v.sha256,
    ]),
    [
      [v3, true, false, 5, sha('third')],
      [v2, false, false, 20, sha('second draft, longer')],
      [v1, false, false, 11, sha('first draft')],
    ],
    'newest first, the current one marked, sizes and content hashes',
  )
  t.equal(body.versions[0].fileId, current.id, 'the current version is the live file')
  t.match(body.versions[2].createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)

  // Keyset pages of 2: every version once.
  const p1 = (await app.inject({ url: `/api/v1/files/${current.id}/versions?limit=2`, headers })).json()
  t.same(
    p1.versions.map((v: { versionId: string }) => v.versionId),
    [v3, v2],
  )
  t.type(p1.nextCursor, 'string')
  const p2 = (await app.inject({ url: `/api/v1/files/${current.id}/versions?limit=2&cursor=${p1.nextCursor}`, headers })).json()
  t.same(
    p2.versions.map((v: { versionId: string }) => v.versionId),
    [v1],
  )
  t.equal(p2.nextCursor, null)
  t.equal(p2.total, 3)

  // Restore the first draft: a new current version with its bytes; the others stay.
  const restored = await app.inject({ method: 'POST', url: `/api/v1/files/${current.id}/versions/${v1}/restore`, headers })
  t.equal(restored.statusCode, 201, restored.body)
  const file = restored.json()
  t.not(file.id, current.id, 'a new file, the new current version')
  t.match(file, { originalName: 'plan.txt', sizeBytes: 11, processingStatus: 'completed', workspaceId: ws })
  const download = await app.inject({ url: `/api/v1/files/${file.id}/download`, headers })
  t.equal(download.statusCode, 200)
  t.equal(download.body, 'first draft', 'the restored bytes are downloaded')
  t.equal((await app.inject({ url: `/api/v1/files/${current.id}`, headers })).statusCode, 404, 'the previous current file is no longer current')
  t.equal(
    await (await client.send(new GetObjectCommand({ Bucket: 'docs', Key: 'notes/plan.txt' }))).Body!.transformToString(),
    'first draft',
    'S3 reads it too',
  )
  t.equal(await used(ctx), usedBefore + 11, 'the restored version counts against the quota, like any write')
  const after = (await app.inject({ url: `/api/v1/files/${file.id}/versions`, headers })).json()
  t.equal(after.total, 4, 'every old version stays')
  t.match(after.versions[0], { fileId: file.id, isLatest: true, sizeBytes: 11, sha256: sha('first draft') })
  t.not(after.versions[0].versionId, v1, 'with a versionId of its own')
  t.same(
    after.versions.slice(1).map((v: { versionId: string; isLatest: boolean }) => [v.versionId, v.isLatest]),
    [
      [v3, false],
      [v2, false],
      [v1, false],
    ],
  )
  // The id held before the restore (now a noncurrent version's file) still reaches the key.
  t.same((await app.inject({ url: `/api/v1/files/${current.id}/versions`, headers })).json(), after)

  // Webhooks as for an upload: file.uploaded for the restored file, file.deleted for the one it replaced.
  const { deliveries } = (await app.inject({ url: '/api/v1/webhooks/deliveries?limit=100', headers })).json()
  const events = (deliveries as { event: string; fileId: string }[]).map((d) => `${d.event} ${d.fileId}`)
  t.ok(events.includes(`file.uploaded ${file.id}`), 'file.uploaded for the restored version')
  t.ok(events.includes(`file.deleted ${current.id}`), 'file.deleted for the version it replaced')

  // Restoring the current version changes nothing.
  const again = await app.inject({ method: 'POST', url: `/api/v1/files/${file.id}/versions/${after.versions[0].versionId}/restore`, headers })
  t.equal(again.statusCode, 200)
  t.equal(again.json().id, file.id)
  t.equal((await app.inject({ url: `/api/v1/files/${file.id}/versions`, headers })).json().total, 4)
})

t.test('bad ids, bad cursors, delete markers, another tenant and the quota are refused, changing nothing', async (t) => {
  const ctx = await makeS3(t, {}, { quotaBytes: 100 })
  const { app, client } = ctx
  const headers = ctx.tenant.headers
  const ws = await bucket(ctx, 'refusals', true)
  const old = (await put(client, 'refusals', 'k', 'x'.repeat(40))).VersionId!
  await put(client, 'refusals', 'k', 'y'.repeat(30))
  const current = await currentFile(ctx, ws, 'k')
  const usedBefore = await used(ctx)
  const code = (r: { statusCode: number; json(): { error: { code: string } } }) => [r.statusCode, r.json().error.code]

  t.same(code(await app.inject({ url: '/api/v1/files/not-a-uuid/versions', headers })), [404, 'FILE_NOT_FOUND'])
  t.same(code(await app.inject({ url: `/api/v1/files/${crypto.randomUUID()}/versions`, headers })), [404, 'FILE_NOT_FOUND'])
  t.same(code(await app.inject({ url: `/api/v1/files/${current.id}/versions?cursor=bogus`, headers })), [400, 'VALIDATION_ERROR'])
  t.same(code(await app.inject({ url: `/api/v1/files/${current.id}/versions?limit=0`, headers })), [400, 'VALIDATION_ERROR'])
  t.same(code(await app.inject({ url: `/api/v1/files/${current.id}/versions?size=1`, headers })), [400, 'VALIDATION_ERROR'])
  t.same(code(await app.inject({ method: 'POST', url: `/api/v1/files/${current.id}/versions/nope/restore`, headers })), [404, 'VERSION_NOT_FOUND'])
  t.same(code(await app.inject({ method: 'POST', url: `/api/v1/files/${current.id}/versions/${'v'.repeat(900)}/restore`, headers })), [
    404,
    'VERSION_NOT_FOUND',
  ])
  t.same(code(await app.inject({ method: 'POST', url: `/api/v1/files/bad/versions/${old}/restore`, headers })), [404, 'FILE_NOT_FOUND'])
  t.same(code(await app.inject({ url: '/api/v1/files/deleted?cursor=W10', headers })), [400, 'VALIDATION_ERROR'])
  t.same(code(await app.inject({ url: `/api/v1/files/deleted?workspaceId=${crypto.randomUUID()}`, headers })), [404, 'WORKSPACE_NOT_FOUND'])

  // Another tenant: the same ids are 404, and nothing of this tenant's is restored or listed.
  const other = await createTenant(app)
  const foreign = bearer(other.apiKey)
  t.same(code(await app.inject({ url: `/api/v1/files/${current.id}/versions`, headers: foreign })), [404, 'FILE_NOT_FOUND'])
  t.same(code(await app.inject({ method: 'POST', url: `/api/v1/files/${current.id}/versions/${old}/restore`, headers: foreign })), [404, 'FILE_NOT_FOUND'])
  t.same(code(await app.inject({ url: `/api/v1/files/deleted?workspaceId=${ws}`, headers: foreign })), [404, 'WORKSPACE_NOT_FOUND'])

  // The quota: 70 of 100 bytes used; restoring 40 more does not fit.
  const refused = await app.inject({ method: 'POST', url: `/api/v1/files/${current.id}/versions/${old}/restore`, headers })
  t.same(code(refused), [403, 'QUOTA_EXCEEDED'])
  t.match(refused.json().error.details, { quotaBytes: 100, requestedBytes: 40 })
  t.equal(await used(ctx), usedBefore, 'nothing counted')
  t.equal((await app.inject({ url: `/api/v1/files/${current.id}`, headers })).statusCode, 200, 'the current version is still current')
  t.equal((await app.inject({ url: `/api/v1/files/${current.id}/versions`, headers })).json().total, 2)

  // A delete marker has nothing to restore.
  const marker = (await client.send(new DeleteObjectCommand({ Bucket: 'refusals', Key: 'k' }))).VersionId!
  const byOld = (await app.inject({ url: `/api/v1/files/${current.id}/versions`, headers })).json()
  t.match(byOld.versions[0], { versionId: marker, isLatest: true, isDeleteMarker: true, fileId: null, sizeBytes: 0, sha256: null })
  const onMarker = await app.inject({ method: 'POST', url: `/api/v1/files/${current.id}/versions/${marker}/restore`, headers })
  t.same(code(onMarker), [400, 'VALIDATION_ERROR'])
  t.match(onMarker.json().error.details.errors, [{ path: '/versionId' }])
})

t.test('a deleted key is listed with its versions and restored through them', async (t) => {
  const ctx = await makeS3(t)
  const { app, client } = ctx
  const headers = ctx.tenant.headers
  const ws = await bucket(ctx, 'trash', true)
  const plain = await bucket(ctx, 'plain', false)
  await put(client, 'trash', 'a.txt', 'alpha one')
  const a2 = (await put(client, 'trash', 'a.txt', 'alpha two')).VersionId!
  await put(client, 'trash', 'b.txt', 'bravo')
  await put(client, 'plain', 'c.txt', 'charlie')
  const a = await currentFile(ctx, ws, 'a.txt')
  const b = await currentFile(ctx, ws, 'b.txt')
  t.same((await app.inject({ url: '/api/v1/files/deleted', headers })).json(), { files: [], nextCursor: null, total: 0 })

  // Deleted through the API (a delete marker in a versioned bucket) and through S3.
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/files/${a.id}`, headers })).statusCode, 200)
  ctx.clock.advance(1000)
  await client.send(new DeleteObjectCommand({ Bucket: 'trash', Key: 'b.txt' }))
  // Unversioned: gone for good, nothing to list.
  await client.send(new DeleteObjectCommand({ Bucket: 'plain', Key: 'c.txt' }))
  t.equal((await app.inject({ url: `/api/v1/files/${a.id}`, headers })).statusCode, 404, 'the API no longer sees the key')

  const deleted = (await app.inject({ url: '/api/v1/files/deleted', headers })).json()
  t.equal(deleted.total, 2)
  t.match(deleted.files, [
    { fileId: b.id, originalName: 'b.txt', sizeBytes: 5, workspaceId: ws },
    { fileId: a.id, versionId: a2, originalName: 'a.txt', sizeBytes: 9, workspaceId: ws, fileType: 'application/octet-stream' },
  ])
  t.ok(Date.parse(deleted.files[0].deletedAt) > Date.parse(deleted.files[1].deletedAt), 'newest deletion first')
  const paged = (await app.inject({ url: '/api/v1/files/deleted?limit=1', headers })).json()
  t.equal(paged.files[0].fileId, b.id)
  const rest = (await app.inject({ url: `/api/v1/files/deleted?limit=1&cursor=${paged.nextCursor}`, headers })).json()
  t.same([rest.files[0].fileId, rest.nextCursor], [a.id, null], 'pages by keyset')
  t.equal((await app.inject({ url: `/api/v1/files/deleted?workspaceId=${plain}`, headers })).json().total, 0, 'filtered by workspace')
  t.equal((await app.inject({ url: '/api/v1/files/deleted', headers: { ...headers, 'x-workspace-id': ws } })).json().total, 2)

  // Its versions through the listed file id, the marker current; restoring the newest content.
  const versions = (await app.inject({ url: `/api/v1/files/${a.id}/versions`, headers })).json()
  t.equal(versions.total, 3)
  t.match(versions.versions[0], { isDeleteMarker: true, isLatest: true })
  const restored = await app.inject({ method: 'POST', url: `/api/v1/files/${a.id}/versions/${a2}/restore`, headers })
  t.equal(restored.statusCode, 201)
  const back = restored.json()
  t.equal((await app.inject({ url: `/api/v1/files/${back.id}/download`, headers })).body, 'alpha two')
  t.equal((await currentFile(ctx, ws, 'a.txt')).id, back.id, 'listed again')
  t.same(
    (await app.inject({ url: '/api/v1/files/deleted', headers })).json().files.map((f: { fileId: string }) => f.fileId),
    [b.id],
    'and no longer deleted',
  )
  t.equal((await app.inject({ url: `/api/v1/files/${back.id}/versions`, headers })).json().total, 4, 'the marker stays a version')

  // Keys deleted in one DeleteObjects share their deletion time: pages of 2 still visit each once.
  const names = ['k/one', 'k/two', 'k/three', 'k/four']
  for (const n of names) await put(client, 'trash', n, n)
  await client.send(new DeleteObjectsCommand({ Bucket: 'trash', Delete: { Objects: names.map((Key) => ({ Key })) } }))
  for (const scope of ['', `&workspaceId=${ws}`]) {
    const seen: string[] = []
    let cursor = ''
    for (let i = 0; i < 10; i++) {
      const page = (await app.inject({ url: `/api/v1/files/deleted?limit=2${scope}${cursor}`, headers })).json()
      t.equal(page.total, 5)
      seen.push(...page.files.map((f: { originalName: string }) => f.originalName))
      if (page.nextCursor === null) break
      cursor = `&cursor=${page.nextCursor}`
    }
    t.same(seen.slice(0, 4).sort(), ['four', 'one', 'three', 'two'], `the batch first, each once${scope ? ' (one workspace)' : ''}`)
    t.same(seen.slice(4), ['b.txt'], 'then the older deletion')
  }
})

t.test('unversioned workspaces and files without one: a single null version, restoring it changes nothing', async (t) => {
  const ctx = await makeS3(t)
  const { app, client } = ctx
  const headers = ctx.tenant.headers
  const ws = await bucket(ctx, 'flat', false)
  await put(client, 'flat', 'only.txt', 'just this')
  const f = await currentFile(ctx, ws, 'only.txt')
  const list = (await app.inject({ url: `/api/v1/files/${f.id}/versions`, headers })).json()
  t.match(list, {
    total: 1,
    nextCursor: null,
    versions: [{ versionId: 'null', fileId: f.id, isLatest: true, isDeleteMarker: false, sha256: sha('just this') }],
  })
  const same = await app.inject({ method: 'POST', url: `/api/v1/files/${f.id}/versions/null/restore`, headers })
  t.equal(same.statusCode, 200)
  t.equal(same.json().id, f.id)

  // A file uploaded through the API with no workspace is no object version: its own single version.
  const h = await handshake(app, headers, { fileType: 'image/png', fileName: 'loose.png' })
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex')
  t.equal((await putContent(app, h, png)).statusCode, 200)
  const id = h.json().fileId as string
  const loose = (await app.inject({ url: `/api/v1/files/${id}/versions`, headers })).json()
  t.match(loose, { total: 1, versions: [{ versionId: 'null', fileId: id, isLatest: true, sizeBytes: png.length }] })
  t.equal((await app.inject({ method: 'POST', url: `/api/v1/files/${id}/versions/null/restore`, headers })).statusCode, 200)
  t.equal((await app.inject({ method: 'POST', url: `/api/v1/files/${id}/versions/other/restore`, headers })).statusCode, 404)
  // A pending upload has no version yet.
  const pending = await handshake(app, headers, { fileType: 'image/png', fileName: 'later.png' })
  t.match((await app.inject({ url: `/api/v1/files/${pending.json().fileId}/versions`, headers })).json(), { versions: [], total: 0 })
})

t.test('a restored multipart version keeps its ETag, parts and metadata; it takes the bucket default lock, not the ACL', async (t) => {
  const ctx = await makeS3(t)
  const { app, client } = ctx
  const headers = ctx.tenant.headers
  await client.send(new CreateBucketCommand({ Bucket: 'held', ObjectLockEnabledForBucket: true }))
  const ws = (await app.inject({ url: '/api/v1/workspaces', headers })).json().workspaces.find((w: { slug: string }) => w.slug === 'held').id as string
  const part1 = pattern(5 * 1024 * 1024, 3)
  const part2 = pattern(1000, 4)
  const mp = await client.send(
    new CreateMultipartUploadCommand({ Bucket: 'held', Key: 'big.bin', ContentType: 'application/x-test', Metadata: { origin: 'camera' }, ACL: 'public-read' }),
  )
  const etags: [number, string | undefined][] = []
  for (const [n, Body] of [part1, part2].entries()) {
    etags.push([n + 1, (await client.send(new UploadPartCommand({ Bucket: 'held', Key: 'big.bin', UploadId: mp.UploadId, PartNumber: n + 1, Body }))).ETag])
  }
  const done = await client.send(completeCommand('held', 'big.bin', mp.UploadId, etags))
  await put(client, 'held', 'big.bin', 'small now')
  // The default retention starts applying to versions written from now on.
  await client.send(
    new PutObjectLockConfigurationCommand({
      Bucket: 'held',
      ObjectLockConfiguration: { ObjectLockEnabled: 'Enabled', Rule: { DefaultRetention: { Mode: 'GOVERNANCE', Days: 1 } } },
    }),
  )
  const current = await currentFile(ctx, ws, 'big.bin')
  const restored = await app.inject({ method: 'POST', url: `/api/v1/files/${current.id}/versions/${done.VersionId}/restore`, headers })
  t.equal(restored.statusCode, 201, restored.body)
  t.match(restored.json(), { sizeBytes: part1.length + part2.length, fileType: 'application/x-test' })

  const head = await client.send(new HeadObjectCommand({ Bucket: 'held', Key: 'big.bin' }))
  t.equal(head.ETag, done.ETag, 'the multipart ETag')
  t.same(head.Metadata, { origin: 'camera' }, 'its metadata')
  t.equal(head.ContentType, 'application/x-test')
  t.not(head.VersionId, done.VersionId, 'a new version')
  t.equal(head.ObjectLockMode, 'GOVERNANCE', "the bucket's default retention")
  const second = await client.send(new GetObjectCommand({ Bucket: 'held', Key: 'big.bin', PartNumber: 2 }))
  t.equal(second.PartsCount, 2, 'its part layout')
  t.ok(Buffer.from(await second.Body!.transformToByteArray()).equals(part2), 'part 2 reads as uploaded')
  const acl = await client.send(new GetObjectAclCommand({ Bucket: 'held', Key: 'big.bin' }))
  t.notOk(
    acl.Grants?.some((g) => g.Grantee?.URI?.endsWith('/AllUsers')),
    'the old public-read ACL is not copied (a copy is private unless asked)',
  )
  const old = await client.send(new GetObjectAclCommand({ Bucket: 'held', Key: 'big.bin', VersionId: done.VersionId }))
  t.ok(
    old.Grants?.some((g) => g.Grantee?.URI?.endsWith('/AllUsers')),
    'the version restored keeps its own',
  )
})
