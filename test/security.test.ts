// @suites: pg s3
import t from 'tap'
import crypto from 'node:crypto'
import fs from 'node:fs'
import fc from 'fast-check'
import { admin, createTenant, fileBytes, handshake, type Handshake, makeApp, putContent, upload } from './helper'

// The one home of tenant isolation (every route that takes an id) and of token tampering.
t.test("tenant isolation matrix: every route with an id, called with another tenant's ids → 404", async (t) => {
  const { app } = await makeApp(t)
  const alice = await createTenant(app)
  const bob = await createTenant(app)
  const ws = (await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers: alice.headers, payload: { name: 'A', slug: 'a' } })).json()
  const done = await upload(app, { ...alice.headers, 'x-workspace-id': ws.id })
  const pending = (await handshake(app, alice.headers, { fileType: 'image/png', fileName: 'p.png' })).json() as Handshake
  await upload(app, alice.headers, { extra: { webhookUrl: 'https://hooks.example/coffer' } })
  const [delivery] = (await app.inject({ url: '/api/v1/webhooks/deliveries', headers: alice.headers })).json().deliveries
  const aliceKey = (await app.inject({ method: 'POST', url: '/api/v1/tenant/s3-credentials', headers: alice.headers })).json()
  const FILE = 'FILE_NOT_FOUND'
  const WS = 'WORKSPACE_NOT_FOUND'
  const matrix: [string, string, string, unknown?, Record<string, string>?][] = [
    ['GET', `/api/v1/files/${done.fileId}`, FILE],
    ['GET', `/api/v1/files/${pending.fileId}`, FILE],
    ['DELETE', `/api/v1/files/${done.fileId}`, FILE],
    ['DELETE', `/api/v1/files/${pending.fileId}`, FILE],
    ['GET', `/api/v1/files/${done.fileId}/download`, FILE],
    ['GET', `/api/v1/files/${pending.fileId}/download`, FILE],
    ['HEAD', `/api/v1/files/${done.fileId}/download`, FILE],
    ['HEAD', `/api/v1/files/${pending.fileId}/download`, FILE],
    ['GET', `/api/v1/files/${done.fileId}/signed-url`, FILE],
    ['GET', `/api/v1/files/${pending.fileId}/signed-url`, FILE],
    ['GET', `/api/v1/workspaces/${ws.id}`, WS],
    ['PATCH', `/api/v1/workspaces/${ws.id}`, WS, { name: 'mine now' }],
    ['DELETE', `/api/v1/workspaces/${ws.id}`, WS],
    ['GET', `/api/v1/files?workspaceId=${ws.id}`, WS],
    ['GET', '/api/v1/files', WS, undefined, { 'x-workspace-id': ws.id }],
    ['POST', '/api/v1/upload/request', WS, { fileType: 'image/png', fileName: 'x.png', workspaceId: ws.id }],
    ['POST', '/api/v1/upload/request', WS, { fileType: 'image/png', fileName: 'x.png' }, { 'x-workspace-id': ws.id }],
    ['POST', `/api/v1/webhooks/deliveries/${delivery.id}/retry`, 'DELIVERY_NOT_FOUND'],
    // A file's versions (#25): its single version is 'null' in an unversioned workspace.
    ['GET', `/api/v1/files/${done.fileId}/versions`, FILE],
    ['POST', `/api/v1/files/${done.fileId}/versions/null/restore`, FILE],
    ['GET', `/api/v1/files/deleted?workspaceId=${ws.id}`, WS],
    // A tenant's own S3 credentials (#31): another tenant's access key id is not found.
    ['DELETE', `/api/v1/tenant/s3-credentials/${aliceKey.accessKeyId}`, 'NOT_FOUND'],
    // A workspace as a bucket (#31): its objects, an object's details, the delete only when empty.
    ['GET', `/api/v1/workspaces/${ws.id}/objects?delimiter=/`, WS],
    ['GET', `/api/v1/workspaces/${ws.id}/objects/details?key=x`, WS],
    ['DELETE', `/api/v1/workspaces/${ws.id}?ifEmpty=true`, WS],
    ['POST', '/api/v1/upload/request', WS, { fileType: 'image/png', fileName: 'x.png', workspaceId: ws.id, objectKey: 'a/x.png' }],
  ]
  // Every parametric route the app serves must appear in the matrix (or be admin/token-only).
  const parametric = routePaths(app.printRoutes({ commonPrefix: false })).filter((p) => p.includes(':'))
  t.ok(parametric.length >= 6, `found the parametric routes: ${parametric.join(', ')}`)
  const covered = [
    '/api/v1/files/:fileId',
    '/api/v1/files/:fileId/download',
    '/api/v1/files/:fileId/signed-url',
    '/api/v1/workspaces/:workspaceId',
    '/api/v1/webhooks/deliveries/:deliveryId/retry',
    '/api/v1/files/:fileId/versions',
    '/api/v1/files/:fileId/versions/:versionId/restore',
    '/api/v1/tenant/s3-credentials/:accessKeyId',
    '/api/v1/workspaces/:workspaceId/objects',
    '/api/v1/workspaces/:workspaceId/objects/details',
  ]
  // Admin routes name a tenant by design; S3 requests are isolated by test/s3-sdk.test.ts.
  const exempt = [
    '/api/v1/upload/:fileId',
    '/api/v1/admin/tenants/:tenantId',
    '/api/v1/admin/tenants/:tenantId/regenerate-key',
    '/api/v1/admin/tenants/:tenantId/s3-credentials',
    '/api/v1/admin/tenants/:tenantId/s3-credentials/:accessKeyId',
  ]
  for (const r of parametric) t.ok(covered.includes(r) || exempt.includes(r), `route ${r} is in the isolation matrix`)
  for (const [method, url, code, payload, headers] of matrix) {
    const res = await app.inject({ method: method as 'GET', url, headers: { ...bob.headers, ...headers }, ...(payload ? { payload: payload } : {}) })
    t.equal(res.statusCode, 404, `${method} ${url}`)
    if (method !== 'HEAD') t.equal(res.json().error.code, code, `${method} ${url}`)
  }
  // Bob's own listings show nothing of Alice's.
  t.same((await app.inject({ url: '/api/v1/files', headers: bob.headers })).json(), { files: [], nextCursor: null, total: 0 })
  t.same((await app.inject({ url: '/api/v1/workspaces', headers: bob.headers })).json(), { workspaces: [] })
  t.same((await app.inject({ url: '/api/v1/webhooks/deliveries', headers: bob.headers })).json(), { deliveries: [] })
  t.same((await app.inject({ url: '/api/v1/tenant/s3-credentials', headers: bob.headers })).json(), { credentials: [] })
  // Nothing changed for the owner.
  t.equal((await app.inject({ url: `/api/v1/files/${done.fileId}`, headers: alice.headers })).statusCode, 200)
  t.equal((await app.inject({ url: `/api/v1/workspaces/${ws.id}`, headers: alice.headers })).json().name, 'A')
  t.equal((await app.inject({ url: '/api/v1/files', headers: alice.headers })).json().total, 3)
  t.equal((await app.inject({ url: '/api/v1/tenant/s3-credentials', headers: alice.headers })).json().credentials[0].accessKeyId, aliceKey.accessKeyId)
  // The token routes: a token minted for one tenant's file never opens another's.
  const bobFile = await upload(app, bob.headers)
  const signed = new URL((await app.inject({ url: `/api/v1/files/${done.fileId}/signed-url`, headers: alice.headers })).json().url)
  const res = await app.inject({ url: `/api/v1/files/${bobFile.fileId}/download${signed.search}` })
  t.equal(res.statusCode, 401)
})

