import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AppError, DATABASE_RETRY_AFTER_SECONDS, isDiskFull, publicCode, STORE_RETRY_AFTER_SECONDS, type ErrorCode } from '../errors'
import { connectionLost, unstorableText } from '../db/engine'
import { formatValidationErrors } from './validation'

/** The one code → HTTP status table. */
export const STATUS: Record<ErrorCode, number> = {
  UNAUTHORIZED: 401,
  VALIDATION_ERROR: 400,
  INVALID_FILE_TYPE: 400,
  FILE_TOO_LARGE: 400,
  BODY_TOO_LARGE: 413,
  QUOTA_EXCEEDED: 403,
  // The admin turned a tenant's self-service off (#31): the key is fine, the act is not allowed.
  SELF_SERVICE_DISABLED: 403,
  FILE_NOT_FOUND: 404,
  WORKSPACE_NOT_FOUND: 404,
  TENANT_NOT_FOUND: 404,
  DELIVERY_NOT_FOUND: 404,
  // A versionId the file's key does not have (#25), as S3's NoSuchVersion.
  VERSION_NOT_FOUND: 404,
  CONFLICT: 409,
  // A version under retention or legal hold (S3 object lock, #25) blocks the delete.
  OBJECT_LOCKED: 409,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  RANGE_NOT_SATISFIABLE: 416,
  PRECONDITION_FAILED: 412,
  INSUFFICIENT_STORAGE: 507,
  STORE_UNAVAILABLE: 503,
  // PostgreSQL's connection lost or refused (#30): what was not committed was not done.
  DATABASE_UNAVAILABLE: 503,
  NOT_FOUND: 404,
  NOT_READY: 503,
  INTERNAL_ERROR: 500,
}

/** Codes whose answers tell the client when to come back (RFC 9110 §10.2.3). */
const RETRY_AFTER: Partial<Record<ErrorCode, number>> = {
  STORE_UNAVAILABLE: STORE_RETRY_AFTER_SECONDS,
  DATABASE_UNAVAILABLE: DATABASE_RETRY_AFTER_SECONDS,
}

export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  const retryAfter = RETRY_AFTER[err.code]
  if (retryAfter !== undefined) reply.header('retry-after', String(retryAfter))
  return reply
    .code(STATUS[err.code])
    .type('application/json; charset=utf-8')
    .send({ error: { code: publicCode(err.code), message: err.message, details: err.details } })
}

/** Turns whatever was thrown into a contract error; anything unrecognised becomes a bare 500. */
export function toAppError(err: FastifyError | Error, request: FastifyRequest): AppError {
  if (err instanceof AppError) return err
  const fe = err as FastifyError
  if (fe.validation) {
    const errors = formatValidationErrors(fe.validation as never, fe.validationContext)
    const first = errors[0]
    return new AppError('VALIDATION_ERROR', first ? `${first.path}: ${first.message}` : 'Request validation failed', { errors })
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('PAYLOAD_TOO_LARGE', 'Request body is larger than 1 MiB', { maxBytes: request.routeOptions.bodyLimit ?? 1048576 })
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('VALIDATION_ERROR', 'Body is not valid JSON', { errors: [{ path: '/', message: 'is not valid JSON' }] })
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('VALIDATION_ERROR', 'Body must be a JSON object', { errors: [{ path: '/', message: 'is empty' }] })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('VALIDATION_ERROR', 'Content-Type must be application/json', {
        errors: [{ path: '/headers/content-type', message: 'must be application/json' }],
      })
  }
  if (isDiskFull(err)) return new AppError('INSUFFICIENT_STORAGE', 'The server is out of storage space; nothing was stored')
  if (connectionLost(err))
    return new AppError(
      'DATABASE_UNAVAILABLE',
      'The database is unavailable; retry later (a write cut off at its commit may have been applied: a retried upload then answers as a second one)',
      {},
    )
  if (unstorableText(err)) return new AppError('VALIDATION_ERROR', 'The request holds a character that cannot be stored (U+0000)', { errors: [] })
  // Fastify's own 4xx (malformed URL, bad header, …): the client's fault, said plainly.
  const status = fe.statusCode ?? 500
  if (status >= 400 && status < 500) {
    if (status === 404) return new AppError('NOT_FOUND', 'Not found')
    if (status === 413) return new AppError('PAYLOAD_TOO_LARGE', 'Request body is too large')
    return new AppError('VALIDATION_ERROR', fe.message || 'Bad request', { errors: [] })
  }
  return new AppError('INTERNAL_ERROR', 'Internal server error', { requestId: request.id })
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Where a route's service input sits in the request, as a JSON pointer prefix: `/query` when
     * the service was handed the query string. Services name invalid fields by pointers into their
     * input (`/cursor`); the error envelope names them in the request (`/query/cursor`).
     */
    inputPointer?: string
  }
}

/** A service's VALIDATION_ERROR with its field pointers placed in the request (see inputPointer). */
function placeInRequest(err: AppError, request: FastifyRequest): AppError {
  const prefix = request.routeOptions.config.inputPointer
  if (err.code !== 'VALIDATION_ERROR' || prefix === undefined) return err
  const errors = (err.details.errors as { path: string; message: string }[] | undefined)?.map((e) => ({ ...e, path: `${prefix}${e.path}` }))
  const first = errors?.[0]
  return new AppError('VALIDATION_ERROR', first ? `${first.path}: ${first.message}` : err.message, { ...err.details, errors })
}

/** The store's own error in a few words for the log (its name, code and message; never a response dump). */
function describeCause(cause: unknown): string | undefined {
  if (!(cause instanceof Error)) return undefined
  const code = (cause as NodeJS.ErrnoException).code
  return `${cause.name}${code ? ` ${code}` : ''}: ${cause.message}`.slice(0, 300)
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const appErr = err instanceof AppError ? placeInRequest(err, request) : toAppError(err, request)
    const status = STATUS[appErr.code]
    if (appErr.code === 'STORE_UNAVAILABLE') {
      request.log.warn(
        { operation: (appErr as { operation?: string }).operation, storeError: describeCause((appErr as { cause?: unknown }).cause) },
        'blob store unavailable',
      )
    } else if (appErr.code === 'DATABASE_UNAVAILABLE') {
      request.log.warn({ sqlstate: (err as { code?: unknown }).code }, 'database unavailable')
    } else if (status >= 500 && appErr.code !== 'INSUFFICIENT_STORAGE') {
      request.log.error({ err }, 'request failed')
    } else if (status >= 500) {
      request.log.warn({ errCode: (err as NodeJS.ErrnoException).code }, 'disk full')
    }
    return sendError(reply, appErr)
  })
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new AppError('NOT_FOUND', `No route ${request.method} ${(request.url.split('?')[0] ?? '').slice(0, 200)}`)),
  )
}
