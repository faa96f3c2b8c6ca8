// @suites: sqlite
import t, { type Test } from 'tap'
import { Readable } from 'node:stream'
import { loadConfig } from '../src/config'
import { createCore, type Core } from '../src/core'
import { AppError, publicCode } from '../src/errors'
import { ManualClock } from '../src/lib/clock'
import type { AuthenticatedTenant } from '../src/db/repos/tenants'
import { fileBytes, tempDir } from './helper'

// The services called directly, as a second front (the S3 listener, the CLI) calls them: no HTTP,
// no routes, no JSON envelope. What they return are records and grants; errors are AppErrors
// whose field pointers are relative to the input the service was given.

function open(t: Test): { core: Core; clock: ManualClock } {
  const clock = new ManualClock()
  const core = createCore(loadConfig({}, { 'data-dir': tempDir(t) }), { clock })
  t.teardown(() => core.close())
  return { core, clock }
}

function tenantOf(core: Core, quotaBytes?: number): AuthenticatedTenant {
  const { apiKey } = core.tenants.create({ name: `t-${Math.random().toString(36).slice(2)}`, ...(quotaBytes === undefined ? {} : { quotaBytes }) })
  return core.tenants.authenticate(apiKey)!
}

async function rejectsWith(t: Test, p: Promise<unknown> | (() => unknown), code: string, details?: Record<string, unknown>) {
  try {
    await (typeof p === 'function' ? p() : p)
    t.fail(`expected ${code}`)
  } catch (err) {
    t.type(err, AppError)
    t.equal((err as AppError).code, code)
    if (details) t.match((err as AppError).details, details)
  }
}

t.test('upload, list, share, download grant and delete through the services alone', async (t) => {
  const { core, clock } = open(t)
  const tenant = tenantOf(core)
  const bytes = fileBytes('image/png', 3000)
  const { file, grant } = await core.uploads.handshake(tenant, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: bytes.length }, undefined)
  t.equal(file.status, 'pending')
  t.equal(grant.expires, clock.now() + core.config.uploadUrlTtlSeconds * 1000, 'a grant, not a URL: the front builds the URL')
  t.match(grant.token, /^[0-9a-f]{64}$/)
  t.equal(core.tenants.quota(tenant.id).usedBytes, 3000, 'the declared size is reserved')

  const done = await core.uploads.receive({
    fileId: file.id,
    expires: String(grant.expires),
    token: grant.token,
    contentType: 'image/png',
    contentLength: undefined,
    body: Readable.from([bytes]),
  })
  t.equal(done.status, 'completed')
  t.equal(done.sizeBytes, 3000)
  t.match(done.sha256, /^[0-9a-f]{64}$/)

  const page = core.files.list(tenant, { limit: 10 }, undefined)
  t.same(
    page.files.map((f) => f.id),
    [file.id],
  )
  t.equal(page.total, 1)

  const shared = core.files.share(tenant, file.id, 60)
  t.equal(shared.grant.expires, clock.now() + 60_000)
  const granted = core.files.bySignedToken(file.id, String(shared.grant.expires), shared.grant.token)
  t.equal(granted.file.id, file.id)
  const opened = await core.store.open(granted.file.sha256!, { start: 10, end: 19 })
  t.equal(opened.length, 10)
  t.ok(Buffer.isBuffer(opened.body) && opened.body.equals(bytes.subarray(10, 20)), 'the store serves the range')

  core.files.delete(tenant, file.id)
  await rejectsWith(t, () => core.files.bySignedToken(file.id, String(shared.grant.expires), shared.grant.token), 'FILE_NOT_FOUND')
  t.equal(core.tenants.quota(tenant.id).usedBytes, 0, 'deleting released the quota')
  clock.advance(61_000)
  await rejectsWith(t, () => core.files.bySignedToken(file.id, String(shared.grant.expires), shared.grant.token), 'UNAUTHORIZED')
})

