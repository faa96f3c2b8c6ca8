import { createHmac, timingSafeEqual } from 'node:crypto'
import { S3Error } from './errors'
import {
  HEADERS_NOT_SIGNED,
  MAX_SKEW_MS,
  headerMap,
  isoSeconds,
  parseQuery,
  repeatedParam,
  signatureMismatch,
  type SignedRequest,
  type Verified,
  type VerifyOptions,
} from './sigv4'

/**
 * AWS Signature Version 2 verification for S3 (Amazon S3 developer guide, "Signing and
 * authenticating REST requests"): `Authorization: AWS <AccessKeyId>:<Signature>` and the presigned
 * query `?AWSAccessKeyId=…&Expires=…&Signature=…` that AWS CLI v1's `s3 presign` and s3cmd with
 * `signature_v2 = True` make (#24). The signature is base64 HMAC-SHA1 over the method,
 * Content-MD5, Content-Type, the date, every `x-amz-*` header and the resource. It signs no
 * payload: the body is checked only against a Content-MD5 (which the string to sign covers) or a
 * checksum header (an `x-amz-*` header, covered too).
 */

/**
 * The query parameters the resource names (the sub-resources and response overrides S3 signs):
 * the developer guide's list, with the configurations added since (AWS names these, and no
 * listing parameter). Matched with their case.
 */
const SUBRESOURCES: ReadonlySet<string> = new Set([
  'accelerate',
  'acl',
  'analytics',
  'attributes',
  'cors',
  'delete',
  'encryption',
  'intelligent-tiering',
  'inventory',
  'legal-hold',
  'lifecycle',
  'location',
  'logging',
  'metrics',
  'notification',
  'object-lock',
  'ownershipControls',
  'partNumber',
  'policy',
  'policyStatus',
  'publicAccessBlock',
  'replication',
  'requestPayment',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
  'response-content-language',
  'response-content-type',
  'response-expires',
  'restore',
  'retention',
  'select',
  'select-type',
  'tagging',
  'torrent',
  'uploadId',
  'uploads',
  'versionId',
  'versioning',
  'versions',
  'website',
])

/** The sub-resources named with their (decoded) value; the others are named alone, whatever value they carry. */
const VALUED: ReadonlySet<string> = new Set([
  'partNumber',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
  'response-content-language',
  'response-content-type',
  'response-expires',
  'select-type',
  'uploadId',
  'versionId',
])

export interface SigV2Request extends SignedRequest {
  /** The bucket named by a virtual-hosted-style Host (`<bucket>.<COFFER_S3_DOMAIN>`): the resource starts with it. */
  hostBucket?: string | undefined
}

const ISO_BASIC = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/

/** A `Date` or `x-amz-date` value: RFC 1123 (and the other HTTP forms Date.parse reads) or ISO 8601 basic. */
function parseDate(value: string): number | undefined {
  const m = value.match(ISO_BASIC)
  const t = m ? Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!) : Date.parse(value)
  return Number.isNaN(t) ? undefined : t
}

/**
 * The `x-amz-*` lines of the string to sign: lower-case names, sorted, `name:value`, repeated
 * headers joined by commas, values trimmed, inner spaces kept (as botocore signs them; Node refuses
 * folded header lines before they get here). `x-amz-*` query parameters are signed
 * among them, as S3 does (botocore's SigV2 presigner moves such headers into the query). A query
 * parameter and a header of the same name must then agree: S3 would sign the query's value and
 * obey the header's, which is a header outside the signature (#24).
 */
function canonicalAmzHeaders(headers: ReadonlyMap<string, string>, pairs: [string, string][]): string {
  const amz = new Map<string, string>()
  for (const [name, value] of headers) if (name.startsWith('x-amz-')) amz.set(name, value)
  const fromQuery = new Set<string>()
  for (const [rawName, value] of pairs) {
    const name = rawName.toLowerCase()
    if (!name.startsWith('x-amz-') || fromQuery.has(name)) continue
    fromQuery.add(name)
    const sent = amz.get(name)
    if (sent !== undefined && sent !== value) throw new S3Error('AccessDenied', HEADERS_NOT_SIGNED, { HeadersNotSigned: name })
    amz.set(name, value)
  }
  let out = ''
  for (const name of [...amz.keys()].sort()) out += `${name}:${amz.get(name)}\n`
  return out
}

/** The resource: `/<bucket>` of a virtual-hosted request, the path as sent, then the signed sub-resources sorted by name. */
function canonicalResource(rawPath: string, pairs: [string, string][], hostBucket: string | undefined): string {
  const named = new Map<string, string>()
  for (const [name, value] of pairs) if (SUBRESOURCES.has(name) && !named.has(name)) named.set(name, value)
  const sub = [...named.keys()]
    .sort()
    .map((name) => (VALUED.has(name) ? `${name}=${named.get(name)}` : name))
    .join('&')
  return `${hostBucket !== undefined ? `/${hostBucket}` : ''}${rawPath}${sub === '' ? '' : `?${sub}`}`
}

/**
 * The SigV2 string to sign; `dateLine` is the Date header, empty beside an x-amz-date, or a
 * presigned URL's Expires; `query` the decoded query pairs (the request's, parsed once).
 */
