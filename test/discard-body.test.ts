// @suites: pg-all
import t from 'tap'
import { execFile } from 'node:child_process'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import { DISCARD_MAX_BYTES, discardRestOfBody } from '../src/http/discard-body'
import { createTenant, makeApp } from './helper'

// A JSON body over the 1 MiB limit is answered 413 while the client is still sending it. The rest
// is read and discarded (bounded), not the connection closed under the client (#24).

const ENVELOPE_413 = { code: 'PAYLOAD_TOO_LARGE', message: 'Request body is larger than 1 MiB', details: { maxBytes: 1048576 } }

/** Node's fetch (undici) in a process of its own, as a browser or an SDK would be: client and server do not share an event loop. */
function fetchTimes(url: string, headers: Record<string, string>, bodyBytes: number, times: number): Promise<string[]> {
  const script = `
    const [url, headers, size, times] = [process.argv[1], JSON.parse(process.argv[2]), Number(process.argv[3]), Number(process.argv[4])]
    const body = JSON.stringify({ fileType: 'image/png', fileName: 'a.png', tags: { k: 'x'.repeat(size) } })
    const seen = []
    for (let i = 0; i < times; i++) {
      try {
        const res = await fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body })
        seen.push(res.status + ' ' + await res.text())
      } catch (err) {
        seen.push('failed: ' + (err.cause?.code ?? err.cause?.message ?? err.message))
      }
    }
    console.log(JSON.stringify(seen))`
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ['--input-type=module', '-e', script, url, JSON.stringify(headers), String(bodyBytes), String(times)],
      { maxBuffer: 1 << 20 },
      (err, stdout) => (err ? reject(new Error(err.message)) : resolve(JSON.parse(stdout) as string[])),
    ),
  )
}

/** Sends a request head and then `body` bytes (or as many as the server takes), collecting the answer. */
function rawPost(
  port: number,
  head: string,
  bodyBytes: number,
  then?: string,
): Promise<{ answer: string; sent: number; closedBy: 'server' | 'error' | 'us'; error?: string }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    let answer = ''
    let sent = 0
    let error: string | undefined
    const chunk = Buffer.alloc(64 * 1024, 0x78)
    const finish = (closedBy: 'server' | 'error' | 'us') => {
      clearTimeout(limit)
      socket.destroy()
      resolve({ answer, sent, closedBy, ...(error ? { error } : {}) })
    }
    const limit = setTimeout(() => finish('us'), 20_000)
    socket.setEncoding('latin1')
    socket.on('data', (d: string) => {
      answer += d
      // The second request's answer is in: done.
      if (then !== undefined && answer.split('HTTP/1.1 ').length > 2 && answer.endsWith('}')) finish('us')
    })
    socket.on('end', () => finish('server'))
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error = err.code
      finish('error')
    })
    socket.write(head)
    const pump = () => {
      while (sent < bodyBytes && !socket.destroyed) {
        const n = Math.min(chunk.length, bodyBytes - sent)
        sent += n
        if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void socket.once('drain', pump)
      }
      if (sent >= bodyBytes && then !== undefined) socket.write(then)
    }
    pump()
  })
}

t.test('a 5 MB JSON body: every fetch() reads the 413 envelope, none fails with EPIPE or ECONNRESET (#24)', async (t) => {
  const { app } = await makeApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const tenant = await createTenant(app)
  const seen = await fetchTimes(`http://127.0.0.1:${port}/api/v1/upload/request`, tenant.headers, 5_000_000, 30)
  const failed = seen.filter((s) => !s.startsWith('413 '))
  t.same(failed, [], `all 30 answered 413 (${failed.length} did not)`)
  t.same(JSON.parse(seen[0]!.slice(4)), { error: ENVELOPE_413 }, 'in the JSON envelope')
  // Far over the bound: fetch reads the 413 and stops sending by itself.
  const huge = await fetchTimes(`http://127.0.0.1:${port}/api/v1/upload/request`, tenant.headers, 100_000_000, 3)
  t.same(
    huge.map((s) => s.slice(0, 4)),
    ['413 ', '413 ', '413 '],
    '100 MB bodies too',
  )
})

