// @suites: pg s3
import t from 'tap'
import { createTenant, fileBytes, handshake, makeApp, upload } from './helper'

type FileJson = { id: string; createdAt: string; context: string; fileType: string; processingStatus: string; sizeBytes: number }

t.test('listing: newest first, keyset pages visit every file exactly once, total ignores the cursor', async (t) => {
  const { app, clock } = await makeApp(t)
  const tenant = await createTenant(app)
  const ids: string[] = []
  for (let i = 0; i < 23; i++) {
    // Several files share a millisecond: the id breaks the tie.
    if (i % 3 === 0) clock.advance(1)
    const type = i % 2 ? 'image/png' : 'application/pdf'
    const r = await upload(app, tenant.headers, { type, name: `f${i}`, bytes: fileBytes(type, 100 + i, i), extra: { context: i % 4 === 0 ? 'docs' : 'pics' } })
    ids.push(r.fileId)
  }
  const first = await app.inject({ url: '/api/v1/files', headers: tenant.headers })
  t.equal(first.statusCode, 200)
  const body = first.json() as { files: FileJson[]; nextCursor: string | null; total: number }
  t.equal(body.files.length, 20, 'default limit 20')
  t.equal(body.total, 23)
  t.type(body.nextCursor, 'string')
  const all = (await app.inject({ url: '/api/v1/files?limit=100', headers: tenant.headers })).json().files as FileJson[]
  const sorted = [...all].sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1))
  t.same(
    all.map((f) => f.id),
    sorted.map((f) => f.id),
    'createdAt descending, then id descending',
  )
  const expectedOrder = [...ids].reverse()
  t.same(
    all.map((f) => f.id),
    expectedOrder,
    'newest first (ids made in one millisecond keep their creation order)',
  )
  t.same(
    body.files.map((f) => f.id),
    expectedOrder.slice(0, 20),
  )
  for (const limit of [1, 7, 23, 100]) {
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const res = await app.inject({ url: `/api/v1/files?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`, headers: tenant.headers })
      t.equal(res.statusCode, 200)
      const page = res.json() as { files: FileJson[]; nextCursor: string | null; total: number }
      t.equal(page.total, 23, 'total is independent of the cursor')
      seen.push(...page.files.map((f) => f.id))
      cursor = page.nextCursor
      pages++
    } while (cursor && pages < 50)
    t.same(seen, expectedOrder, `limit=${limit}: every file exactly once, in order`)
    t.equal(pages, Math.ceil(23 / limit), `limit=${limit}: nextCursor is null on the last page`)
  }
})

