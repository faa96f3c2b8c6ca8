// @suites: pg-all
import t from 'tap'
import { createHash } from 'node:crypto'
import { CreateBucketCommand, PutObjectCommand, PutObjectLegalHoldCommand, PutBucketVersioningCommand, DeleteObjectCommand } from '@aws-sdk/client-s3'
import { bearer, createTenant, fileBytes, handshake, makeApp, putContent, sqliteOnly, upload, type Handshake } from './helper'
import { makeS3 } from './s3-helper'
import type { App } from '../src/http/types'

// The bucket browser's API (#31): a workspace's objects by prefix and delimiter (ListObjectsV2's
// listing, keyset-paged by `after`), one object's details, uploads to a chosen key, file counts
// in the workspace list, and the delete that refuses a workspace that is not empty.

const code = (res: { statusCode: number; json(): { error?: { code: string } } }) => [res.statusCode, res.json().error?.code]
const ws = async (app: App, headers: Record<string, string>, slug: string) =>
  (await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers, payload: { name: slug, slug } })).json().id as string
const put = (app: App, headers: Record<string, string>, workspaceId: string, objectKey: string, seed = 1) =>
  upload(app, headers, { bytes: fileBytes('image/png', 100 + seed, seed), name: objectKey.split('/').at(-1)!, extra: { workspaceId, objectKey } })
const list = async (app: App, headers: Record<string, string>, id: string, q: Record<string, string>) =>
  app.inject({ url: `/api/v1/workspaces/${id}/objects?${new URLSearchParams(q)}`, headers })

t.test('objects by prefix and delimiter, keyset pages that visit every entry once', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const h = tenant.headers
  const id = await ws(app, h, 'photos')
  const keys = ['a.png', 'docs/x.png', 'docs/y.png', 'docs/deep/z.png', 'photos/2024/1.png', 'photos/2024/2.png', 'photos/2025/1.png', 'zed.png', 'é.png']
  for (const [i, k] of keys.entries()) t.equal((await put(app, h, id, k, i + 1)).put.statusCode, 200, k)

  const top = (await list(app, h, id, { delimiter: '/' })).json()
  t.same(top.prefixes, ['docs/', 'photos/'])
  t.same(
    top.objects.map((o: { key: string }) => o.key),
    ['a.png', 'zed.png', 'é.png'],
    'UTF-8 binary order',
  )
  t.equal(top.nextAfter, null)
  const a = top.objects[0]
  t.match(a, {
    key: 'a.png',
    sizeBytes: 101,
    contentType: 'image/png',
    etag: `"${createHash('sha256')
      .update(fileBytes('image/png', 101, 1))
      .digest('hex')}"`,
  })
  t.match(a.lastModified, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)

  const docs = (await list(app, h, id, { prefix: 'docs/', delimiter: '/' })).json()
  t.same(docs.prefixes, ['docs/deep/'])
  t.same(
    docs.objects.map((o: { key: string }) => o.key),
    ['docs/x.png', 'docs/y.png'],
  )
  // A name filter is a longer prefix.
  t.same(
    (await list(app, h, id, { prefix: 'docs/y', delimiter: '/' })).json().objects.map((o: { key: string }) => o.key),
    ['docs/y.png'],
  )
  // Without a delimiter: every key, flat.
  t.equal((await list(app, h, id, {})).json().objects.length, keys.length)

  // Pages of 1 and 2 visit each entry exactly once, in order; a page may end on a common prefix.
  for (const limit of [1, 2]) {
    const seen: string[] = []
    let after: string | null = ''
    while (after !== null) {
      const page: { prefixes: string[]; objects: { key: string }[]; nextAfter: string | null } = (
        await list(app, h, id, { delimiter: '/', limit: String(limit), ...(after ? { after } : {}) })
      ).json()
      t.ok(page.prefixes.length + page.objects.length <= limit)
      seen.push(...page.prefixes, ...page.objects.map((o) => o.key))
      after = page.nextAfter
    }
    t.same(seen.sort(), ['a.png', 'docs/', 'photos/', 'zed.png', 'é.png'].sort(), `limit ${limit}`)
  }
})