/** Full paths from Fastify's route tree (each level indented by four characters). */
function routePaths(tree: string): string[] {
  const stack: string[] = []
  const out: string[] = []
  for (const line of tree.split('\n')) {
    const m = /^([\s│├└─]*)(\/\S*) \(/.exec(line)
    if (!m) continue
    const depth = m[1]!.length / 4
    stack.length = depth
    stack.push(m[2]!)
    out.push(stack.join(''))
  }
  return out
}

t.test('tampering with any character of an upload or download token, its expiry or its file id → 401', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const done = await upload(app, tenant.headers)
  const signed = new URL((await app.inject({ url: `/api/v1/files/${done.fileId}/signed-url`, headers: tenant.headers })).json().url)
  const pending = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'p.png' })).json() as Handshake
  const presigned = new URL(pending.presignedUrl, 'http://x')
  const cases = [
    {
      method: 'GET' as const,
      path: `/api/v1/files/${done.fileId}/download`,
      id: done.fileId,
      expires: signed.searchParams.get('expires')!,
      token: signed.searchParams.get('token')!,
    },
    {
      method: 'PUT' as const,
      path: `/api/v1/upload/${pending.fileId}`,
      id: pending.fileId,
      expires: presigned.searchParams.get('expires')!,
      token: presigned.searchParams.get('token')!,
    },
  ]
  const hex = '0123456789abcdef'
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...cases), fc.constantFrom('id', 'expires', 'token'), fc.nat(), fc.nat(), async (c, field, pos, pick) => {
      const original = c[field]
      const i = pos % original.length
      const alphabet = field === 'expires' ? '0123456789' : hex
      const replacement = alphabet.replace(original[i]!, '')[pick % (alphabet.length - 1)]!
      const mutated = original.slice(0, i) + replacement + original.slice(i + 1)
      const id = field === 'id' ? mutated : c.id
      const expires = field === 'expires' ? mutated : c.expires
      const token = field === 'token' ? mutated : c.token
      const url = `${c.path.replace(c.id, id)}?expires=${expires}&token=${token}`
      const res = await app.inject({
        method: c.method,
        url,
        ...(c.method === 'PUT' ? { headers: { 'content-type': 'image/png' }, payload: fileBytes('image/png', 10) } : {}),
      })
      return res.statusCode === 401 && res.json().error.code === 'UNAUTHORIZED'
    }),
    { numRuns: 300 },
  )
  t.equal((await app.inject({ url: `/api/v1/files/${done.fileId}/download${signed.search}` })).statusCode, 200, 'the untouched token still works')
})

