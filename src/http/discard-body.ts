import type { FastifyReply, FastifyRequest } from 'fastify'

/** The most of a refused body read (and thrown away) after the answer, so the client can read it. */
export const DISCARD_MAX_BYTES = 16 * 1024 * 1024
/** The longest a refused body is read after the answer. */
export const DISCARD_MAX_MS = 10_000

/**
 * Answering before the body has all arrived (a body over the limit, refused from its
 * Content-Length or its first megabyte): the rest is read and thrown away, at most
 * DISCARD_MAX_BYTES for at most DISCARD_MAX_MS, before the connection is closed, as nginx's
 * lingering close and Go's net/http do. Closing at once, with data still arriving, makes the
 * kernel reset the connection: a client still sending then fails its next write (EPIPE) or loses
 * the answer it had not read yet (ECONNRESET); undici's fetch did so about one time in two (#24).
 *
 * The connection stays open unless the reply says `Connection: close` (a shutdown): a client that
 * sends the whole body within the bounds can send its next request on it. Past the bounds the
 * connection is closed. A caller whose framework set `Connection: close` for its own error
 * (json-body.ts, the 413) removes it first.
 * `bounds` is for tests.
 */
export function discardRestOfBody(request: FastifyRequest, reply: FastifyReply, bounds = { bytes: DISCARD_MAX_BYTES, ms: DISCARD_MAX_MS }): void {
  const raw = request.raw
  // A request without a body has nothing to discard (an unread one is not `complete` yet).
  const length = raw.headers['content-length']
  if (raw.complete || (raw.headers['transfer-encoding'] === undefined && (length === undefined || length === '0'))) return
  // A `Connection: close` set by the shutdown (request-lifecycle.ts) stays: that connection is not reused.
  const socket = raw.socket
  // An injected request (app.inject) has no connection to keep readable or to close.
  if (typeof socket?.destroy !== 'function') return
  let read = 0
  const stop = () => {
    clearTimeout(timer)
    raw.off('data', count)
    raw.off('end', stop)
    socket.off('close', stop)
  }
  const giveUp = () => {
    stop()
    socket.destroy()
  }
  const count = (chunk: Buffer) => {
    read += chunk.length
    if (read > bounds.bytes) giveUp()
  }
  const timer = setTimeout(giveUp, bounds.ms)
  raw.on('data', count)
  raw.once('end', stop)
  socket.once('close', stop)
  raw.resume()
}