t.test('bad input is a 400 envelope; foreign and unknown workspaces are 404', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const h = tenant.headers
  const id = await ws(app, h, 'mine')
  await put(app, h, id, 'secret/plan.png')
  const bad: Record<string, string>[] = [
    { limit: '0' },
    { limit: '1001' },
    { limit: 'x' },
    { prefix: 'a'.repeat(1025) },
    { prefix: 'a\u0001' },
    { after: 'b\u0000' },
    { delimiter: '/'.repeat(17) },
    { other: '1' },
  ]
  for (const q of bad) {
    const res = await list(app, h, id, q)
    t.same(code(res), [400, 'VALIDATION_ERROR'], JSON.stringify(q))
    t.match(res.json().error.details.errors[0].path, /^\/query\//)
  }
  t.same(code(await app.inject({ url: `/api/v1/workspaces/${id}/objects/details`, headers: h })), [400, 'VALIDATION_ERROR'], 'details without a key')
  t.same(code(await app.inject({ url: `/api/v1/workspaces/${id}/objects/details?key=`, headers: h })), [400, 'VALIDATION_ERROR'])
  t.same(code(await app.inject({ url: `/api/v1/workspaces/${id}/objects/details?key=nope`, headers: h })), [404, 'FILE_NOT_FOUND'])
  t.same(code(await list(app, h, 'not-a-uuid', {})), [404, 'WORKSPACE_NOT_FOUND'])
  t.same(code(await list(app, h, crypto.randomUUID(), {})), [404, 'WORKSPACE_NOT_FOUND'])
  t.same(code(await app.inject({ url: `/api/v1/workspaces/${id}/objects?limit=1`, headers: {} })), [401, 'UNAUTHORIZED'])

  // Another tenant sees none of it: the workspace answers 404 on every route, nothing is deleted.
  const other = await createTenant(app)
  const foreign = bearer(other.apiKey)
  t.same(code(await list(app, foreign, id, {})), [404, 'WORKSPACE_NOT_FOUND'])
  t.same(code(await app.inject({ url: `/api/v1/workspaces/${id}/objects/details?key=secret/plan.png`, headers: foreign })), [404, 'WORKSPACE_NOT_FOUND'])
  t.same(code(await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${id}?ifEmpty=true`, headers: foreign })), [404, 'WORKSPACE_NOT_FOUND'])
  t.same(code(await handshake(app, foreign, { fileType: 'image/png', fileName: 'x.png', workspaceId: id, objectKey: 'secret/x.png' })), [
    404,
    'WORKSPACE_NOT_FOUND',
  ])
  t.equal((await list(app, h, id, {})).json().objects.length, 1, 'still there')
})

t.test('uploads to a chosen key: into a prefix, a taken key refused, a key without a workspace refused', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const h = tenant.headers
  const id = await ws(app, h, 'site')
  const first = await put(app, h, id, 'assets/img/logo.png')
  t.equal(first.put.json().originalName, 'logo.png')
  const details = (await app.inject({ url: `/api/v1/workspaces/${id}/objects/details?key=${encodeURIComponent('assets/img/logo.png')}`, headers: h })).json()
  t.equal(details.fileId, first.fileId)
  const hs = (body: Record<string, unknown>) => handshake(app, h, { fileType: 'image/png', fileName: 'logo.png', fileSizeBytes: 10, ...body })
  const taken = await hs({ workspaceId: id, objectKey: 'assets/img/logo.png' })
  t.same(code(taken), [409, 'CONFLICT'])
  t.equal(taken.json().error.details.field, 'objectKey')
  // A pending upload holds its key too: a second handshake for it is refused.
  const pending = await hs({ workspaceId: id, objectKey: 'assets/new.png' })
  t.equal(pending.statusCode, 200)
  t.same(code(await hs({ workspaceId: id, objectKey: 'assets/new.png' })), [409, 'CONFLICT'])
  t.equal((await putContent(app, pending.json() as Handshake, fileBytes('image/png', 10))).statusCode, 200)
  t.same(code(await hs({ objectKey: 'x.png' })), [400, 'VALIDATION_ERROR'], 'a key needs a workspace')
  t.same(code(await hs({ workspaceId: id, objectKey: '' })), [400, 'VALIDATION_ERROR'])
  t.same(code(await hs({ workspaceId: id, objectKey: 'a\u0007b' })), [400, 'VALIDATION_ERROR'])
  t.same(code(await hs({ workspaceId: id, objectKey: 'é'.repeat(513) })), [400, 'VALIDATION_ERROR'], 'over 1024 bytes')
  // Once deleted, the key can be uploaded again.
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/files/${first.fileId}`, headers: h })).statusCode, 200)
  t.equal((await put(app, h, id, 'assets/img/logo.png', 9)).put.statusCode, 200)
  const assets = (await list(app, h, id, { prefix: 'assets/', delimiter: '/' })).json()
  t.same(assets.prefixes, ['assets/img/'])
  t.same(
    assets.objects.map((o: { key: string }) => o.key),
    ['assets/new.png'],
  )
})

