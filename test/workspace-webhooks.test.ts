// @suites: pg-all
// A workspace's webhookUrl hears of every upload completed into it and every deletion from it,
// through either front, via the same outbox, signature and SSRF rules as the per-upload webhook.
import t from 'tap'
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { createTenant, fileBytes, makeApp, upload } from './helper'
import { makeS3, pattern, type S3Context } from './s3-helper'
import { startReceiver, verifySignature, type Received } from './webhook-receiver'

const ALLOW = { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' }

interface Payload {
  event: string
  fileId: string
  tenantId: string
  workspaceId: string | null
  file: { id: string; originalName: string; sizeBytes: number; workspaceId: string | null; processingStatus: string }
  timestamp: string
}
const payloads = (rs: Received[]) => rs.map((r) => JSON.parse(r.body) as Payload)
/** Deliveries may overlap; webhook-ids are UUIDv7s, so sorting by them restores the order the events were written in. */
const inOrder = (rs: Received[]) => [...rs].sort((a, b) => (String(a.headers['webhook-id']) < String(b.headers['webhook-id']) ? -1 : 1))

t.test('webhookUrl on workspaces: validated like the handshake, shown, replaced, removed', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const create = (webhookUrl: unknown, slug = 'w') =>
    app.inject({ method: 'POST', url: '/api/v1/workspaces', headers: tenant.headers, payload: { name: 'W', slug, webhookUrl } })
  for (const [url, message] of [
    ['ftp://example.com/x', /absolute http\(s\) URL/],
    ['not a url', /absolute http\(s\) URL/],
    ['http://127.0.0.1:8080/x', /loopback, private or link-local/],
    ['http://localhost/x', /loopback, private or link-local/],
    ['http://[::1]/x', /loopback, private or link-local/],
    ['http://10.1.2.3/x', /loopback, private or link-local/],
    ['https://hooks.example.com/a\tb', /control/i],
    ['https://hooks.example.com/a\nb', /control/i],
  ] as const) {
    const res = await create(url)
    t.equal(res.statusCode, 400, `${JSON.stringify(url)} refused`)
    t.match(res.json(), { error: { code: 'VALIDATION_ERROR' } })
    t.match(res.body, /webhookUrl/)
    t.match(res.body, message)
  }
  t.equal((await app.inject({ method: 'GET', url: '/api/v1/workspaces', headers: tenant.headers })).json().workspaces.length, 0, 'nothing was created')

  const made = await create('https://hooks.example.com/coffer')
  t.equal(made.statusCode, 201)
  t.equal(made.json().webhookUrl, 'https://hooks.example.com/coffer')
  const id = made.json().id as string
  const get = () => app.inject({ method: 'GET', url: `/api/v1/workspaces/${id}`, headers: tenant.headers })
  t.equal((await get()).json().webhookUrl, 'https://hooks.example.com/coffer')
  t.equal((await create(undefined, 'plain')).json().webhookUrl, null, 'none by default')

  const patch = (payload: Record<string, unknown>) => app.inject({ method: 'PATCH', url: `/api/v1/workspaces/${id}`, headers: tenant.headers, payload })
  t.equal((await patch({ webhookUrl: 'http://192.168.1.1/x' })).statusCode, 400, 'the SSRF rule applies to updates')
  t.equal((await patch({ webhookUrl: 'https://hooks.example.com/\u0007' })).statusCode, 400, 'and the control-character refusal')
  t.equal((await get()).json().webhookUrl, 'https://hooks.example.com/coffer', 'a refused update changes nothing')
  t.equal((await patch({ name: 'Renamed' })).json().webhookUrl, 'https://hooks.example.com/coffer', 'kept when absent')
  t.equal((await patch({ webhookUrl: 'https://other.example.com/h' })).json().webhookUrl, 'https://other.example.com/h', 'replaced')
  t.equal((await patch({ webhookUrl: null })).json().webhookUrl, null, 'null removes it')
  t.equal((await get()).json().webhookUrl, null)

  const spec = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
  const schemas = JSON.stringify(spec)
  t.match(schemas, /Absolute http\(s\) URL notified of every upload completed into the workspace/, 'documented in OpenAPI')
})

