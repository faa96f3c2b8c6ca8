import { S3Error } from './errors'

/**
 * The one table of S3 operations. Every request is
 * parsed once, here, into the AWS operation it is, from its method, what it addresses (the
 * service, a bucket, an object) and its sub-resource query parameter or selecting header; the
 * handler is looked up by that name (routes.ts). The name is also the log field and the metrics
 * label, and the row's `action` the IAM action a bucket policy is evaluated against.
 *
 * Rows are tried in order: the first whose method and scope match, whose sub-resource is in the
 * query (when it names one) and whose header is present (when it names one) is the operation. Any
 * other query parameter it does not accept is a sub-resource Coffer does not implement: 501, never
 * ignored (a client asking for something must not believe it got it).
 */

export type Scope = 'service' | 'bucket' | 'object'
type Method = 'GET' | 'HEAD' | 'PUT' | 'POST' | 'DELETE'

export interface OperationRow {
  readonly name: string
  readonly method: Method
  readonly on: Scope
  /** The IAM action (Service Authorization Reference, "Actions defined by Amazon S3"). */
  readonly action: string
  /** A query parameter whose presence selects the operation (a sub-resource such as `acl`). */
  readonly sub?: string
  /** A request header whose presence selects it (CopyObject's `x-amz-copy-source`). */
  readonly header?: string
  /** The other query parameters it accepts. */
  readonly params?: readonly string[]
  /** Its IAM action when the request names a version (`versionId`, `null` included), e.g. `s3:GetObjectVersion`. */
  readonly versionAction?: string
  /** Its `x-amz-object-lock-*` headers ask for s3:PutObjectRetention / s3:PutObjectLegalHold as well. */
  readonly locks?: true
  /** Its `x-amz-bypass-governance-retention: true` asks for s3:BypassGovernanceRetention as well. */
  readonly bypass?: true
}

// Both listings accept each other's parameters, as AWS does (ignoring those of the other version).
const LIST_PARAMS = [
  'prefix',
  'delimiter',
  'max-keys',
  'marker',
  'continuation-token',
  'start-after',
  'fetch-owner',
  'encoding-type',
  // Ceph RGW's extension (ceph/s3-tests use it): an ordered listing is a valid unordered one (#24).
  'allow-unordered',
] as const
const GET_OBJECT_PARAMS = [
  'response-content-type',
  'response-content-language',
  'response-expires',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
  'partNumber',
  'versionId',
] as const