export function stringToSignV2(
  method: string,
  headers: ReadonlyMap<string, string>,
  dateLine: string,
  rawPath: string,
  query: readonly (readonly [string, string])[],
  hostBucket?: string,
): string {
  // Decoded query values in the form Node gives header values, their UTF-8 bytes as latin1 text:
  // the whole string to sign is then the bytes the client sent (see matches()).
  const pairs = query.map(([k, v]): [string, string] => [k, asBytes(v)])
  return `${method}\n${headers.get('content-md5') ?? ''}\n${headers.get('content-type') ?? ''}\n${dateLine}\n${canonicalAmzHeaders(headers, pairs)}${canonicalResource(rawPath, pairs, hostBucket)}`
}

const BASE64_SHA1 = /^[A-Za-z0-9+/]{27}=$/

const NON_ASCII = /[\u0080-\uffff]/

/** A decoded (Unicode) value as its UTF-8 bytes in latin1 text, one character per byte. */
const asBytes = (value: string) => (NON_ASCII.test(value) ? Buffer.from(value, 'utf8').toString('latin1') : value)

/**
 * Whether `presented` is base64 HMAC-SHA1 of `stringToSign` under `secret`, compared in constant
 * time. The string holds bytes as latin1 text (Node's header values, asBytes for the query's), so
 * its latin1 encoding is what the client signed: botocore's UTF-8 of a non-ASCII metadata value, as
 * sigv4.ts's canonicalRequestHash (#24).
 */
function matches(secret: string, stringToSign: string, presented: string): boolean {
  if (!BASE64_SHA1.test(presented)) return false
  const expected = createHmac('sha1', secret).update(stringToSign, 'latin1').digest()
  return timingSafeEqual(expected, Buffer.from(presented, 'base64'))
}

/**
 * Verifies a SigV2 request (header or presigned query). Throws the S3 error a client expects for
 * every defect, in AWS's order: the credential's shape, the date (its skew, or a presigned URL's
 * expiry), the access key, the signature.
 */
export function verifySigV2<P>(req: SigV2Request, opts: Omit<VerifyOptions<P>, 'region'>): Verified<P> {
  const headers = headerMap(req.rawHeaders)
  const q = req.url.indexOf('?')
  const pairs = req.query ?? (q < 0 ? [] : parseQuery(req.url.slice(q + 1)))
  const rawPath = q < 0 ? req.url : req.url.slice(0, q)
  const query = new Map(pairs)
  const authorization = headers.get('authorization')
  let accessKeyId: string
  let signature: string
  let dateLine: string
  if (authorization !== undefined) {
    const m = /^AWS ([^:\s]+):(\S+)$/.exec(authorization)
    if (!m) throw new S3Error('InvalidArgument', 'AWS authorization header is invalid.  Expected AwsAccessKeyId:signature')
    accessKeyId = m[1]!
    signature = m[2]!
    // x-amz-date, when sent, is the date (and is signed among the x-amz-* headers); the Date line is then empty.
    const amzDate = headers.get('x-amz-date')
    const date = amzDate ?? headers.get('date')
    const time = date === undefined ? undefined : parseDate(date)
    // A date before the epoch is no valid date (AWS and RGW: AccessDenied, not RequestTimeTooSkewed).
    if (time === undefined || time < 0) throw new S3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header')
    if (Math.abs(opts.now - time) > MAX_SKEW_MS) {
      throw new S3Error('RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.', {
        RequestTime: date!,
        ServerTime: isoSeconds(opts.now),
        MaxAllowedSkewMilliseconds: String(MAX_SKEW_MS),
      })
    }
    dateLine = amzDate !== undefined ? '' : date!
  } else {
    const id = query.get('AWSAccessKeyId')
    const expires = query.get('Expires')
    const sig = query.get('Signature')
    if (id === undefined || expires === undefined || sig === undefined) {
      throw new S3Error('AccessDenied', 'Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters')
    }
    // Expires is an absolute time in epoch seconds; as on AWS, no clock skew and no longest life
    // (revoking the credential ends such a URL).
    if (!/^\d{1,12}$/.test(expires)) throw new S3Error('AccessDenied', `Invalid date (should be seconds since epoch): ${expires}`)
    if (opts.now > Number(expires) * 1000) {
      throw new S3Error('AccessDenied', 'Request has expired', { Expires: isoSeconds(Number(expires) * 1000), ServerTime: isoSeconds(opts.now) })
    }
    accessKeyId = id
    signature = sig
    dateLine = expires
  }
  const found = opts.lookup(accessKeyId)
  if (!found) throw new S3Error('InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.')
  // A parameter named twice: the resource signs a sub-resource's first value and x-amz-* query
  // parameters once, while either value could be obeyed (sigv4.ts, repeatedParam).
  if (repeatedParam(pairs) !== undefined) throw signatureMismatch()
  const stringToSign = stringToSignV2(req.method, headers, dateLine, rawPath, pairs, req.hostBucket)
  if (!matches(found.secret, stringToSign, signature)) {
    // A path-style bucket request (`/bucket?…`) is signed by botocore and s3cmd over the resource
    // `/bucket/`, which S3 takes as the same resource.
    const bucketOnly = req.hostBucket === undefined && /^\/[^/]+$/.test(rawPath)
    if (!bucketOnly || !matches(found.secret, stringToSignV2(req.method, headers, dateLine, `${rawPath}/`, pairs), signature)) throw signatureMismatch()
  }
  return { principal: found.principal, accessKeyId, payload: { kind: 'unsigned' }, presigned: authorization === undefined, version: 2 }
}