t.test('workspace list counts files; delete with ifEmpty refuses a workspace that is not empty', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const h = tenant.headers
  const full = await ws(app, h, 'full')
  const empty = await ws(app, h, 'empty')
  const a = await put(app, h, full, 'one.png', 1)
  await put(app, h, full, 'two.png', 2)
  const counts = (await app.inject({ url: '/api/v1/workspaces', headers: h }))
    .json()
    .workspaces.map((w: { slug: string; fileCount: number; usedBytes: number }) => [w.slug, w.fileCount, w.usedBytes])
  t.same(counts, [
    ['full', 2, 101 + 102],
    ['empty', 0, 0],
  ])
  const refused = await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${full}?ifEmpty=true`, headers: h })
  t.same(code(refused), [409, 'CONFLICT'])
  t.match(refused.json().error, { message: /not empty: it holds 2 files/, details: { reason: 'NOT_EMPTY', fileCount: 2 } })
  t.equal((await app.inject({ url: `/api/v1/workspaces/${full}`, headers: h })).statusCode, 200, 'still there')
  t.same(code(await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${full}?ifEmpty=maybe`, headers: h })), [400, 'VALIDATION_ERROR'])
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${empty}?ifEmpty=true`, headers: h })).statusCode, 200)
  t.same(code(await app.inject({ url: `/api/v1/workspaces/${empty}`, headers: h })), [404, 'WORKSPACE_NOT_FOUND'])
  // An upload in progress counts.
  const hs = await handshake(app, h, { fileType: 'image/png', fileName: 'p.png', fileSizeBytes: 16, workspaceId: full })
  for (const f of [a.fileId]) await app.inject({ method: 'DELETE', url: `/api/v1/files/${f}`, headers: h })
  const left = (await list(app, h, full, {})).json().objects
  await app.inject({ method: 'DELETE', url: `/api/v1/files/${left[0].fileId}`, headers: h })
  t.same(code(await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${full}?ifEmpty=true`, headers: h })), [409, 'CONFLICT'], 'a pending upload')
  t.equal((await putContent(app, hs, fileBytes('image/png', 16))).statusCode, 200)
  // Without ifEmpty the delete takes everything, as before.
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${full}`, headers: h })).statusCode, 200)
})

t.test("details: S3 metadata, tags, ACL, versions and legal hold; a versioned bucket's markers keep it from an ifEmpty delete", async (t) => {
  const ctx = await makeS3(t)
  const { app, client } = ctx
  const h = ctx.tenant.headers
  await client.send(new CreateBucketCommand({ Bucket: 'records', ObjectLockEnabledForBucket: true }))
  const body = 'hello, details'
  await client.send(
    new PutObjectCommand({
      Bucket: 'records',
      Key: 'reports/q1.txt',
      Body: body,
      ContentType: 'text/plain',
      Metadata: { owner: 'ada' },
      Tagging: 'team=blue&year=2026',
      ACL: 'public-read',
    }),
  )
  await client.send(new PutObjectLegalHoldCommand({ Bucket: 'records', Key: 'reports/q1.txt', LegalHold: { Status: 'ON' } }))
  const id = (await app.inject({ url: '/api/v1/workspaces', headers: h })).json().workspaces.find((w: { slug: string }) => w.slug === 'records').id
  const d = (await app.inject({ url: `/api/v1/workspaces/${id}/objects/details?key=reports%2Fq1.txt`, headers: h })).json()
  t.match(d, {
    key: 'reports/q1.txt',
    sizeBytes: body.length,
    contentType: 'text/plain',
    etag: `"${createHash('md5').update(body).digest('hex')}"`,
    sha256: createHash('sha256').update(body).digest('hex'),
    metadata: { owner: 'ada' },
    tags: { team: 'blue', year: '2026' },
    versioning: 'Enabled',
    lock: { mode: null, retainUntil: null, legalHold: true },
    acl: 'public-read',
    public: true,
  })
  t.match(d.versionId, /^\S+$/)
  await client.send(new PutObjectLegalHoldCommand({ Bucket: 'records', Key: 'reports/q1.txt', LegalHold: { Status: 'OFF' } }))
  // Deleted in a versioned bucket: a delete marker, and the version stays: not empty.
  await client.send(new DeleteObjectCommand({ Bucket: 'records', Key: 'reports/q1.txt' }))
  t.equal((await list(app, h, id, {})).json().objects.length, 0)
  const refused = await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${id}?ifEmpty=true`, headers: h })
  t.same(code(refused), [409, 'CONFLICT'])
  t.match(refused.json().error.message, /older versions or delete markers/)

  // An API upload to a key whose current version is a delete marker becomes its current version.
  await client.send(new CreateBucketCommand({ Bucket: 'vers' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'vers', VersioningConfiguration: { Status: 'Enabled' } }))
  await client.send(new PutObjectCommand({ Bucket: 'vers', Key: 'k.png', Body: 'old' }))
  await client.send(new DeleteObjectCommand({ Bucket: 'vers', Key: 'k.png' }))
  const vid = (await app.inject({ url: '/api/v1/workspaces', headers: h })).json().workspaces.find((w: { slug: string }) => w.slug === 'vers').id
  const up = await put(app, h, vid, 'k.png', 3)
  t.equal(up.put.statusCode, 200)
  const versions = (await app.inject({ url: `/api/v1/files/${up.fileId}/versions`, headers: h })).json()
  t.same(
    versions.versions.map((v: { isLatest: boolean; isDeleteMarker: boolean }) => [v.isLatest, v.isDeleteMarker]),
    [
      [true, false],
      [false, true],
      [false, false],
    ],
    'the upload is current, the marker and the old version noncurrent',
  )
})

