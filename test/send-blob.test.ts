// @suites: sqlite
import t, { type Test } from 'tap'
import path from 'node:path'
import { Readable } from 'node:stream'
import Fastify from 'fastify'
import { DiskBlobStore, SMALL_READ_BYTES } from '../src/blobs/disk-blob-store'
import { BlobNotFoundError } from '../src/blobs/blob-store'
import { AppError } from '../src/errors'
import { sendBlob } from '../src/http/send-blob'
import { tempDir } from './helper'

// The download renderer on its own, as a second front (the S3 listener) uses it: its own routes,
// its own error shape (here plain text with the code, standing in for S3's XML), a descriptor
// with Last-Modified. The JSON API's use is covered by downloads.test.ts.

const LAST_MODIFIED = Date.UTC(2026, 0, 2, 3, 4, 5, 678)
const httpDate = (ms: number) => new Date(ms).toUTCString()

async function setup(t: Test) {
  const dir = tempDir(t)
  const store = new DiskBlobStore(path.join(dir, 'blobs'), dir)
  const small = Buffer.from('small content, read in one synchronous piece')
  const large = Buffer.alloc(SMALL_READ_BYTES * 3 + 17, 7)
  const put = async (bytes: Buffer) => {
    const staged = await store.stage(Readable.from([bytes]), { maxBytes: bytes.length, onOverflow: () => new Error('too large') })
    await store.place(staged)
    await store.discard(staged)
    return staged.sha256
  }
  const blobs = new Map([
    ['small', { sha256: await put(small), bytes: small }],
    ['large', { sha256: await put(large), bytes: large }],
  ])
  let counted = 0
  const app = Fastify()
  app.setErrorHandler((err, _request, reply) => {
    const code: string = err instanceof AppError ? err.code : err instanceof BlobNotFoundError ? 'NoSuchKey' : 'InternalError'
    const statuses: Record<string, number> = { PRECONDITION_FAILED: 412, RANGE_NOT_SATISFIABLE: 416, NoSuchKey: 404 }
    const status = statuses[code] ?? 500
    return reply.code(status).type('text/plain').send(code)
  })
  app.route({
    method: ['GET', 'HEAD'],
    url: '/:name',
    handler: async (request, reply) => {
      const name = (request.params as { name: string }).name
      const blob = blobs.get(name) ?? { sha256: 'f'.repeat(64), bytes: Buffer.alloc(5) }
      return sendBlob(request, reply, {
        size: blob.bytes.length,
        etag: `"${blob.sha256}"`,
        lastModified: LAST_MODIFIED,
        contentType: 'application/octet-stream',
        open: (range) => store.open(blob.sha256, range),
        onBytes: (n) => (counted += n),
      })
    },
  })
  t.teardown(() => app.close())
  return { app, blobs, counted: () => counted }
}