t.test('token defects, case by case: every one is 401, and refused attempts change nothing', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const other = await createTenant(app)
  const a = await upload(app, tenant.headers)
  const b = await upload(app, tenant.headers)
  const c = await upload(app, other.headers)
  const flip = (s: string) => s.slice(0, -1) + (s.endsWith('0') ? '1' : '0')
  const zero = '01890000-0000-7000-8000-000000000000'

  const signed = new URL((await app.inject({ url: `/api/v1/files/${a.fileId}/signed-url?expiresIn=600`, headers: tenant.headers })).json().url)
  const [dToken, dExpires] = [signed.searchParams.get('token')!, signed.searchParams.get('expires')!]
  const downloads = [
    `/api/v1/files/${a.fileId}/download?expires=${dExpires}&token=${flip(dToken)}`,
    `/api/v1/files/${a.fileId}/download?expires=${Number(dExpires) + 1000}&token=${dToken}`,
    `/api/v1/files/${b.fileId}/download?expires=${dExpires}&token=${dToken}`,
    `/api/v1/files/${c.fileId}/download?expires=${dExpires}&token=${dToken}`,
    `/api/v1/files/${zero}/download?expires=${dExpires}&token=${dToken}`,
    `/api/v1/files/${a.fileId}/download?expires=${dExpires}`,
    `/api/v1/files/${a.fileId}/download?token=${dToken}`,
    `/api/v1/files/${a.fileId}/download`,
    `/api/v1/files/${a.fileId}/download?expires=-1&token=${dToken}`,
    `/api/v1/files/${a.fileId}/download?expires=${dExpires}&token=${dToken.slice(2)}`,
  ]
  for (const p of downloads) {
    const res = await app.inject({ url: p })
    t.equal(res.statusCode, 401, p)
    t.equal(res.json().error.code, 'UNAUTHORIZED')
  }

  const p1 = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png' })).json() as Handshake
  const p2 = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'b.png' })).json() as Handshake
  const presigned = new URL(p1.presignedUrl, 'http://x')
  const [uToken, uExpires] = [presigned.searchParams.get('token')!, presigned.searchParams.get('expires')!]
  const uploads = [
    `/api/v1/upload/${p1.fileId}?expires=${uExpires}&token=${flip(uToken)}`,
    `/api/v1/upload/${p1.fileId}?expires=${Number(uExpires) + 1}&token=${uToken}`,
    `/api/v1/upload/${p2.fileId}?expires=${uExpires}&token=${uToken}`,
    `/api/v1/upload/${zero}?expires=${uExpires}&token=${uToken}`,
    `/api/v1/upload/not-a-uuid?expires=${uExpires}&token=${uToken}`,
    `/api/v1/upload/${p1.fileId}?expires=${uExpires}`,
    `/api/v1/upload/${p1.fileId}?token=${uToken}`,
    `/api/v1/upload/${p1.fileId}?expires=abc&token=${uToken}`,
    `/api/v1/upload/${p1.fileId}?expires=${uExpires}&token=${uToken.toUpperCase()}x`,
  ]
  for (const u of uploads) {
    const res = await app.inject({ method: 'PUT', url: u, headers: { 'content-type': 'image/png' }, payload: fileBytes('image/png', 100) })
    t.equal(res.statusCode, 401, u)
    t.equal(res.json().error.code, 'UNAUTHORIZED')
  }
  const status = (await app.inject({ url: `/api/v1/files/${p1.fileId}`, headers: tenant.headers })).json()
  t.equal(status.processingStatus, 'pending', 'refused attempts do not fail the upload')

  const crossPurpose = await app.inject({ url: `/api/v1/files/${p1.fileId}/download?expires=${uExpires}&token=${uToken}` })
  t.equal(crossPurpose.statusCode, 401, 'an upload token does not download')
})