/** Every operation the S3 front serves. Order matters where two rows could match (see above). */
export const OPERATIONS = [
  // The service.
  {
    name: 'ListBuckets',
    method: 'GET',
    on: 'service',
    action: 's3:ListAllMyBuckets',
    params: ['max-buckets', 'continuation-token', 'prefix', 'bucket-region'],
  },

  // Buckets.
  // `read-stats=true` is Ceph RGW's: the answer adds the bucket's object count and bytes (ops/buckets.ts).
  { name: 'HeadBucket', method: 'HEAD', on: 'bucket', action: 's3:ListBucket', params: ['read-stats'] },
  { name: 'GetBucketCors', method: 'GET', on: 'bucket', action: 's3:GetBucketCORS', sub: 'cors' },
  { name: 'GetBucketAcl', method: 'GET', on: 'bucket', action: 's3:GetBucketAcl', sub: 'acl' },
  { name: 'GetBucketLocation', method: 'GET', on: 'bucket', action: 's3:GetBucketLocation', sub: 'location' },
  { name: 'GetBucketTagging', method: 'GET', on: 'bucket', action: 's3:GetBucketTagging', sub: 'tagging' },
  { name: 'GetBucketLifecycleConfiguration', method: 'GET', on: 'bucket', action: 's3:GetLifecycleConfiguration', sub: 'lifecycle' },
  { name: 'GetBucketVersioning', method: 'GET', on: 'bucket', action: 's3:GetBucketVersioning', sub: 'versioning' },
  { name: 'GetBucketEncryption', method: 'GET', on: 'bucket', action: 's3:GetEncryptionConfiguration', sub: 'encryption' },
  { name: 'GetObjectLockConfiguration', method: 'GET', on: 'bucket', action: 's3:GetBucketObjectLockConfiguration', sub: 'object-lock' },
  {
    name: 'ListObjectVersions',
    method: 'GET',
    on: 'bucket',
    action: 's3:ListBucketVersions',
    sub: 'versions',
    params: ['prefix', 'delimiter', 'key-marker', 'version-id-marker', 'max-keys', 'encoding-type'],
  },
  {
    name: 'ListMultipartUploads',
    method: 'GET',
    on: 'bucket',
    action: 's3:ListBucketMultipartUploads',
    sub: 'uploads',
    params: ['prefix', 'delimiter', 'max-uploads', 'key-marker', 'upload-id-marker', 'encoding-type'],
  },
  { name: 'GetBucketLogging', method: 'GET', on: 'bucket', action: 's3:GetBucketLogging', sub: 'logging' },
  { name: 'GetBucketPolicy', method: 'GET', on: 'bucket', action: 's3:GetBucketPolicy', sub: 'policy' },
  { name: 'GetBucketPolicyStatus', method: 'GET', on: 'bucket', action: 's3:GetBucketPolicyStatus', sub: 'policyStatus' },
  { name: 'GetPublicAccessBlock', method: 'GET', on: 'bucket', action: 's3:GetBucketPublicAccessBlock', sub: 'publicAccessBlock' },
  { name: 'GetBucketOwnershipControls', method: 'GET', on: 'bucket', action: 's3:GetBucketOwnershipControls', sub: 'ownershipControls' },
  // `list-type` makes a listing V2 (its value must be 2: the handler says so); the IAM action is the same.
  { name: 'ListObjectsV2', method: 'GET', on: 'bucket', action: 's3:ListBucket', sub: 'list-type', params: LIST_PARAMS },
  // A browser form's success_action_redirect naming the bucket's own URL (PostObject) lands here
  // with `bucket`, `key` and `etag` added to its query: AWS lists the bucket, ignoring them.
  { name: 'ListObjects', method: 'GET', on: 'bucket', action: 's3:ListBucket', params: [...LIST_PARAMS, 'bucket', 'key', 'etag'] },
  { name: 'PutBucketCors', method: 'PUT', on: 'bucket', action: 's3:PutBucketCORS', sub: 'cors' },
  { name: 'PutBucketTagging', method: 'PUT', on: 'bucket', action: 's3:PutBucketTagging', sub: 'tagging' },
  // AWS's DeleteBucketTagging is authorized as s3:PutBucketTagging (Service Authorization Reference).
  { name: 'DeleteBucketTagging', method: 'DELETE', on: 'bucket', action: 's3:PutBucketTagging', sub: 'tagging' },
  { name: 'PutBucketAcl', method: 'PUT', on: 'bucket', action: 's3:PutBucketAcl', sub: 'acl' },
  { name: 'PutBucketEncryption', method: 'PUT', on: 'bucket', action: 's3:PutEncryptionConfiguration', sub: 'encryption' },
  // The IAM action of deleting it is the one of putting it (Service Authorization Reference).
  { name: 'DeleteBucketEncryption', method: 'DELETE', on: 'bucket', action: 's3:PutEncryptionConfiguration', sub: 'encryption' },
  { name: 'PutBucketLifecycleConfiguration', method: 'PUT', on: 'bucket', action: 's3:PutLifecycleConfiguration', sub: 'lifecycle' },
  { name: 'PutBucketVersioning', method: 'PUT', on: 'bucket', action: 's3:PutBucketVersioning', sub: 'versioning' },
  { name: 'PutBucketLogging', method: 'PUT', on: 'bucket', action: 's3:PutBucketLogging', sub: 'logging' },
  { name: 'PutBucketPolicy', method: 'PUT', on: 'bucket', action: 's3:PutBucketPolicy', sub: 'policy' },
  { name: 'PutPublicAccessBlock', method: 'PUT', on: 'bucket', action: 's3:PutBucketPublicAccessBlock', sub: 'publicAccessBlock' },
  { name: 'PutObjectLockConfiguration', method: 'PUT', on: 'bucket', action: 's3:PutBucketObjectLockConfiguration', sub: 'object-lock' },
  { name: 'PutBucketOwnershipControls', method: 'PUT', on: 'bucket', action: 's3:PutBucketOwnershipControls', sub: 'ownershipControls' },
  { name: 'CreateBucket', method: 'PUT', on: 'bucket', action: 's3:CreateBucket' },
  { name: 'DeleteBucketCors', method: 'DELETE', on: 'bucket', action: 's3:PutBucketCORS', sub: 'cors' },
  { name: 'DeleteBucketPolicy', method: 'DELETE', on: 'bucket', action: 's3:DeleteBucketPolicy', sub: 'policy' },
  // AWS authorizes DeletePublicAccessBlock with the action that puts one.
  { name: 'DeletePublicAccessBlock', method: 'DELETE', on: 'bucket', action: 's3:PutBucketPublicAccessBlock', sub: 'publicAccessBlock' },
  // IAM has no action of its own for the delete: it is s3:PutLifecycleConfiguration (Service Authorization Reference).
  { name: 'DeleteBucketLifecycle', method: 'DELETE', on: 'bucket', action: 's3:PutLifecycleConfiguration', sub: 'lifecycle' },
  // Deleting them is authorized as putting them (Service Authorization Reference).
  { name: 'DeleteBucketOwnershipControls', method: 'DELETE', on: 'bucket', action: 's3:PutBucketOwnershipControls', sub: 'ownershipControls' },
  { name: 'DeleteBucket', method: 'DELETE', on: 'bucket', action: 's3:DeleteBucket' },
  { name: 'DeleteObjects', method: 'POST', on: 'bucket', action: 's3:DeleteObject', sub: 'delete', bypass: true },
  // Ceph RGW's extension: delivers the bucket's pending access log records now (ops/logging.ts); RGW
  // authorizes it as s3:PutBucketLogging.
  { name: 'PostBucketLogging', method: 'POST', on: 'bucket', action: 's3:PutBucketLogging', sub: 'logging' },
  // A browser's form upload (POST Object): authenticated by its form fields, not by the request (post-object.ts).
  { name: 'PostObject', method: 'POST', on: 'bucket', action: 's3:PutObject', locks: true },

  // Objects.
  {
    name: 'ListParts',
    method: 'GET',
    on: 'object',
    action: 's3:ListMultipartUploadParts',
    sub: 'uploadId',
    params: ['max-parts', 'part-number-marker', 'encoding-type'],
  },
  { name: 'GetObjectRetention', method: 'GET', on: 'object', action: 's3:GetObjectRetention', sub: 'retention', params: ['versionId'] },
  { name: 'GetObjectLegalHold', method: 'GET', on: 'object', action: 's3:GetObjectLegalHold', sub: 'legal-hold', params: ['versionId'] },
  { name: 'PutObjectRetention', method: 'PUT', on: 'object', action: 's3:PutObjectRetention', sub: 'retention', params: ['versionId'], bypass: true },
  { name: 'PutObjectLegalHold', method: 'PUT', on: 'object', action: 's3:PutObjectLegalHold', sub: 'legal-hold', params: ['versionId'] },
  { name: 'GetObjectAcl', method: 'GET', on: 'object', action: 's3:GetObjectAcl', sub: 'acl', params: ['versionId'], versionAction: 's3:GetObjectVersionAcl' },
  {
    name: 'GetObjectAttributes',
    method: 'GET',
    on: 'object',
    action: 's3:GetObjectAttributes',
    sub: 'attributes',
    params: ['versionId'],
    versionAction: 's3:GetObjectVersionAttributes',
  },
  {
    name: 'GetObjectTagging',
    method: 'GET',
    on: 'object',
    action: 's3:GetObjectTagging',
    sub: 'tagging',
    params: ['versionId'],
    versionAction: 's3:GetObjectVersionTagging',
  },
  { name: 'GetObject', method: 'GET', on: 'object', action: 's3:GetObject', params: GET_OBJECT_PARAMS, versionAction: 's3:GetObjectVersion' },
  { name: 'HeadObject', method: 'HEAD', on: 'object', action: 's3:GetObject', params: GET_OBJECT_PARAMS, versionAction: 's3:GetObjectVersion' },
  { name: 'PutObjectAcl', method: 'PUT', on: 'object', action: 's3:PutObjectAcl', sub: 'acl', params: ['versionId'], versionAction: 's3:PutObjectVersionAcl' },
  {
    name: 'PutObjectTagging',
    method: 'PUT',
    on: 'object',
    action: 's3:PutObjectTagging',
    sub: 'tagging',
    params: ['versionId'],
    versionAction: 's3:PutObjectVersionTagging',
  },
  { name: 'UploadPartCopy', method: 'PUT', on: 'object', action: 's3:PutObject', sub: 'uploadId', header: 'x-amz-copy-source', params: ['partNumber'] },
  { name: 'UploadPart', method: 'PUT', on: 'object', action: 's3:PutObject', sub: 'uploadId', params: ['partNumber'] },
  // A partNumber without an uploadId is UploadPart's error (InvalidArgument), not an unknown sub-resource.
  { name: 'UploadPart', method: 'PUT', on: 'object', action: 's3:PutObject', sub: 'partNumber' },
  { name: 'CopyObject', method: 'PUT', on: 'object', action: 's3:PutObject', header: 'x-amz-copy-source', locks: true },
  { name: 'PutObject', method: 'PUT', on: 'object', action: 's3:PutObject', locks: true },
  { name: 'CreateMultipartUpload', method: 'POST', on: 'object', action: 's3:PutObject', sub: 'uploads', locks: true },
  { name: 'CompleteMultipartUpload', method: 'POST', on: 'object', action: 's3:PutObject', sub: 'uploadId' },
  { name: 'AbortMultipartUpload', method: 'DELETE', on: 'object', action: 's3:AbortMultipartUpload', sub: 'uploadId' },
  {
    name: 'DeleteObjectTagging',
    method: 'DELETE',
    on: 'object',
    action: 's3:DeleteObjectTagging',
    sub: 'tagging',
    params: ['versionId'],
    versionAction: 's3:DeleteObjectVersionTagging',
  },
  {
    name: 'DeleteObject',
    method: 'DELETE',
    on: 'object',
    action: 's3:DeleteObject',
    params: ['versionId'],
    versionAction: 's3:DeleteObjectVersion',
    bypass: true,
  },
] as const satisfies readonly OperationRow[]