t.test(
  'a listing page seeks on both of its bounds in the (workspace_id, object_key) index: the same cost at any depth',
  { skip: sqliteOnly("SQLite's query plans of the SQLite statements; PostgreSQL's planner picks by its table statistics") },
  async (t) => {
    const { core } = await makeApp(t)
    // ObjectsRepo's page statements, as prepared (ListObjectsV2 and the bucket browser run them).
    const stmts = (core.workspaceObjects as unknown as { deps: { objects: { stmts: Record<string, { source: string }> } } }).deps.objects.stmts
    const pages = Object.entries(stmts).filter(([name]) => name.startsWith('page'))
    t.ok(pages.length > 0)
    const plans = pages.map(([name, stmt]) => {
      const plan = core
        .sqlite!.prepare(`EXPLAIN QUERY PLAN ${stmt.source}`)
        .all({ workspaceId: 'w', lo: 'a/', below: 'a0', limit: 10, after: 'a/x', from: 'a/' }) as {
        detail: string
      }[]
      return [name, plan.map((r) => r.detail).join('; ')] as const
    })
    t.comment(plans.map(([n, p]) => `${n}: ${p}`).join('\n'))
    // Every page seeks to its one lower bound (after a key, or from a prefix: SQLite writes >= as >) and,
    // under a prefix, stops at its upper bound; with the bounds as `? IS NULL OR` terms it used one at most.
    const search = 'SEARCH files USING INDEX files_object_key (workspace_id=? AND object_key>?'
    t.ok(
      plans.some(([, p]) => p === `${search} AND object_key<?)`),
      'a prefix page seeks on both bounds',
    )
    for (const [name, p] of plans) t.ok(p === `${search})` || p === `${search} AND object_key<?)`, `${name}: ${p}`)
    for (const [name, p] of plans) t.notMatch(p, /SCAN|TEMP B-TREE/, `${name}: no scan, no sort`)
  },
)
