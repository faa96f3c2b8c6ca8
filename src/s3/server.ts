import { randomFillSync } from 'node:crypto'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import type { Core } from '../core'
import { AppError, isDiskFull } from '../errors'
import { connectionLost, unstorableText } from '../db/engine'
import { discardRestOfBody } from '../http/discard-body'
import { lazyRequestLogger } from '../http/lazy-request-logger'
import { compilersFactory } from '../http/compilers'
import { registerRequestLifecycle, type Front } from '../http/request-lifecycle'
import { S3Error, fromAppError } from './errors'
import { xmlDocument } from './xml'
import { s3Routes } from './routes'
import { AccessLogDelivery } from './access-log'

export type S3App = FastifyInstance

declare module 'fastify' {
  interface FastifyRequest {
    /** The bucket/key the request addresses, for the error document's `<Resource>`. */
    s3Resource?: string
    /** The authenticated tenant of an S3 request (access log). */
    s3TenantId?: string
    /** How the body was signed (access log): sha256, unsigned, or an aws-chunked mode. */
    s3Payload?: string
    /** The request's Content-Type as sent, which Fastify never sees (buildS3App). */
    s3ContentType?: string
  }
}

/**
 * S3 request ids: 16 upper-case hex characters, as AWS's look. Drawn from a pool of random bytes
 * refilled every 512 ids: a randomBytes(8) call per request cost 1% of a GetObject (#14), as
 * randomUUID buffers for the API's ids.
 */
const idPool = Buffer.alloc(4096)
let idOffset = idPool.length
function newRequestId(): string {
  if (idOffset === idPool.length) {
    randomFillSync(idPool)
    idOffset = 0
  }
  idOffset += 8
  return idPool.toString('hex', idOffset - 8, idOffset).toUpperCase()
}

/** Renders an S3 error: `<Error><Code/><Message/><Resource/><RequestId/></Error>` (none for HEAD). */
export function sendS3Error(request: FastifyRequest, reply: FastifyReply, err: S3Error): FastifyReply {
  // An error is not the object: headers set for it before the failure (metadata, checksums,
  // content encoding…) would make a client misread the error document.
  for (const name of Object.keys(reply.getHeaders())) {
    if (
      /^(x-amz-checksum-|x-amz-meta-|x-amz-mp-)|^(content-encoding|content-disposition|content-language|cache-control|expires|etag|last-modified|accept-ranges)$/.test(
        name,
      )
    ) {
      reply.removeHeader(name)
    }
  }
  request.s3ErrorCode = err.code
  reply.code(err.status)
  if (err.retryAfterSeconds !== undefined) reply.header('retry-after', String(err.retryAfterSeconds))
  for (const [name, value] of Object.entries(err.headers ?? {})) reply.header(name, value)
  if (err.code === 'InvalidRange' && err.extra.ActualObjectSize !== undefined) reply.header('content-range', `bytes */${err.extra.ActualObjectSize}`)
  if (request.method === 'HEAD' || err.status === 304) return reply.send()
  const extra = Object.fromEntries(Object.entries(err.extra).filter(([k]) => k !== 'ActualObjectSize'))
  return reply
    .type('application/xml')
    .send(
      xmlDocument(
        'Error',
        { Code: err.code, Message: err.message, ...extra, Resource: request.s3Resource ?? request.url.split('?')[0], RequestId: String(request.id) },
        false,
      ),
    )
}

/** The S3 front as the request lifecycle sees it (http/request-lifecycle.ts). */
const s3Front: Front = {
  name: 's3',
  stamp: (request, reply) => {
    reply.header('x-amz-request-id', request.id)
    reply.header('x-amz-id-2', request.id)
    reply.header('server', 'Coffer')
  },
  // One route serves every operation: the label is the operation (operations.ts), a bounded set;
  // a request that is none is labelled by what it addresses.
  route: (request) => {
    const operation = request.s3Operation
    if (operation !== undefined && !(operation instanceof S3Error)) return `s3:${operation.name}`
    const target = request.s3Target
    if (!target) return 's3:unaddressed'
    return target.bucket === undefined ? 's3:/' : target.key === undefined ? 's3:/{bucket}' : 's3:/{bucket}/{key}'
  },
  tenantId: (request) => request.s3TenantId,
  logFields: (request) => {
    const operation = request.s3Operation
    return { operation: operation === undefined || operation instanceof S3Error ? undefined : operation.name, payload: request.s3Payload }
  },
}

/**
 * The S3 listener: a Fastify instance of its own on the same core (a second front, not a
 * second storage path). Bodies are never parsed by Fastify: each operation streams or reads its
 * body itself, after SigV4 has said how it must be checked.
 */