export type OperationName = (typeof OPERATIONS)[number]['name']

const RETENTION = 's3:PutObjectRetention'
const LEGAL_HOLD = 's3:PutObjectLegalHold'
const BYPASS = 's3:BypassGovernanceRetention'

/** Every IAM action a request can need: what a bucket policy's actions are checked against (#26). */
export const ACTIONS: readonly string[] = [
  ...new Set([
    ...(OPERATIONS as readonly OperationRow[]).flatMap((o) => (o.versionAction === undefined ? [o.action] : [o.action, o.versionAction])),
    RETENTION,
    LEGAL_HOLD,
    BYPASS,
  ]),
]

/** Query parameters that never select an operation: signing (SigV4's, and SigV2's presigned three), the SDK's operation hint. */
const NEUTRAL_PARAM = /^(X-Amz-|x-amz-|x-id$|AWSAccessKeyId$|Signature$|Expires$)/

const METHODS = new Set<string>(['GET', 'HEAD', 'PUT', 'POST', 'DELETE'])

/** The rows of each method and scope, in table order (looked up once per request). */
const ROWS = new Map<string, readonly OperationRow[]>()
for (const row of OPERATIONS as readonly OperationRow[]) {
  const k = `${row.method} ${row.on}`
  ROWS.set(k, [...(ROWS.get(k) ?? []), row])
}

