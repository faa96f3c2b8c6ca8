import type { FastifyRequest } from 'fastify'
import { AppError } from '../errors'
import type { App } from './types'

/**
 * The media type of a Content-Type header (RFC 9110 §8.3: `type/subtype` and optional
 * parameters), lower case, without parameters; undefined when the header is absent or empty,
 * null when it is not one media type (`image/png, text/html`, `;`: #12 item 11).
 */
export function mediaType(header: string | undefined): string | undefined | null {
  if (header === undefined || header.trim() === '') return undefined
  // type/subtype (RFC 9110 tokens), then `; name=value` parameters, the value a token or a quoted string.
  const m =
    /^\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*(?:;\s*(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+=(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+|"(?:[^"\\]|\\.)*")\s*)?)*$/.exec(
      header,
    )
  return m ? m[1]!.toLowerCase() : null
}

/** A Content-Length header as a number, when it is one. */
export function contentLength(header: string | undefined): number | undefined {
  return header !== undefined && /^\d+$/.test(header) ? Number(header) : undefined
}

/**
 * What an error from a request body stream means for the client: the connection was cut before
 * the body ended (reset, aborted, closed early) is a VALIDATION_ERROR on `/body`; anything else is
 * not the client's doing (undefined: the service decides).
 */
export function bodyError(err: unknown): AppError | undefined {
  if (err instanceof AppError) return undefined
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  if (code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'ECONNRESET' || code === 'ECONNABORTED' || (err as Error | undefined)?.name === 'AbortError') {
    return new AppError('VALIDATION_ERROR', 'The upload was cut off before the body ended', { errors: [{ path: '/body', message: 'was cut off' }] })
  }
  return undefined
}

/**
 * Makes `scope` take request bodies as raw streams, whatever their Content-Type, and returns how a
 * handler reads the Content-Type the request was sent with. Fastify refuses a malformed one
 * (`image/png, text/html`, `;`) before the handler runs, with a message about JSON; set aside
 * here, it is the handler's to judge (and to answer in the API's envelope).
 */
export function rawBodies(scope: App): (request: FastifyRequest) => string | undefined {
  scope.removeAllContentTypeParsers()
  scope.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))
  const sent = new WeakMap<FastifyRequest, string>()
  scope.addHook('onRequest', (request, _reply, done) => {
    const type = request.headers['content-type']
    if (type !== undefined) {
      sent.set(request, type)
      request.headers['content-type'] = 'application/octet-stream'
    }
    done()
  })
  return (request) => sent.get(request)
}
