// @suites: pg-all
import t from 'tap'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { makeApp } from './helper'

// #12 item 14: what Node's HTTP parser refuses is answered in the contract's error envelope.

/** Sends raw bytes and returns everything the server answers until it closes the connection. */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    let got = ''
    socket.setEncoding('utf8')
    socket.on('data', (d: string) => (got += d))
    socket.on('end', () => resolve(got))
    socket.on('error', (err) => (got ? resolve(got) : reject(err)))
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5 s')))
    socket.write(bytes)
  })
}

t.test('malformed request lines and headers, and headers too large, get the error envelope', async (t) => {
  const { app } = await makeApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  for (const [label, bytes, status] of [
    ['malformed request line', 'GARBAGE\r\n\r\n', 400],
    ['malformed header', 'GET /health HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n', 400],
    ['bad Content-Length', 'POST /api/v1/workspaces HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 400],
    ['headers too large', `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`, 431],
  ] as const) {
    const answer = await raw(port, bytes)
    const [head, body] = answer.split('\r\n\r\n') as [string, string]
    t.match(head, new RegExp(`^HTTP/1.1 ${status} `), label)
    t.match(head.toLowerCase(), 'content-type: application/json; charset=utf-8', label)
    const json = JSON.parse(body) as { error: { code: string; message: string; details: { errors: unknown[] } } }
    t.equal(json.error.code, 'VALIDATION_ERROR', label)
    t.type(json.error.message, 'string')
    t.ok(Array.isArray(json.error.details.errors), `${label}: details.errors`)
  }
  const ok = await raw(port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  t.match(ok, /^HTTP\/1.1 200 /, 'the server still answers well-formed requests')
})