export interface Operation {
  readonly name: OperationName
  readonly action: string
  readonly on: Scope
}

/** Each operation's row (UploadPart's two rows say the same). */
const ROW_OF = new Map<string, OperationRow>((OPERATIONS as readonly OperationRow[]).map((r) => [r.name, r]))

const headerOf = (headers: Record<string, string | string[] | undefined>, name: string) => {
  const v = headers[name]
  return Array.isArray(v) ? v.join(',') : v
}

/**
 * The IAM actions a request needs, every one of them granted, as AWS authorizes it (Service
 * Authorization Reference): its operation's action, or the version variant when it names a
 * version (GetObject with `versionId` is s3:GetObjectVersion, DeleteObject with one
 * s3:DeleteObjectVersion); a write asking for a retention (`x-amz-object-lock-mode`) needs
 * s3:PutObjectRetention besides s3:PutObject, and one asking for a legal hold
 * s3:PutObjectLegalHold; `x-amz-bypass-governance-retention: true` needs
 * s3:BypassGovernanceRetention. `query` and `headers` are those of what the action is about (a
 * POST form's fields are its headers; a copy's source query is the source's).
 */
export function requestActions(
  operation: Pick<Operation, 'name' | 'action'>,
  query: ReadonlyMap<string, string>,
  headers: Record<string, string | string[] | undefined>,
): string[] {
  const row = ROW_OF.get(operation.name)
  const actions = [row?.versionAction !== undefined && query.has('versionId') ? row.versionAction : operation.action]
  if (row?.locks) {
    if (headerOf(headers, 'x-amz-object-lock-mode') !== undefined || headerOf(headers, 'x-amz-object-lock-retain-until-date') !== undefined) {
      actions.push(RETENTION)
    }
    if (headerOf(headers, 'x-amz-object-lock-legal-hold') !== undefined) actions.push(LEGAL_HOLD)
  }
  // Only `true` bypasses anything (the handlers read it so): any other value asks for nothing.
  if (row?.bypass && headerOf(headers, 'x-amz-bypass-governance-retention')?.toLowerCase() === 'true') actions.push(BYPASS)
  return actions
}