t.test('the rest of a refused body is discarded: the connection serves the next request; past the bound it is closed', async (t) => {
  const { app } = await makeApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const tenant = await createTenant(app)
  const auth = `Authorization: ${tenant.headers.authorization}\r\n`
  const size = 3 * 1024 * 1024
  const post = `POST /api/v1/upload/request HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`
  const next = `GET /api/v1/tenant/quota HTTP/1.1\r\nHost: x\r\n${auth}\r\n`
  const kept = await rawPost(port, post, size, next)
  t.match(kept.answer, /^HTTP\/1.1 413 /, 'answered 413')
  t.notMatch(kept.answer.toLowerCase(), 'connection: close', 'without closing')
  t.match(kept.answer, /HTTP\/1.1 413 [^]*HTTP\/1.1 200 [^]*"usedBytes"/, 'the next request on the connection is answered')

  // 10 GB announced, sent as fast as the server reads: it reads DISCARD_MAX_BYTES, then closes.
  const endless = `POST /api/v1/upload/request HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n`
  const cut = await rawPost(port, endless, 10_000_000_000)
  t.match(cut.answer, /^HTTP\/1.1 413 /, 'answered 413 first')
  t.not(cut.closedBy, 'us', `the server closed the connection (${cut.closedBy} ${cut.error ?? ''})`)
  t.ok(cut.sent > DISCARD_MAX_BYTES && cut.sent < DISCARD_MAX_BYTES + 16 * 1024 * 1024, `after about ${DISCARD_MAX_BYTES} bytes (${cut.sent} sent)`)
})

t.test('discardRestOfBody: a body that trickles is read for a bounded time, then its connection closed', async (t) => {
  const app = Fastify()
  app.post('/', { bodyLimit: 10 }, async () => ({ ok: true }))
  app.addHook('onError', (request, reply, err, done) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      // Fastify's own Connection: close for a parser's error, removed as json-body.ts does.
      reply.removeHeader('connection')
      discardRestOfBody(request, reply, { bytes: 1 << 20, ms: 500 })
    }
    done()
  })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const began = Date.now()
  const r = await new Promise<{ answer: string; ms: number }>((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    let answer = ''
    socket.setEncoding('latin1')
    socket.on('data', (d: string) => (answer += d))
    const done = () => {
      clearInterval(drip)
      resolve({ answer, ms: Date.now() - began })
    }
    socket.on('close', done)
    socket.on('error', () => {})
    socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n')
    const drip = setInterval(() => socket.writable && socket.write('x'), 20)
  })
  t.match(r.answer, /^HTTP\/1.1 413 /)
  t.ok(r.ms >= 450 && r.ms < 5000, `closed after the time bound (${r.ms} ms)`)
})

t.test('a 401 from tenant or admin authentication: the body is discarded within the bounds, not read to its end (#24)', async (t) => {
  const { app } = await makeApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const tenant = await createTenant(app)
  const auth = `Authorization: ${tenant.headers.authorization}\r\n`
  for (const [what, path, key] of [
    ['tenant', '/api/v1/upload/request', 'Bearer not-a-key'],
    ['admin', '/api/v1/admin/tenants', 'Bearer not-the-admin-key'],
  ] as const) {
    // 10 GB announced by nobody, sent as fast as the server reads: it reads DISCARD_MAX_BYTES, then closes.
    const endless = `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${key}\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n`
    const cut = await rawPost(port, endless, 10_000_000_000)
    t.match(cut.answer, /^HTTP\/1.1 401 [^]*"UNAUTHORIZED"/, `${what}: answered 401 first`)
    t.not(cut.closedBy, 'us', `${what}: the server closed the connection (${cut.closedBy} ${cut.error ?? ''})`)
    t.ok(cut.sent < DISCARD_MAX_BYTES + 16 * 1024 * 1024, `${what}: after about ${DISCARD_MAX_BYTES} bytes (${cut.sent} sent)`)
  }
  // A small refused body is read to its end: the connection serves the next request.
  const size = 100_000
  const post = `POST /api/v1/upload/request HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`
  const next = `GET /api/v1/tenant/quota HTTP/1.1\r\nHost: x\r\n${auth}\r\n`
  const kept = await rawPost(port, post, size, next)
  t.match(kept.answer, /^HTTP\/1.1 401 /, 'answered 401')
  t.match(kept.answer, /HTTP\/1.1 401 [^]*HTTP\/1.1 200 [^]*"usedBytes"/, 'the next request on the connection is answered')
})
