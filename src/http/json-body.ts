import type { FastifyInstance } from 'fastify'
import { AppError } from '../errors'
import { jsonDeeperThan } from '../lib/json-depth'
import { discardRestOfBody } from './discard-body'

/** No request body of the API nests deeper than this; free-form fields have tighter bounds of their own. */
export const MAX_BODY_DEPTH = 64

/**
 * The JSON body parser: Fastify's own (prototype-poisoning checks included), with two changes.
 * - A body nested deeper than MAX_BODY_DEPTH is refused before it is parsed (#12 item 5).
 * - An empty body on a route that takes none is no body: clients such as the Storage Brain SDK
 *   send `DELETE` with `Content-Type: application/json` and nothing else (#12 item 15).
 * - A body over the limit is answered 413 and the rest of it read and discarded (bounded) rather
 *   than the connection closed under a client still sending it (discard-body.ts, #24).
 */
export function registerJsonBody(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string
    if (text.length === 0 && request.routeOptions.schema?.body === undefined) return done(null, undefined)
    if (jsonDeeperThan(text, MAX_BODY_DEPTH)) {
      return done(
        new AppError('VALIDATION_ERROR', `Body nests deeper than ${MAX_BODY_DEPTH} levels`, {
          errors: [{ path: '/', message: `nests deeper than ${MAX_BODY_DEPTH} levels` }],
        }),
      )
    }
    void parse(request, text, done)
  })
  // Fastify answers a parser's error with `Connection: close`, so Node closes the connection as
  // soon as the 413 is written, the body still arriving.
  app.addHook('onError', (request, reply, err, done) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      reply.removeHeader('connection')
      discardRestOfBody(request, reply)
    }
    done()
  })
}
