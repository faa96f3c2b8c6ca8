// @suites: pg s3
import t from 'tap'
import { createHash } from 'node:crypto'
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import { bodyOf, createTenantWithS3, makeS3 } from './s3-helper'
import type { App } from '../src/http/types'

// PUT /api/v1/workspaces/:id/objects?key=: the console's bucket upload, through the write S3's
// PutObject makes. Whatever S3 would store goes in (a .txt, a .tar.gz, bytes of no declared type),
// under the tenant key; it reads back over S3 and over the API with the same bytes and type; a
// quota, another tenant's bucket, a missing key and a malformed type are refused in the API's
// JSON envelope with nothing stored.

const bucketOf = async (app: App, headers: Record<string, string>, slug: string) =>
  (await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers, payload: { name: slug, slug } })).json().id as string
const putObject = (app: App, headers: Record<string, string>, id: string, key: string, body: Buffer, type?: string) =>
  app.inject({
    method: 'PUT',
    url: `/api/v1/workspaces/${id}/objects?${new URLSearchParams({ key })}`,
    headers: { ...headers, ...(type !== undefined ? { 'content-type': type } : {}) },
    payload: body,
  })
const md5 = (b: Buffer) => `"${createHash('md5').update(b).digest('hex')}"`

t.test('any type S3 stores goes in under its key, and reads back the same over S3 and over the API', async (t) => {
  const s3 = await makeS3(t)
  const { app, client, tenant } = s3
  const id = await bucketOf(app, tenant.headers, 'notes')
  const text = Buffer.from('first line\nsecond line\n')
  const archive = Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.alloc(4096, 7)])
  const raw = Buffer.from([0, 1, 2, 3, 255])
  const files: [string, Buffer, string | undefined, string][] = [
    ['readme.txt', text, 'text/plain; charset=utf-8', 'text/plain; charset=utf-8'],
    ['backups/site-2026.tar.gz', archive, 'application/gzip', 'application/gzip'],
    ['data/blob.bin', raw, undefined, 'application/octet-stream'],
  ]
  for (const [key, body, sent, stored] of files) {
    const res = await putObject(app, tenant.headers, id, key, body, sent)
    t.equal(res.statusCode, 200, `${key}: ${res.body}`)
    t.match(res.json(), { key, sizeBytes: body.length, contentType: stored, etag: md5(body) }, `${key}: its entry, S3's ETag`)
    const head = await client.send(new HeadObjectCommand({ Bucket: 'notes', Key: key }))
    t.equal(head.ContentType, stored, `${key}: S3 answers its type`)
    t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'notes', Key: key })))).equals(body), `${key}: S3 reads the same bytes`)
    const api = await app.inject({ url: `/api/v1/files/${res.json().fileId}/download`, headers: tenant.headers })
    t.equal(api.statusCode, 200)
    t.ok(api.rawPayload.equals(body), `${key}: the API downloads the same bytes`)
  }
  const listed = await app.inject({ url: `/api/v1/workspaces/${id}/objects`, headers: tenant.headers })
  t.same(
    listed.json().objects.map((o: { key: string }) => o.key),
    ['backups/site-2026.tar.gz', 'data/blob.bin', 'readme.txt'],
  )

  // The same key again replaces the object, as PutObject does: one object, the new bytes, counted once.
  const again = Buffer.from('rewritten\n')
  t.equal((await putObject(app, tenant.headers, id, 'readme.txt', again, 'text/plain')).statusCode, 200)
  const page = await client.send(new ListObjectsV2Command({ Bucket: 'notes' }))
  t.equal(page.KeyCount, 3)
  t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'notes', Key: 'readme.txt' })))).equals(again))
  const quota = (await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json()
  t.equal(Number(quota.usedBytes), archive.length + raw.length + again.length, 'usage counts each stored object once')
})

t.test('refusals: over quota, another tenant, no key, a malformed type, a key too long; nothing stored', async (t) => {
  const s3 = await makeS3(t, {}, { quotaBytes: 1000 })
  const { app, client, tenant } = s3
  const id = await bucketOf(app, tenant.headers, 'small')
  const expect = async (res: Awaited<ReturnType<typeof putObject>>, status: number, code: string, what: string) => {
    t.equal(res.statusCode, status, `${what}: ${res.body}`)
    t.equal(res.headers['content-type'], 'application/json; charset=utf-8', `${what}: the API's JSON`)
    t.equal(res.json().error?.code, code, what)
    t.type(res.json().error?.message, 'string')
    return res.json().error
  }
  await expect(await putObject(app, tenant.headers, id, 'big.bin', Buffer.alloc(1001, 1), 'application/octet-stream'), 403, 'QUOTA_EXCEEDED', 'over the quota')
  const other = await createTenantWithS3(app)
  await expect(await putObject(app, other.headers, id, 'x.txt', Buffer.from('x'), 'text/plain'), 404, 'WORKSPACE_NOT_FOUND', "another tenant's bucket")
  await expect(await putObject(app, {}, id, 'x.txt', Buffer.from('x'), 'text/plain'), 401, 'UNAUTHORIZED', 'no API key')
  await expect(await putObject(app, tenant.headers, id, '', Buffer.from('x'), 'text/plain'), 400, 'VALIDATION_ERROR', 'an empty key')
  await expect(await putObject(app, tenant.headers, id, 'a\u0001b', Buffer.from('x'), 'text/plain'), 400, 'VALIDATION_ERROR', 'a control character in the key')
  t.match(
    await expect(await putObject(app, tenant.headers, id, 'é'.repeat(600), Buffer.from('x'), 'text/plain'), 400, 'VALIDATION_ERROR', 'a key over 1024 bytes'),
    { details: { errors: [{ path: '/query/key' }] } },
  )
  t.match(
    await expect(await putObject(app, tenant.headers, id, 'x.txt', Buffer.from('x'), 'text/plain, text/html'), 400, 'VALIDATION_ERROR', 'a malformed type'),
    { details: { errors: [{ path: '/headers/content-type' }] } },
  )
  t.equal((await client.send(new ListObjectsV2Command({ Bucket: 'small' }))).KeyCount, 0, 'nothing was stored')
  t.equal(Number((await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json().usedBytes), 0, 'nothing is counted')
  // Within the quota it goes in.
  t.equal((await putObject(app, tenant.headers, id, 'fits.bin', Buffer.alloc(1000, 2))).statusCode, 200)
})