/**
 * The operation a request is, or the S3 error that says why it is none: 405 for a method the
 * resource has no operation for, 501 for a sub-resource (or a parameter beside one) that Coffer
 * does not implement.
 */
export function operationOf(
  method: string,
  on: Scope,
  query: ReadonlyMap<string, string>,
  headers: Record<string, string | string[] | undefined>,
): Operation | S3Error {
  if (!METHODS.has(method)) return new S3Error('NotImplemented', `${method} is not implemented by Coffer`)
  const rows = ROWS.get(`${method} ${on}`)
  if (rows === undefined) return new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.')
  const row = rows.find((r) => (r.sub === undefined || query.has(r.sub)) && (r.header === undefined || headers[r.header] !== undefined))
  const given = [...query.keys()].filter((k) => !NEUTRAL_PARAM.test(k))
  if (row === undefined) {
    return new S3Error('NotImplemented', `${method} of the ${on} sub-resource "${given[0] ?? ''}" is not implemented by Coffer`)
  }
  const accepted = new Set<string>(row.params ?? [])
  if (row.sub !== undefined) accepted.add(row.sub)
  // A selecting sub-resource of another operation beside this one's (`?acl&uploads`) is refused too.
  const extra = given.filter((k) => !accepted.has(k))
  if (extra.length > 0) {
    return new S3Error('NotImplemented', `${method} of the ${on} sub-resource "${extra[0]}"${row.sub ? ` with "${row.sub}"` : ''} is not implemented by Coffer`)
  }
  return { name: row.name as OperationName, action: row.action, on }
}

/**
 * The operations by family, as the S3 reference shows them (src/docs/s3-api.md, generated by
 * src/docs/reference.ts): `operations` names each operation of OPERATIONS once, in backticks, with
 * what it supports; `about` says where its behaviour is described. Markdown, links relative to
 * src/docs/. test/reference-pages.test.ts checks that every operation is in exactly one family.
 */
export interface S3Family {
  family: string
  operations: string
  about: string
}