t.test('listing: filters AND together, include pending and failed, exclude deleted', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const png = await upload(app, tenant.headers, { type: 'image/png', extra: { context: 'avatars' } })
  const pdf = await upload(app, tenant.headers, { type: 'application/pdf', extra: { context: 'avatars' } })
  const other = await upload(app, tenant.headers, { type: 'image/png', extra: { context: 'banners' } })
  const pending = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'p.png', context: 'avatars' })).json()
  const failed = await upload(app, tenant.headers, { type: 'image/png', bytes: fileBytes('application/pdf', 50), extra: { context: 'avatars' } })
  const list = async (qs: string) => (await app.inject({ url: `/api/v1/files?${qs}`, headers: tenant.headers })).json() as { files: FileJson[]; total: number }
  const byContext = await list('context=avatars')
  t.same(new Set(byContext.files.map((f) => f.id)), new Set([png.fileId, pdf.fileId, pending.fileId, failed.fileId]))
  t.equal(byContext.total, 4)
  t.same(byContext.files.map((f) => f.processingStatus).sort(), ['completed', 'completed', 'failed', 'pending'])
  const both = await list('context=avatars&fileType=image/png')
  t.same(new Set(both.files.map((f) => f.id)), new Set([png.fileId, pending.fileId, failed.fileId]))
  t.equal(both.total, 3)
  t.equal((await list('fileType=application/pdf')).total, 1)
  t.equal((await list('context=nothing')).total, 0)
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/files/${png.fileId}`, headers: tenant.headers })).statusCode, 200)
  const after = await list('context=avatars')
  t.notOk(
    after.files.some((f) => f.id === png.fileId),
    'deleted files never appear',
  )
  t.equal(after.total, 3)
  t.equal((await list('')).total, 4)
  void other
})

t.test('listing: query validation', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const cases: [string, string][] = [
    ['limit=0', '/query/limit'],
    ['limit=101', '/query/limit'],
    ['limit=abc', '/query/limit'],
    ['limit=1.5', '/query/limit'],
    ['limit=1&limit=2', '/query/limit'],
    ['cursor=!!!', '/query/cursor'],
    ['cursor=' + Buffer.from('123.not-a-uuid').toString('base64url'), '/query/cursor'],
    ['cursor=' + Buffer.from('x').toString('base64url'), '/query/cursor'],
    ['fileType=text/html', '/query/fileType'],
    ['workspaceId=nope', '/query/workspaceId'],
    ['context=' + 'c'.repeat(101), '/query/context'],
    ['sort=asc', '/query/sort'],
  ]
  for (const [qs, path] of cases) {
    const res = await app.inject({ url: `/api/v1/files?${qs}`, headers: tenant.headers })
    t.equal(res.statusCode, 400, qs)
    t.equal(res.json().error.code, 'VALIDATION_ERROR')
    t.equal(res.json().error.details.errors[0].path, path, qs)
  }
  const ws = await app.inject({ url: '/api/v1/files?workspaceId=01890000-0000-7000-8000-000000000000', headers: tenant.headers })
  t.equal(ws.statusCode, 404)
  t.equal(ws.json().error.code, 'WORKSPACE_NOT_FOUND')
  const differ = await app.inject({
    url: '/api/v1/files?workspaceId=01890000-0000-7000-8000-000000000000',
    headers: { ...tenant.headers, 'x-workspace-id': '01890000-0000-7000-8000-000000000001' },
  })
  t.equal(differ.statusCode, 400)
  t.equal(differ.json().error.details.errors[0].path, '/query/workspaceId')
})

t.test('GET and DELETE one file', async (t) => {
  const { app, clock } = await makeApp(t)
  const tenant = await createTenant(app)
  const r = await upload(app, tenant.headers, { name: 'x.png', extra: { tags: { a: 'b' }, context: 'ctx' } })
  const get = await app.inject({ url: `/api/v1/files/${r.fileId}`, headers: tenant.headers })
  t.equal(get.statusCode, 200)
  t.same(get.json(), {
    id: r.fileId,
    url: `/api/v1/files/${r.fileId}/download`,
    originalName: 'x.png',
    fileType: 'image/png',
    sizeBytes: 1024,
    context: 'ctx',
    tags: { a: 'b' },
    metadata: null,
    processingStatus: 'completed',
    workspaceId: null,
    createdAt: new Date(clock.now()).toISOString(),
  })
  t.equal((await app.inject({ url: `/api/v1/files/${r.fileId.toUpperCase()}`, headers: tenant.headers })).statusCode, 200, 'ids are case-insensitive')
  const del = await app.inject({ method: 'DELETE', url: `/api/v1/files/${r.fileId}`, headers: tenant.headers })
  t.equal(del.statusCode, 200)
  t.same(del.json(), { success: true })
  t.equal((await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json().usedBytes, 0, 'delete releases quota')
  for (const [method, url] of [
    ['GET', `/api/v1/files/${r.fileId}`],
    ['DELETE', `/api/v1/files/${r.fileId}`],
    ['GET', `/api/v1/files/${r.fileId}/download`],
    ['GET', `/api/v1/files/${r.fileId}/signed-url`],
  ] as const) {
    const res = await app.inject({ method, url, headers: tenant.headers })
    t.equal(res.statusCode, 404, `${method} ${url} after delete`)
    t.equal(res.json().error.code, 'FILE_NOT_FOUND')
  }
  for (const id of ['nope', '01890000-0000-7000-8000-000000000000', '..%2F..%2Fetc%2Fpasswd', "1' OR '1'='1"]) {
    for (const [method, url] of [
      ['GET', `/api/v1/files/${id}`],
      ['DELETE', `/api/v1/files/${id}`],
      ['GET', `/api/v1/files/${id}/download`],
      ['GET', `/api/v1/files/${id}/signed-url`],
    ] as const) {
      const res = await app.inject({ method, url, headers: tenant.headers })
      t.equal(res.statusCode, 404, `${method} ${url}`)
      t.equal(res.json().error.code, 'FILE_NOT_FOUND')
    }
  }
})

t.test('file routes require the tenant key', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const r = await upload(app, tenant.headers)
  for (const [method, url] of [
    ['GET', '/api/v1/files'],
    ['GET', `/api/v1/files/${r.fileId}`],
    ['DELETE', `/api/v1/files/${r.fileId}`],
    ['GET', `/api/v1/files/${r.fileId}/signed-url`],
    ['GET', `/api/v1/files/${r.fileId}/download`],
    ['POST', '/api/v1/upload/request'],
  ] as const) {
    for (const headers of [{}, { authorization: 'Bearer sk_live_revoked0000000000000000000000000000000' }]) {
      const res = await app.inject({ method, url, headers, ...(method === 'POST' ? { payload: {} } : {}) })
      t.equal(res.statusCode, 401, `${method} ${url} ${JSON.stringify(headers)}`)
      t.equal(res.json().error.code, 'UNAUTHORIZED')
    }
  }
})