t.test('API front: uploads and deletions in the workspace are announced, signed, deduplicated with the upload URL', async (t) => {
  const { app, core, clock } = await makeApp(t, ALLOW, { webhookPollMs: 60_000 })
  const hook = await startReceiver(t)
  const own = await startReceiver(t)
  const tenant = await createTenant(app)
  const ws = (
    await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers: tenant.headers, payload: { name: 'W', slug: 'w', webhookUrl: hook.url } })
  ).json() as { id: string }
  const into = { ...tenant.headers, 'x-workspace-id': ws.id }

  // Not started yet: the rows exist as soon as the change is acknowledged.
  const a = await upload(app, into, { name: 'a.png' })
  t.equal(a.put.statusCode, 200)
  t.match(core.outbox.list(null, 10), [{ fileId: a.fileId, event: 'file.uploaded', url: hook.url, status: 'pending' }], 'written with the commit')
  core.webhooks.start()
  await hook.waitFor(1)
  const [uploaded] = hook.received
  t.ok(verifySignature(tenant.webhookSecret, uploaded!.headers, uploaded!.body), 'signed with the tenant secret')
  t.match(uploaded!.headers['webhook-id'], /^msg_[0-9a-f]{32}$/)
  t.same(JSON.parse(uploaded!.body), {
    event: 'file.uploaded',
    fileId: a.fileId,
    tenantId: tenant.id,
    workspaceId: ws.id,
    file: a.put.json(),
    timestamp: new Date(clock.now()).toISOString(),
  })

  const del = await app.inject({ method: 'DELETE', url: `/api/v1/files/${a.fileId}`, headers: tenant.headers })
  t.equal(del.statusCode, 200)
  await hook.waitFor(2)
  const deleted = hook.received[1]!
  t.ok(verifySignature(tenant.webhookSecret, deleted.headers, deleted.body))
  t.not(deleted.headers['webhook-id'], uploaded!.headers['webhook-id'])
  t.same(JSON.parse(deleted.body), { ...JSON.parse(uploaded!.body), event: 'file.deleted' }, 'file.deleted carries the same file object as file.uploaded')

  // Its own URL equal to the workspace's: one event. A different one: both hear it.
  const same = await upload(app, into, { name: 'same.png', extra: { webhookUrl: hook.url } })
  const both = await upload(app, into, { name: 'both.png', extra: { webhookUrl: own.url } })
  await hook.waitFor(4)
  await own.waitFor(1)
  await new Promise((r) => setTimeout(r, 200))
  const later = inOrder(hook.received).slice(2)
  t.same(
    payloads(later).map((p) => [p.event, p.fileId]),
    [
      ['file.uploaded', same.fileId],
      ['file.uploaded', both.fileId],
    ],
  )
  t.same(
    payloads(own.received).map((p) => [p.event, p.fileId]),
    [['file.uploaded', both.fileId]],
  )
  t.equal(own.received[0]!.body, later[1]!.body, 'the same body at both URLs')

  // A failed upload is its own URL's business; a file outside the workspace is not the workspace's.
  const failed = await upload(app, into, { bytes: fileBytes('image/gif', 100), extra: { webhookUrl: own.url } })
  t.equal(failed.put.statusCode, 400)
  await upload(app, tenant.headers, { name: 'elsewhere.png' })
  const pending = await app.inject({ method: 'POST', url: '/api/v1/upload/request', headers: into, payload: { fileType: 'image/png', fileName: 'p.png' } })
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/files/${pending.json().fileId}`, headers: tenant.headers })).statusCode, 200)
  await own.waitFor(2)
  t.equal(payloads(own.received)[1]!.event, 'file.failed')
  await new Promise((r) => setTimeout(r, 300))
  t.equal(hook.received.length, 4, 'no event for a failed upload, a pending upload deleted, or a file outside the workspace')
  t.same(core.outbox.counts(), { pending: 0, delivered: 6, dead: 0 })
})

async function workspaceIdOf(ctx: S3Context, slug: string): Promise<string> {
  const res = await ctx.app.inject({ method: 'GET', url: '/api/v1/workspaces', headers: ctx.tenant.headers })
  return (res.json().workspaces as { id: string; slug: string }[]).find((w) => w.slug === slug)!.id
}

t.test('S3 front: PutObject, replacement, CopyObject, multipart, DeleteObject(s) through the AWS SDK', async (t) => {
  const ctx = await makeS3(t, ALLOW)
  t.teardown(() => ctx.core.webhooks.stop())
  const hook = await startReceiver(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'hooked' }))
  const wsId = await workspaceIdOf(ctx, 'hooked')
  const set = await ctx.app.inject({ method: 'PATCH', url: `/api/v1/workspaces/${wsId}`, headers: ctx.tenant.headers, payload: { webhookUrl: hook.url } })
  t.equal(set.statusCode, 200)
  ctx.core.webhooks.start()
  const put = (Key: string, size: number, seed = 1) =>
    ctx.client.send(new PutObjectCommand({ Bucket: 'hooked', Key, Body: pattern(size, seed), ContentType: 'text/plain' }))

  await put('docs/a.txt', 1000)
  await put('docs/a.txt', 2000, 2) // replaces: the old object is deleted
  await ctx.client.send(new CopyObjectCommand({ Bucket: 'hooked', Key: 'copy.txt', CopySource: 'hooked/docs/a.txt' }))
  const mpu = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'hooked', Key: 'big.bin' }))
  const part1 = await ctx.client.send(
    new UploadPartCommand({ Bucket: 'hooked', Key: 'big.bin', UploadId: mpu.UploadId, PartNumber: 1, Body: pattern(5 * 1024 * 1024, 3) }),
  )
  const part2 = await ctx.client.send(new UploadPartCommand({ Bucket: 'hooked', Key: 'big.bin', UploadId: mpu.UploadId, PartNumber: 2, Body: pattern(10, 4) }))
  await ctx.client.send(
    new CompleteMultipartUploadCommand({
      Bucket: 'hooked',
      Key: 'big.bin',
      UploadId: mpu.UploadId,
      MultipartUpload: {
        Parts: [
          { PartNumber: 1, ETag: part1.ETag! },
          { PartNumber: 2, ETag: part2.ETag! },
        ],
      },
    }),
  )
  await ctx.client.send(new DeleteObjectCommand({ Bucket: 'hooked', Key: 'copy.txt' }))
  await ctx.client.send(new DeleteObjectCommand({ Bucket: 'hooked', Key: 'never-was.txt' }))
  await ctx.client.send(new DeleteObjectsCommand({ Bucket: 'hooked', Delete: { Objects: [{ Key: 'docs/a.txt' }, { Key: 'big.bin' }, { Key: 'nope' }] } }))

  await hook.waitFor(8, 10_000)
  await new Promise((r) => setTimeout(r, 300))
  const received = inOrder(hook.received)
  const got = payloads(received)
  t.same(
    got.map((p) => [p.event, p.file.originalName, p.file.sizeBytes]),
    [
      ['file.uploaded', 'a.txt', 1000],
      ['file.deleted', 'a.txt', 1000],
      ['file.uploaded', 'a.txt', 2000],
      ['file.uploaded', 'copy.txt', 2000],
      ['file.uploaded', 'big.bin', 5 * 1024 * 1024 + 10],
      ['file.deleted', 'copy.txt', 2000],
      ['file.deleted', 'a.txt', 2000],
      ['file.deleted', 'big.bin', 5 * 1024 * 1024 + 10],
    ],
    'every completed write and every deletion, in order; nothing for a missing key',
  )
  t.equal(got.length, 8)
  for (const [i, p] of got.entries()) {
    t.match(p, { tenantId: ctx.tenant.id, workspaceId: wsId, file: { workspaceId: wsId, processingStatus: 'completed' } })
    t.equal(p.fileId, p.file.id)
    t.ok(verifySignature(ctx.tenant.webhookSecret, received[i]!.headers, received[i]!.body), `event ${i} signed`)
  }
  t.same(got[1]!.file, got[0]!.file, 'the replaced object is announced deleted with the file object it was announced with')
  t.not(got[2]!.fileId, got[0]!.fileId, 'the replacement is a new file')
  t.same(ctx.core.outbox.counts(), { pending: 0, delivered: 8, dead: 0 })
})

t.test('S3 and API events are written with the change: a clean restart delivers what was not sent', async (t) => {
  const first = await makeS3(t, ALLOW)
  const hook = await startReceiver(t)
  await first.client.send(new CreateBucketCommand({ Bucket: 'durable' }))
  const wsId = await workspaceIdOf(first, 'durable')
  await first.app.inject({ method: 'PATCH', url: `/api/v1/workspaces/${wsId}`, headers: first.tenant.headers, payload: { webhookUrl: hook.url } })
  // No scheduler runs in this process: nothing can be delivered before the restart.
  await first.client.send(new PutObjectCommand({ Bucket: 'durable', Key: 'k.txt', Body: 'hello', ContentType: 'text/plain' }))
  await first.client.send(new DeleteObjectCommand({ Bucket: 'durable', Key: 'k.txt' }))
  const api = await upload(first.app, { ...first.tenant.headers, 'x-workspace-id': wsId }, { name: 'api.png' })
  t.equal(api.put.statusCode, 200)
  const rows = first.core.db.prepare('SELECT event, url, status FROM outbox ORDER BY created_at, id').all()
  t.same(
    rows,
    [
      { event: 'file.uploaded', url: hook.url, status: 'pending' },
      { event: 'file.deleted', url: hook.url, status: 'pending' },
      { event: 'file.uploaded', url: hook.url, status: 'pending' },
    ],
    'every acknowledged change has its outbox row',
  )
  await first.close()
  t.equal(hook.received.length, 0)

  const second = await makeS3(t, ALLOW, { dir: first.dir, existing: { ...first.tenant, credentials: first.credentials } })
  t.teardown(() => second.core.webhooks.stop())
  second.core.webhooks.start()
  await hook.waitFor(3, 10_000)
  const got = payloads(inOrder(hook.received))
  t.same(
    got.map((p) => [p.event, p.file.originalName]),
    [
      ['file.uploaded', 'k.txt'],
      ['file.deleted', 'k.txt'],
      ['file.uploaded', 'api.png'],
    ],
  )
  t.equal(got[2]!.fileId, api.fileId)
  hook.received.forEach((r) => t.ok(verifySignature(first.tenant.webhookSecret, r.headers, r.body)))
})