export const S3_FAMILIES: readonly S3Family[] = [
  { family: 'Service', operations: '`ListBuckets`', about: "the signer's buckets; an anonymous one answers an empty list" },
  {
    family: 'Buckets',
    operations: '`CreateBucket`, `HeadBucket`, `DeleteBucket` (empty only), `GetBucketLocation`',
    about: 'a bucket is a workspace ([The S3 front](s3-behaviour.md)); [names and regions](s3-behaviour.md#where-awss-behaviour-is-the-contract)',
  },
  {
    family: 'Objects',
    operations:
      '`PutObject`, `GetObject` (one `Range`, `If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`, `response-*` overrides, `partNumber`), `HeadObject`, `GetObjectAttributes`, `CopyObject` (within the tenant; the content is shared, not copied; `x-amz-copy-source-if-*`), `DeleteObject`, `DeleteObjects`',
    about: '[The S3 front](s3-behaviour.md); [conditional writes](s3-behaviour.md#where-awss-behaviour-is-the-contract)',
  },
  {
    family: 'Listings',
    operations:
      '`ListObjectsV2` (prefix, delimiter, max-keys, continuation-token, start-after, fetch-owner, encoding-type=url), `ListObjects` (v1, marker), `ListObjectVersions`',
    about: 'UTF-8 binary key order, keyset-paginated; [versions](s3-behaviour.md#versioning)',
  },
  {
    family: 'Multipart',
    operations:
      '`CreateMultipartUpload`, `UploadPart`, `UploadPartCopy`, `CompleteMultipartUpload`, `AbortMultipartUpload`, `ListParts`, `ListMultipartUploads` (prefix, delimiter, key-marker, upload-id-marker, max-uploads, encoding-type=url)',
    about: '[The S3 front](s3-behaviour.md); [parts and checksums](s3-behaviour.md#parts-and-checksums-of-multipart-objects)',
  },
  { family: 'Browser forms', operations: '`PostObject`', about: '[Browser uploads (POST)](s3-behaviour.md#browser-uploads-post)' },
  { family: 'Versioning', operations: '`GetBucketVersioning`, `PutBucketVersioning`', about: '[Versioning](s3-behaviour.md#versioning)' },
  {
    family: 'Object lock',
    operations:
      '`PutObjectLockConfiguration`, `GetObjectLockConfiguration`, `PutObjectRetention`, `GetObjectRetention`, `PutObjectLegalHold`, `GetObjectLegalHold`',
    about: '[Object lock](s3-behaviour.md#object-lock)',
  },
  {
    family: 'Lifecycle',
    operations: '`PutBucketLifecycleConfiguration`, `GetBucketLifecycleConfiguration`, `DeleteBucketLifecycle`',
    about: '[Lifecycle rules](s3-behaviour.md#lifecycle-rules)',
  },
  {
    family: 'Tagging',
    operations: '`PutObjectTagging`, `GetObjectTagging`, `DeleteObjectTagging`, `PutBucketTagging`, `GetBucketTagging`, `DeleteBucketTagging`',
    about: '[Tagging](s3-behaviour.md#tagging)',
  },
  { family: 'CORS', operations: '`PutBucketCors`, `GetBucketCors`, `DeleteBucketCors`, and preflight `OPTIONS`', about: '[CORS](s3-behaviour.md#cors)' },
  {
    family: 'ACLs',
    operations: '`GetBucketAcl`, `PutBucketAcl`, `GetObjectAcl`, `PutObjectAcl` (canned ACLs and the grants they amount to)',
    about: '[Public objects](s3-behaviour.md#public-objects-acls-and-bucket-policies)',
  },
  {
    family: 'Ownership',
    operations: '`PutBucketOwnershipControls`, `GetBucketOwnershipControls`, `DeleteBucketOwnershipControls`',
    about: '[Public objects](s3-behaviour.md#public-objects-acls-and-bucket-policies)',
  },
  {
    family: 'Logging',
    operations: "`PutBucketLogging`, `GetBucketLogging`, and Ceph RGW's flush `PostBucketLogging` (`POST /bucket?logging`)",
    about: '[Server access logging](s3-behaviour.md#server-access-logging)',
  },
  {
    family: 'Policies',
    operations:
      '`PutBucketPolicy`, `GetBucketPolicy`, `DeleteBucketPolicy`, `GetBucketPolicyStatus`, `PutPublicAccessBlock`, `GetPublicAccessBlock`, `DeletePublicAccessBlock`',
    about: '[Public objects](s3-behaviour.md#public-objects-acls-and-bucket-policies)',
  },
  {
    family: 'Encryption',
    operations: '`PutBucketEncryption`, `GetBucketEncryption`, `DeleteBucketEncryption`; SSE-S3, SSE-C and SSE-KMS on writes and reads',
    about: '[Encryption at rest](encryption.md#encryption-at-rest)',
  },
]
