/**
 * The one list of error codes Coffer answers with. The HTTP status of each code lives in
 * http/error-handler.ts and nowhere else.
 */
export const ERROR_CODES = [
  'UNAUTHORIZED',
  'VALIDATION_ERROR',
  'INVALID_FILE_TYPE',
  'FILE_TOO_LARGE',
  'QUOTA_EXCEEDED',
  'FILE_NOT_FOUND',
  'WORKSPACE_NOT_FOUND',
  'TENANT_NOT_FOUND',
  'DELIVERY_NOT_FOUND',
  'CONFLICT',
  'PAYLOAD_TOO_LARGE',
  'RATE_LIMITED',
  'RANGE_NOT_SATISFIABLE',
  'INSUFFICIENT_STORAGE',
  'NOT_FOUND',
  'NOT_READY',
  'INTERNAL_ERROR',
] as const

export type ErrorCode = (typeof ERROR_CODES)[number]

export type ErrorDetails = Record<string, unknown>

/** An error meant for the client: a contract code, a human message, and structured details. */
export class AppError extends Error {
  readonly code: ErrorCode
  readonly details: ErrorDetails
  /** FILE_TOO_LARGE is 400 at the handshake but 413 when a PUT body overflows. */
  readonly statusOverride: number | undefined

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}, statusOverride?: number) {
    super(message)
    this.name = 'AppError'
    this.code = code
    this.details = details
    this.statusOverride = statusOverride
  }
}

export const notFound = {
  file: () => new AppError('FILE_NOT_FOUND', 'File not found'),
  workspace: () => new AppError('WORKSPACE_NOT_FOUND', 'Workspace not found'),
  tenant: () => new AppError('TENANT_NOT_FOUND', 'Tenant not found'),
  delivery: () => new AppError('DELIVERY_NOT_FOUND', 'Webhook delivery not found'),
}

export const validationError = (path: string, message: string): AppError =>
  new AppError('VALIDATION_ERROR', `${path}: ${message}`, { errors: [{ path, message }] })

/** True when an fs error means the disk (or the user's disk quota) is full. */
export function isDiskFull(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  return code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL'
}