t.test('preconditions in RFC 9110 order, with Last-Modified', async (t) => {
  const { app, blobs } = await setup(t)
  const etag = `"${blobs.get('small')!.sha256}"`
  const get = (headers: Record<string, string>, method: 'GET' | 'HEAD' = 'GET') => app.inject({ method, url: '/small', headers })
  const plain = await get({})
  t.equal(plain.statusCode, 200)
  t.equal(plain.headers['last-modified'], httpDate(LAST_MODIFIED))
  t.equal(plain.headers.etag, etag)
  t.ok(plain.rawPayload.equals(blobs.get('small')!.bytes))

  t.equal((await get({ 'if-match': etag })).statusCode, 200)
  t.equal((await get({ 'if-match': `"other", ${etag}` })).statusCode, 200)
  t.equal((await get({ 'if-match': '*' })).statusCode, 200)
  for (const h of ['"other"', `W/${etag}`]) {
    const res = await get({ 'if-match': h })
    t.equal(res.statusCode, 412, `If-Match ${h}`)
    t.equal(res.body, 'PRECONDITION_FAILED', 'thrown as a code; the front renders it')
  }
  t.equal((await get({ 'if-unmodified-since': httpDate(LAST_MODIFIED) })).statusCode, 200, 'same second: unmodified')
  t.equal((await get({ 'if-unmodified-since': httpDate(LAST_MODIFIED - 1000) })).statusCode, 412)
  t.equal((await get({ 'if-unmodified-since': 'not a date' })).statusCode, 200, 'an invalid date is ignored')
  t.equal((await get({ 'if-match': etag, 'if-unmodified-since': httpDate(LAST_MODIFIED - 1000) })).statusCode, 200, 'If-Match wins over If-Unmodified-Since')

  t.equal((await get({ 'if-modified-since': httpDate(LAST_MODIFIED) })).statusCode, 304)
  t.equal((await get({ 'if-modified-since': httpDate(LAST_MODIFIED - 1000) })).statusCode, 200)
  t.equal(
    (await get({ 'if-none-match': '"other"', 'if-modified-since': httpDate(LAST_MODIFIED) })).statusCode,
    200,
    'If-None-Match wins over If-Modified-Since',
  )
  // A request's cache directives are for caches; the origin still evaluates its conditions (#24).
  for (const headers of [
    { 'if-none-match': etag, 'cache-control': 'no-cache' } as Record<string, string>,
    { 'if-none-match': `"other", ${etag}`, 'cache-control': 'max-age=0, no-cache', pragma: 'no-cache' },
    { 'if-modified-since': httpDate(LAST_MODIFIED), 'cache-control': 'no-cache' },
  ]) {
    t.equal((await get(headers)).statusCode, 304, JSON.stringify(headers))
  }
  t.equal((await get({ 'if-none-match': '"other"', 'cache-control': 'no-cache' })).statusCode, 200, 'no-cache and a tag that does not match')
  t.equal((await get({ 'if-modified-since': httpDate(LAST_MODIFIED - 1000), 'cache-control': 'no-cache' })).statusCode, 200)
  const notModified = await get({ 'if-none-match': etag }, 'HEAD')
  t.equal(notModified.statusCode, 304)
  t.equal(notModified.headers.etag, etag)
})

t.test('If-Range with a date, ranges, 416 with its Content-Range, HEAD', async (t) => {
  const { app, blobs } = await setup(t)
  const bytes = blobs.get('small')!.bytes
  const get = (headers: Record<string, string>, method: 'GET' | 'HEAD' = 'GET') => app.inject({ method, url: '/small', headers })
  const ranged = await get({ range: 'bytes=2-5', 'if-range': httpDate(LAST_MODIFIED) })
  t.equal(ranged.statusCode, 206)
  t.equal(ranged.headers['content-range'], `bytes 2-5/${bytes.length}`)
  t.ok(ranged.rawPayload.equals(bytes.subarray(2, 6)))
  t.equal((await get({ range: 'bytes=2-5', 'if-range': httpDate(LAST_MODIFIED - 1000) })).statusCode, 200, 'an older date: the whole content')
  t.equal((await get({ range: 'bytes=2-5', 'if-range': 'W/"weak"' })).statusCode, 200, 'a weak tag never matches If-Range')
  const unsatisfiable = await get({ range: `bytes=${bytes.length}-` })
  t.equal(unsatisfiable.statusCode, 416)
  t.equal(unsatisfiable.body, 'RANGE_NOT_SATISFIABLE')
  t.equal(unsatisfiable.headers['content-range'], `bytes */${bytes.length}`)
  const head = await get({ range: 'bytes=0-3' }, 'HEAD')
  t.equal(head.statusCode, 206)
  t.equal(head.headers['content-length'], '4')
  t.equal(head.rawPayload.length, 0)
})

t.test('large content streams, every byte is counted, missing content is thrown for the front to map', async (t) => {
  const { app, blobs, counted } = await setup(t)
  const large = blobs.get('large')!.bytes
  const res = await app.inject({ url: '/large' })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-length'], String(large.length))
  t.ok(res.rawPayload.equals(large), 'byte for byte through the stream path')
  const tail = await app.inject({ url: '/large', headers: { range: `bytes=${SMALL_READ_BYTES}-` } })
  t.equal(tail.statusCode, 206)
  t.ok(tail.rawPayload.equals(large.subarray(SMALL_READ_BYTES)))
  t.equal(counted(), large.length + (large.length - SMALL_READ_BYTES), 'onBytes saw every byte sent')
  const missing = await app.inject({ url: '/gone' })
  t.equal(missing.statusCode, 404)
  t.equal(missing.body, 'NoSuchKey', 'BlobNotFoundError reached the front')
  t.equal((await app.inject({ method: 'HEAD', url: '/gone' })).statusCode, 404, 'HEAD checks the content exists too')
})
