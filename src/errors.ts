/**
 * The one list of error codes Coffer answers with. The HTTP status of each code lives in
 * http/error-handler.ts and nowhere else.
 */
export const ERROR_CODES = [
  'UNAUTHORIZED',
  'VALIDATION_ERROR',
  'INVALID_FILE_TYPE',
  'FILE_TOO_LARGE',
  'BODY_TOO_LARGE',
  'QUOTA_EXCEEDED',
  'SELF_SERVICE_DISABLED',
  'FILE_NOT_FOUND',
  'WORKSPACE_NOT_FOUND',
  'TENANT_NOT_FOUND',
  'DELIVERY_NOT_FOUND',
  'VERSION_NOT_FOUND',
  'CONFLICT',
  'OBJECT_LOCKED',
  'PAYLOAD_TOO_LARGE',
  'RATE_LIMITED',
  'RANGE_NOT_SATISFIABLE',
  'PRECONDITION_FAILED',
  'INSUFFICIENT_STORAGE',
  'STORE_UNAVAILABLE',
  'DATABASE_UNAVAILABLE',
  'NOT_FOUND',
  'NOT_READY',
  'INTERNAL_ERROR',
] as const

export type ErrorCode = (typeof ERROR_CODES)[number]

/**
 * Codes that clients see under another name. An upload body that outgrows its limit is
 * FILE_TOO_LARGE on the wire (contract: Errors) like an oversized handshake, but it is a different
 * failure with a different status (413, not 400), so it has its own code here and in the status
 * table; fronts, webhook events and metrics all report the public name.
 */
const PUBLIC_CODE: Partial<Record<ErrorCode, string>> = { BODY_TOO_LARGE: 'FILE_TOO_LARGE' }

/** The code clients see for `code`. */
export const publicCode = (code: ErrorCode): string => PUBLIC_CODE[code] ?? code

export type ErrorDetails = Record<string, unknown>

/** An error meant for the client: a contract code, a human message, and structured details. */
export class AppError extends Error {
  readonly code: ErrorCode
  readonly details: ErrorDetails

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}) {
    super(message)
    this.name = 'AppError'
    this.code = code
    this.details = details
  }
}

export const notFound = {
  file: () => new AppError('FILE_NOT_FOUND', 'File not found'),
  workspace: () => new AppError('WORKSPACE_NOT_FOUND', 'Workspace not found'),
  tenant: () => new AppError('TENANT_NOT_FOUND', 'Tenant not found'),
  delivery: () => new AppError('DELIVERY_NOT_FOUND', 'Webhook delivery not found'),
  version: () => new AppError('VERSION_NOT_FOUND', 'Version not found'),
}

/**
 * A VALIDATION_ERROR for one field. `path` is a JSON pointer into the input the caller was given:
 * a service says `/cursor` or `/workspaceId`; the HTTP front places it in the request (a route
 * whose input is the query declares `config.inputPointer: '/query'`, see http/error-handler.ts),
 * and another front may map it to its own notion of a field.
 */
export const validationError = (path: string, message: string): AppError =>
  new AppError('VALIDATION_ERROR', `${path}: ${message}`, { errors: [{ path, message }] })

/**
 * How long a client should wait before retrying after STORE_UNAVAILABLE (the `Retry-After`
 * header): long enough for a gateway restart or a slow-down to pass, short enough to matter.
 */
export const STORE_RETRY_AFTER_SECONDS = 5

/**
 * How long a client should wait after DATABASE_UNAVAILABLE (#30): PostgreSQL's connection was
 * lost, and the next request connects again, so a restart or a failover is what it waits for.
 */
export const DATABASE_RETRY_AFTER_SECONDS = 5

/**
 * The blob store (an S3-compatible object store) is down, slow past its timeout, or refusing us.
 * Nothing was stored by the failed operation; the client may retry later (503, Retry-After).
 * `operation` names what failed (metrics, logs); `cause` keeps the store's own error for the log.
 */
export const storeUnavailable = (operation: string, cause?: unknown): AppError =>
  Object.assign(new AppError('STORE_UNAVAILABLE', 'The storage backend is unavailable; nothing was stored or read. Retry later', {}), { operation, cause })

/** True when an fs error means the disk (or the user's disk quota) is full. */
export function isDiskFull(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  return code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL'
}
