import { AppError, DATABASE_RETRY_AFTER_SECONDS, STORE_RETRY_AFTER_SECONDS } from '../errors'

/**
 * S3's error codes Coffer answers with and their HTTP statuses (Amazon S3 API reference,
 * "Error responses"). The one table for the S3 front, as http/error-handler.ts is for the API.
 */
export const S3_ERRORS = {
  AccessControlListNotSupported: 400,
  AccessDenied: 403,
  // A preflight no CORS rule allows (AWS's code for it).
  AccessForbidden: 403,
  AuthorizationHeaderMalformed: 400,
  AuthorizationQueryParametersError: 400,
  BadRequest: 400,
  BadDigest: 400,
  BucketAlreadyExists: 409,
  BucketAlreadyOwnedByYou: 409,
  BucketNotEmpty: 409,
  EntityTooLarge: 400,
  EntityTooSmall: 400,
  IllegalLocationConstraintException: 400,
  IncompleteBody: 400,
  InternalError: 500,
  InvalidAccessKeyId: 403,
  InvalidArgument: 400,
  InvalidBucketAclWithObjectOwnership: 400,
  InvalidBucketName: 400,
  InvalidBucketState: 409,
  InvalidDigest: 400,
  InvalidEncryptionAlgorithmError: 400,
  InvalidLocationConstraint: 400,
  InvalidPart: 400,
  InvalidPolicyDocument: 400,
  InvalidPartOrder: 400,
  InvalidRange: 416,
  InvalidRequest: 400,
  InvalidRetentionPeriod: 400,
  InvalidTag: 400,
  InvalidTargetBucketForLogging: 400,
  KeyTooLongError: 400,
  MalformedACLError: 400,
  MalformedPolicy: 400,
  MalformedXML: 400,
  MalformedPOSTRequest: 400,
  MaxMessageLengthExceeded: 400,
  MaxPostPreDataLengthExceeded: 400,
  MetadataTooLarge: 400,
  MethodNotAllowed: 405,
  MissingContentLength: 411,
  MissingSecurityHeader: 400,
  NoSuchBucket: 404,
  NoSuchCORSConfiguration: 404,
  NoSuchBucketPolicy: 404,
  NoSuchPublicAccessBlockConfiguration: 404,
  NoSuchObjectLockConfiguration: 404,
  ObjectLockConfigurationNotFoundError: 404,
  NoSuchKey: 404,
  NoSuchTagSet: 404,
  NoSuchLifecycleConfiguration: 404,
  NoSuchUpload: 404,
  NoSuchVersion: 404,
  OwnershipControlsNotFoundError: 404,
  NotImplemented: 501,
  NotModified: 304,
  PreconditionFailed: 412,
  QuotaExceeded: 403,
  RequestTimeTooSkewed: 403,
  ServerSideEncryptionConfigurationNotFoundError: 404,
  ServiceUnavailable: 503,
  SignatureDoesNotMatch: 403,
  SlowDown: 503,
  UnexpectedContent: 400,
  XAmzContentSHA256Mismatch: 400,
  InsufficientStorage: 507,
} as const satisfies Record<string, number>

export type S3ErrorCode = keyof typeof S3_ERRORS

/** An error meant for an S3 client: rendered as `<Error>` XML with S3's status for the code. */
export class S3Error extends Error {
  override name = 'S3Error'
  readonly status: number
  /** Sent as `Retry-After` (the blob store is unavailable: STORE_UNAVAILABLE). */
  retryAfterSeconds?: number
  /** Response headers the error carries (a delete marker's x-amz-delete-marker and x-amz-version-id, #25). */
  headers?: Record<string, string>

  constructor(
    readonly code: S3ErrorCode,
    message: string,
    /** Extra elements S3 adds to some errors (e.g. `<Region>` for AuthorizationHeaderMalformed). */
    readonly extra: Record<string, string> = {},
    /** A status other than the code's own, where AWS answers that code with another one. */
    status?: number,
  ) {
    super(message)
    this.status = status ?? S3_ERRORS[code]
  }
}

/** Maps the services' errors (shared with the API) to S3's; undefined for unexpected errors (500). */
export function fromAppError(err: AppError): S3Error {
  switch (err.code) {
    case 'QUOTA_EXCEEDED':
      return new S3Error('QuotaExceeded', err.message)
    case 'FILE_TOO_LARGE':
    case 'BODY_TOO_LARGE':
    case 'PAYLOAD_TOO_LARGE':
      return new S3Error('EntityTooLarge', err.message)
    case 'FILE_NOT_FOUND':
      return new S3Error('NoSuchKey', 'The specified key does not exist.')
    case 'WORKSPACE_NOT_FOUND':
      return new S3Error('NoSuchBucket', 'The specified bucket does not exist')
    case 'PRECONDITION_FAILED':
      return new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold')
    case 'RANGE_NOT_SATISFIABLE':
      // The renderer (http/send-blob.ts) has set Content-Range: bytes */size already.
      return new S3Error('InvalidRange', 'The requested range is not satisfiable')
    case 'RATE_LIMITED':
      return new S3Error('SlowDown', 'Please reduce your request rate.')
    case 'INSUFFICIENT_STORAGE':
      return new S3Error('InsufficientStorage', err.message)
    case 'UNAUTHORIZED':
      return new S3Error('AccessDenied', err.message)
    case 'OBJECT_LOCKED':
      return new S3Error('AccessDenied', err.message)
    case 'CONFLICT':
      return new S3Error('InvalidRequest', err.message)
    case 'NOT_READY':
      return new S3Error('ServiceUnavailable', err.message)
    case 'STORE_UNAVAILABLE': {
      // The blob store (S3-compatible, #16) is down or slow: nothing was stored; retry later.
      const e = new S3Error('ServiceUnavailable', err.message)
      e.retryAfterSeconds = STORE_RETRY_AFTER_SECONDS
      return e
    }
    case 'DATABASE_UNAVAILABLE': {
      // PostgreSQL's connection lost or refused (#30): the transaction was rolled back, nothing done.
      const e = new S3Error('ServiceUnavailable', err.message)
      e.retryAfterSeconds = DATABASE_RETRY_AFTER_SECONDS
      return e
    }
    case 'INTERNAL_ERROR':
      return new S3Error('InternalError', 'We encountered an internal error. Please try again.')
    default:
      return new S3Error('InvalidArgument', err.message)
  }
}