t.test('service errors name fields relative to their input, and the body-too-large code is its own', async (t) => {
  const { core } = open(t)
  const tenant = tenantOf(core)
  await rejectsWith(t, () => core.files.list(tenant, { limit: 10, cursor: 'nope' }, undefined), 'VALIDATION_ERROR', { errors: [{ path: '/cursor' }] })
  const other = '01890000-0000-7000-8000-000000000000'
  await rejectsWith(
    t,
    () => core.uploads.handshake(tenant, { fileType: 'image/png', fileName: 'a.png', workspaceId: other }, '01890000-0000-7000-8000-000000000001'),
    'VALIDATION_ERROR',
    { errors: [{ path: '/workspaceId' }] },
  )
  await rejectsWith(t, () => core.tenants.create({ name: '' }), 'VALIDATION_ERROR', { errors: [{ path: '/name' }] })
  await rejectsWith(t, () => core.tenants.create({ name: 'a\u0007b' }), 'VALIDATION_ERROR', { errors: [{ path: '/name' }] })
  t.equal(core.tenants.create({ name: 'Émoji 😀 Co' }).tenant.name, 'Émoji 😀 Co', 'the same rule as the API schema: any text but control characters')
  await rejectsWith(t, () => core.tenants.create({ name: 'x', allowedFileTypes: ['text/html'] }), 'VALIDATION_ERROR', {
    errors: [{ path: '/allowedFileTypes' }],
  })

  const { file, grant } = await core.uploads.handshake(tenant, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: 100 }, undefined)
  const put = { fileId: file.id, expires: String(grant.expires), token: grant.token, contentType: 'image/png', contentLength: undefined }
  await rejectsWith(t, core.uploads.receive({ ...put, body: Readable.from([fileBytes('image/png', 101)]) }), 'BODY_TOO_LARGE', { fileSize: null, maxSize: 100 })
  t.equal(publicCode('BODY_TOO_LARGE'), 'FILE_TOO_LARGE', 'clients see the contract name')
  t.equal(core.files.get(tenant, file.id).status, 'failed')
  t.equal(core.tenants.quota(tenant.id).usedBytes, 0, 'the reservation was released once')
})

t.test("a front's body-error mapping decides what a broken body stream means", async (t) => {
  const { core } = open(t)
  const tenant = tenantOf(core)
  const reset = () =>
    new Readable({
      read() {
        this.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }))
      },
    })
  const start = async () => {
    const { file, grant } = await core.uploads.handshake(tenant, { fileType: 'image/png', fileName: 'a.png' }, undefined)
    return { fileId: file.id, expires: String(grant.expires), token: grant.token, contentType: undefined, contentLength: undefined }
  }
  const unmapped = await start()
  await t.rejects(
    core.uploads.receive({ ...unmapped, body: reset() }),
    { code: 'ECONNRESET' },
    'without a mapping the error is not the client’s: it surfaces as is',
  )
  const cutOff = new AppError('VALIDATION_ERROR', 'cut off', { errors: [{ path: '/body', message: 'was cut off' }] })
  const mapped = await start()
  await rejectsWith(t, core.uploads.receive({ ...mapped, body: reset(), bodyError: () => cutOff }), 'VALIDATION_ERROR')
  for (const id of [unmapped.fileId, mapped.fileId]) t.equal(core.files.get(tenant, id).status, 'failed', 'either way the upload is failed')
})

t.test('deleting a workspace fails its pending uploads and releases both quotas in one transaction', async (t) => {
  const { core } = open(t)
  const tenant = tenantOf(core)
  const ws = core.workspaces.create(tenant, { name: 'W', slug: 'w', quotaBytes: 10_000 })
  const pending = await core.uploads.handshake(tenant, { fileType: 'image/png', fileName: 'p.png', fileSizeBytes: 4000 }, ws.id)
  t.equal(core.workspaces.get(tenant, ws.id).usedBytes, 4000)
  core.workspaces.delete(tenant, ws.id)
  await rejectsWith(t, () => core.workspaces.get(tenant, ws.id), 'WORKSPACE_NOT_FOUND')
  await rejectsWith(t, () => core.files.get(tenant, pending.file.id), 'FILE_NOT_FOUND')
  t.equal(core.tenants.quota(tenant.id).usedBytes, 0)
  await rejectsWith(
    t,
    core.uploads.receive({
      fileId: pending.file.id,
      expires: String(pending.grant.expires),
      token: pending.grant.token,
      contentType: undefined,
      contentLength: undefined,
      body: Readable.from([fileBytes('image/png', 10)]),
    }),
    'FILE_NOT_FOUND',
  )
})

t.test('operators list and re-drive webhook events through WebhooksService', async (t) => {
  const { core } = open(t)
  const tenant = tenantOf(core)
  const { file } = await core.uploads.handshake(tenant, { fileType: 'image/png', fileName: 'p.png', webhookUrl: 'https://hooks.example.com/x' }, undefined)
  core.files.delete(tenant, file.id)
  const [event] = core.webhookEvents.list(null, 10)
  t.match(event, { fileId: file.id, event: 'file.failed', status: 'pending' })
  t.match(JSON.parse(event!.payload), {
    event: 'file.failed',
    error: { code: 'FILE_DELETED' },
    file: { id: file.id, url: `/api/v1/files/${file.id}/download` },
  })
  t.equal(core.webhookEvents.retry(event!.id), 'already-pending')
  t.equal(core.webhookEvents.retry('msg_unknown'), 'unknown')
  t.equal(core.webhookEvents.retryAllDead(), 0)
})