t.test('keys and tokens are compared in constant time', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const done = await upload(app, tenant.headers)
  const signed = new URL((await app.inject({ url: `/api/v1/files/${done.fileId}/signed-url`, headers: tenant.headers })).json().url)
  const pending = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'p.png' })).json() as Handshake
  const calls = t.capture(crypto, 'timingSafeEqual', crypto.timingSafeEqual)
  const check = async (label: string, run: () => Promise<unknown>) => {
    const before = calls.args().length
    await run()
    t.ok(calls.args().length > before, `${label} goes through crypto.timingSafeEqual`)
  }
  await check('a tenant key', () => app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers }))
  await check('the admin key', () => app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'x' } }))
  await check('a wrong admin key', () =>
    app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: { authorization: 'Bearer wrong-wrong-wrong-wrong' }, payload: { name: 'y' } }),
  )
  await check('a signed download token', () => app.inject({ url: `/api/v1/files/${done.fileId}/download${signed.search}` }))
  await check('an upload token', () =>
    app.inject({ method: 'PUT', url: pending.presignedUrl, headers: { 'content-type': 'image/png' }, payload: fileBytes('image/png', 10) }),
  )
})

t.test('file names cannot traverse paths or inject headers; content never lands where a name says', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app)
  for (const fileName of ['../../etc/passwd', '..\\..\\boot.ini', 'a\r\nSet-Cookie: x=1', 'a"; filename="evil.exe', '/abs.png', 'C:evil']) {
    const res = await handshake(app, tenant.headers, { fileType: 'image/png', fileName })
    t.equal(res.statusCode, 400, JSON.stringify(fileName))
  }
  // Names that look like paths but are legal are stored as names only.
  const r = await upload(app, tenant.headers, { name: '....png' })
  t.equal(r.put.statusCode, 200)
  const onDisk = fs.readdirSync(core.dataDir.root, { recursive: true }).map(String)
  t.notOk(
    onDisk.some((p) => p.includes('....png')),
    'no file on disk is named after the upload',
  )
  t.ok(
    onDisk.every((p) => /^(coffer\.db(-wal|-shm)?|secret|reserve|tmp|blobs|blobs\/sha256(\/[0-9a-f]{2}(\/[0-9a-f]{2}(\/[0-9a-f]{64})?)?)?)$/.test(p)),
    `only the data-dir layout: ${onDisk.join(', ')}`,
  )
  const dl = await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
  t.equal(dl.headers['content-disposition'], `attachment; filename="....png"; filename*=UTF-8''....png`)
})

t.test('a stored file is never served as text/html, whatever the client asks or sends', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  t.equal((await handshake(app, tenant.headers, { fileType: 'text/html', fileName: 'x.html' })).statusCode, 400)
  const hs = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'x.html' })).json() as Handshake
  const htmlAsPng = await putContent(app, hs, '<html><script>alert(1)</script></html>', 'text/html')
  t.equal(htmlAsPng.statusCode, 400, 'a text/html body is refused')
  // HTML behind a PNG signature is stored, and served only as image/png, unsniffable and sandboxed.
  const polyglot = Buffer.concat([fileBytes('image/png', 8), Buffer.from('<html><script>alert(document.cookie)</script></html>')])
  const r = await upload(app, tenant.headers, { bytes: polyglot, name: 'x.html' })
  t.equal(r.put.statusCode, 200)
  for (const headers of [tenant.headers, { ...tenant.headers, accept: 'text/html' }]) {
    for (const q of ['', '?disposition=inline']) {
      const dl = await app.inject({ url: `/api/v1/files/${r.fileId}/download${q}`, headers })
      t.equal(dl.headers['content-type'], 'image/png')
      t.equal(dl.headers['x-content-type-options'], 'nosniff')
      t.match(dl.headers['content-security-policy'], /sandbox/)
    }
  }
})
