import http from 'node:http'
import type { Socket } from 'node:net'

/**
 * Answers errors Node's HTTP parser raises before any request exists (a malformed request line
 * or header, headers too large, a request that did not arrive in time) with the contract's error
 * envelope instead of Fastify's `{"error":"Bad Request","message":"Client Error"}` (#12 item 14),
 * then closes the connection: the parser cannot find the next request on it.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  // Reset by the client: there is no one to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [status, message, path] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'The request headers are too large', '/headers']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'The request did not arrive in time', '/']
        : [400, 'The request is not valid HTTP', '/']
  const body = JSON.stringify({ error: { code: 'VALIDATION_ERROR', message, details: { errors: [{ path, message: 'is malformed' }] } } })
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    )
  }
  socket.destroySoon()
}