export async function buildS3App(core: Core, opts: { logger: FastifyBaseLogger }): Promise<S3App> {
  const app = Fastify({
    loggerInstance: opts.logger,
    logController: new LogController({ disableRequestLogging: true }),
    // request.log is made on first use, as the API's (lazy-request-logger.ts): the S3 front made
    // the pino child for every request, 2% of a 4 KiB GetObject's CPU (#14).
    childLoggerFactory: lazyRequestLogger,
    requestTimeout: 60 * 60_000,
    connectionTimeout: 5 * 60_000,
    trustProxy: core.config.trustProxy,
    requestIdHeader: false,
    genReqId: newRequestId,
    exposeHeadRoutes: false,
    return503OnClosing: false,
    // Fastify's default compilers are not even loaded (src/http/compilers.ts, #28).
    schemaController: { compilersFactory },
    routerOptions: { maxParamLength: 4096, ignoreDuplicateSlashes: false },
    frameworkErrors: (_error, request, reply) => {
      s3Front.stamp(request, reply)
      void sendS3Error(request, reply, new S3Error('InvalidRequest', 'The request could not be parsed'))
    },
  })
  // `Expect: 100-continue` is answered by the operation once its checks pass (BodySpec.proceed), not
  // by Node at once: a refused upload is refused before its body is sent.
  app.server.on('checkContinue', (req, res) => app.server.emit('request', req, res))
  // Any other `Expect` (a wrong value, an empty one) is ignored, as AWS and RGW do (#24): without a
  // listener Node answers 417 itself before the request is seen.
  app.server.on('checkExpectation', (req, res) => app.server.emit('request', req, res))
  // S3 stores any Content-Type as sent, an empty one or one that is no media type included (#24);
  // Fastify answers those 415 before a handler runs (FST_ERR_CTP_INVALID_MEDIA_TYPE, a 500 here).
  // No body is parsed here, so the header is moved aside before Fastify looks at it; the raw
  // headers, which SigV4 reads, keep it.
  app.addHook('onRequest', (request, _reply, done) => {
    const type = request.raw.headers['content-type']
    if (type !== undefined) {
      request.s3ContentType = type
      delete request.raw.headers['content-type']
    }
    done()
  })
  app.removeAllContentTypeParsers()
  // Leave every body unread: the operations consume request.raw themselves.
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))

  registerRequestLifecycle(app, core.metrics, opts.logger, s3Front)

  // Server access logging: a logged bucket's request is recorded once answered, off its path; the
  // records still buffered are delivered when the listener closes, before the database does.
  const accessLogs = new AccessLogDelivery(core, opts.logger)
  app.decorate('s3AccessLogs', accessLogs)
  app.addHook('onSend', (request, reply, _payload, done) => {
    if (request.s3LogSource !== undefined) request.s3TurnAround = reply.elapsedTime
    done()
  })
  app.addHook('onResponse', (request, reply, done) => {
    accessLogs.record(request, reply)
    done()
  })
  app.addHook('onClose', () => accessLogs.close())

  app.setErrorHandler((error, request, reply) => {
    let s3: S3Error
    if (error instanceof S3Error) s3 = error
    else if (error instanceof AppError) s3 = fromAppError(error)
    // A full disk met by the metadata commit (a small object stored inline, a delete without the
    // reserve), not only by the body's streaming (ingest.ts): 507, as the API answers it.
    else if (isDiskFull(error)) s3 = new S3Error('InsufficientStorage', 'The server is out of storage space; nothing was stored')
    // PostgreSQL's connection lost or refused inside a statement (#30): 503 with Retry-After, as the API answers it.
    else if (connectionLost(error))
      s3 = fromAppError(
        new AppError(
          'DATABASE_UNAVAILABLE',
          'The database is unavailable; retry later (a write cut off at its commit may have been applied: a retried upload then answers as a second one)',
          {},
        ),
      )
    // A U+0000 in a value PostgreSQL's text cannot hold (#30): the request's fault, as the API answers it.
    else if (unstorableText(error)) s3 = new S3Error('InvalidArgument', 'The request holds a character that cannot be stored (U+0000)')
    else {
      request.log.error({ err: error, reqId: request.id }, 'S3 request failed')
      s3 = new S3Error('InternalError', 'We encountered an internal error. Please try again.')
    }
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy()
      return
    }
    // The body may still be arriving (a refused signature, quota or header on a large PUT): the rest
    // is read and thrown away, bounded, after the answer, so that a client still sending reads the
    // error rather than a reset (discard-body.ts, #24). A client waiting on `Expect: 100-continue`
    // that got no 100 sends no body: Node closes that connection after the answer by itself.
    discardRestOfBody(request, reply)
    return sendS3Error(request, reply, s3)
  })

  await s3Routes(app, core)
  return app
}
