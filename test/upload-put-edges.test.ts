// @suites: pg-all
import t from 'tap'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { createTenant, fileBytes, handshake, type Handshake, makeApp, putContent } from './helper'

t.test('a malformed Content-Type fails the upload, releases its reservation and says why (#12 item 11)', async (t) => {
  const { app, core } = await makeApp(t)
  const tenant = await createTenant(app, { quotaBytes: 10_000 })
  for (const contentType of ['image/png, text/html', ';', 'image/png; x']) {
    const h = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', fileSizeBytes: 10_000 })).json() as Handshake
    const put = await app.inject({ method: 'PUT', url: h.presignedUrl, headers: { 'content-type': contentType }, payload: fileBytes('image/png', 1000) })
    t.equal(put.statusCode, 400, contentType)
    t.equal(put.json().error.code, 'VALIDATION_ERROR')
    t.match(put.json().error.message, /Content-Type .* is not a single media type; send image\/png/)
    t.same(put.json().error.details.errors, [{ path: '/headers/content-type', message: 'must be image/png' }])
    t.equal(core.db.pluck('SELECT status FROM files WHERE id = ?').get(h.fileId), 'failed', 'the upload failed')
    const quota = (await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json()
    t.equal(quota.usedBytes, 0, 'its reservation is released: the next handshake can reserve the whole quota')
  }
  const h = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png' })).json() as Handshake
  const ok = await putContent(app, h, fileBytes('image/png', 1000), 'image/png; charset=binary')
  t.equal(ok.statusCode, 200, 'parameters are fine')
})

/** A raw PUT: sends the head, then `chunk` every `everyMs` until the server ends the connection. */
function slowPut(port: number, path: string, contentLength: number, opts: { chunk: number; everyMs: number; limitMs: number }) {
  return new Promise<{ answer: string; endedAfterMs: number | null; sent: number }>((resolve) => {
    const began = Date.now()
    const socket = net.connect(port, '127.0.0.1')
    let answer = ''
    let sent = 0
    const finish = (ended: boolean) => {
      clearInterval(timer)
      clearTimeout(limit)
      socket.destroy()
      resolve({ answer, endedAfterMs: ended ? Date.now() - began : null, sent })
    }
    const limit = setTimeout(() => finish(false), opts.limitMs)
    socket.setEncoding('latin1')
    socket.on('data', (d: string) => (answer += d))
    socket.on('end', () => finish(true))
    socket.on('error', () => finish(true))
    socket.write(`PUT ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: image/png\r\nContent-Length: ${contentLength}\r\n\r\n`)
    const timer = setInterval(() => {
      const n = Math.min(opts.chunk, contentLength - sent)
      if (!socket.writable || n <= 0) return
      socket.write(Buffer.alloc(n, 0x61))
      sent += n
    }, opts.everyMs)
  })
}

t.test('a large unauthenticated PUT is answered 401 and its connection closed, not drained (#12 item 10)', async (t) => {
  const { app } = await makeApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const tenant = await createTenant(app)
  const h = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png' })).json() as Handshake
  const forged = `/api/v1/upload/${h.fileId}?expires=${Date.now() + 3_600_000}&token=${'0'.repeat(64)}`
  // 10 GB announced, 1 KiB sent every 20 ms: draining would take forever.
  const r = await slowPut(port, forged, 10_000_000_000, { chunk: 1024, everyMs: 20, limitMs: 10_000 })
  t.match(r.answer, /^HTTP\/1.1 401 /, 'answered 401')
  t.match(r.answer.toLowerCase(), 'connection: close')
  t.ok(r.endedAfterMs !== null && r.endedAfterMs < 5000, `the server ended the connection (after ${r.endedAfterMs} ms, ${r.sent} bytes sent)`)
  // A small body is still read to its end, so the connection can be reused.
  const small = await slowPut(port, forged, 2000, { chunk: 1000, everyMs: 20, limitMs: 1500 })
  t.match(small.answer, /^HTTP\/1.1 401 /)
  t.equal(small.endedAfterMs, null, 'a small body keeps its kept-alive connection')
  t.notMatch(small.answer.toLowerCase(), 'connection: close')
})
