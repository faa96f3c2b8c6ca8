import { createHmac, hash, timingSafeEqual } from 'node:crypto'
import { S3Error } from './errors'

/**
 * AWS Signature Version 4 verification for S3 (Amazon S3 API reference, "Authenticating
 * Requests (AWS Signature Version 4)"): the Authorization header and presigned query strings,
 * and the signing context aws-chunked bodies need to verify their chunk signatures.
 */

export const ALGORITHM = 'AWS4-HMAC-SHA256'
export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD'
export const STREAMING_SIGNED = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD'
export const STREAMING_SIGNED_TRAILER = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER'
export const STREAMING_UNSIGNED_TRAILER = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER'
export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'

/** Clock skew tolerated between a signed request and the server (as AWS: 15 minutes). */
export const MAX_SKEW_MS = 15 * 60_000
/** Longest a presigned URL may live (as AWS: 7 days). */
export const MAX_PRESIGN_SECONDS = 7 * 24 * 3600

/** How the body of a verified request is to be checked. */
export type Payload = { kind: 'unsigned' } | { kind: 'sha256'; hex: string } | { kind: 'streaming'; signed: boolean; trailer: boolean }

/** The signing context of a verified request: what aws-chunked needs to verify chunk signatures. */
export interface SigningContext {
  key: SigningKey
  amzDate: string
  scope: string
  seedSignature: string
}

export interface Verified<P> {
  principal: P
  accessKeyId: string
  payload: Payload
  /** Absent for Signature Version 2 (sigv2.ts), which signs no payload. */
  signing?: SigningContext
  presigned: boolean
  /** Which signature the request carried: the log's `payload` field names a SigV2 one. */
  version: 2 | 4
}

/** A SigV4 request's verification: it always has a signing context. */
export type VerifiedV4<P> = Verified<P> & { signing: SigningContext }

/** The parts of an HTTP request SigV4 covers. */
export interface SignedRequest {
  method: string
  /** The request target as received: path and query, still percent-encoded. */
  url: string
  /** Node's `rawHeaders`: name, value, name, value… */
  rawHeaders: string[]
  /**
   * The query as decoded pairs, when the caller parsed it already (routes.ts): the verifier then
   * checks the very pairs the handler reads, rather than a parse of its own.
   */
  query?: readonly [string, string][]
}

export interface VerifyOptions<P> {
  region: string
  now: number
  /** The secret and principal behind an access key id; undefined when unknown or revoked. */
  lookup: (accessKeyId: string) => { secret: string; principal: P } | undefined
}

const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/

/** The last X-Amz-Date parsed: a client signs many requests within the same second. */
let lastAmzDate: { value: string; ms: number } | undefined

function parseAmzDate(value: string): number | undefined {
  if (lastAmzDate?.value === value) return lastAmzDate.ms
  const ms = parseAmzDateUncached(value)
  if (ms !== undefined) lastAmzDate = { value, ms }
  return ms
}

function parseAmzDateUncached(value: string): number | undefined {
  const m = value.match(AMZ_DATE)
  if (!m) return undefined
  const t = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!)
  return Number.isNaN(t) ? undefined : t
}

/** An instant as S3 names one in its errors: ISO 8601 to the second. */
export const isoSeconds = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')

function toAmzDate(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '')
}

/** RFC 3986 encoding as SigV4 wants it: everything but A–Z a–z 0–9 - . _ ~ (and `/` when asked). */
export function awsEncode(text: string, keepSlash: boolean): string {
  const out = encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
  return keepSlash ? out.replace(/%2F/g, '/') : out
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    throw new S3Error('InvalidArgument', 'The request URL is not correctly percent-encoded')
  }
}

/** Splits a raw query string into decoded pairs, in order. */
export function parseQuery(raw: string): [string, string][] {
  if (raw === '') return []
  return raw
    .split('&')
    .filter((p) => p !== '')
    .map((pair) => {
      const eq = pair.indexOf('=')
      return eq < 0 ? [decode(pair), ''] : [decode(pair.slice(0, eq)), decode(pair.slice(eq + 1))]
    })
}

/**
 * The first query parameter a request names twice, or undefined. An `x-amz-*` parameter stands for
 * a header (hoisted-headers.ts), so its name is compared without case, as a header's is.
 *
 * A parameter given twice is refused wherever it is found: one value would be signed (SigV2 signs a
 * sub-resource's first value, and AWS's SigV4 canonical query keeps one value of a name) and the
 * other could be obeyed, so that appending `&versionId=…`, `&uploadId=…`, `&x-amz-acl=…` or
 * `&response-content-type=…` to a signed URL read another version, wrote into another upload, made
 * a private object public or changed the type it is served with.
 */
export function repeatedParam(pairs: readonly (readonly [string, string])[]): string | undefined {
  if (pairs.length < 2) return undefined
  const seen = new Set<string>()
  for (const [raw] of pairs) {
    const name = raw.length > 6 && /^x-amz-/i.test(raw) ? raw.toLowerCase() : raw
    if (seen.has(name)) return raw
    seen.add(name)
  }
  return undefined
}

/**
 * The 403 a signed request naming a query parameter twice gets. It is AWS's answer to a signer that
 * signed both values: S3's canonical query keeps one value of a name, so the signature it computes
 * is not the client's. A parameter appended to a signed URL fails the same way here (where AWS would
 * obey the value it signed): no request is served with two values to choose from.
 */
export const signatureMismatch = () =>
  new S3Error('SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.')

/** Headers a request is obeyed for, whose repetition would be read as one comma-joined value. */
const OBEYED_ONCE = new Set(['content-type', 'content-md5', 'host', 'authorization'])

/**
 * 400 InvalidArgument for a header the request is obeyed for that it sends more than once: every
 * `x-amz-*` header, Content-Type, Content-MD5, Host and Authorization. Two lines of a header are
 * signed as their values joined by a comma (SigV2 and SigV4 alike), while Node hands a handler that
 * joined value (`x-amz-acl: private, public-read`) or, for Content-Type, Host and Authorization, the
 * first line alone: neither is what a signer meant by either line, so none is obeyed.
 */
export function refuseRepeatedHeaders(rawHeaders: readonly string[]): void {
  let seen: Set<string> | undefined
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase()
    if (!name.startsWith('x-amz-') && !OBEYED_ONCE.has(name)) continue
    seen ??= new Set()
    if (seen.has(name)) throw new S3Error('InvalidArgument', `The header ${name} may be given only once`, { ArgumentName: name })
    seen.add(name)
  }
}

function canonicalQuery(pairs: readonly (readonly [string, string])[]): string {
  return pairs
    .map(([k, v]) => [awsEncode(k, false), awsEncode(v, false)] as const)
    .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&')
}

/** A path of unreserved characters only: decoding and re-encoding each segment gives it back as is. */
const PLAIN_PATH = /^[A-Za-z0-9\-._~/]*$/

/** S3 does not normalise paths: each segment is decoded and re-encoded, `//` and `.` kept. */
function canonicalUri(rawPath: string): string {
  if (PLAIN_PATH.test(rawPath)) return rawPath
  return rawPath
    .split('/')
    .map((seg) => awsEncode(decode(seg), false))
    .join('/')
}

/**
 * Lower-case header name → values, each trimmed, joined by `,`. Inner runs of whitespace are
 * collapsed (`collapse`) only where SigV4 reads a value: the signed headers and Authorization.
 * Collapsing every header of every request cost more than the rest of this map (#14).
 */
export function headerMap(rawHeaders: string[]): Map<string, string> {
  const map = new Map<string, string>()
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase()
    const value = rawHeaders[i + 1]!.trim()
    const prev = map.get(name)
    map.set(name, prev === undefined ? value : `${prev},${value}`)
  }
  return map
}

/** A header value as SigV4 canonicalises it: each run of whitespace one space. */
const collapse = (value: string) => value.replace(/\s+/g, ' ')

/** The canonical request (S3 reference, "Create a canonical request"); `pairs` is the decoded query. */
export function canonicalRequest(
  method: string,
  rawPath: string,
  pairs: readonly (readonly [string, string])[],
  headers: Map<string, string>,
  signedHeaders: string[],
  payloadHash: string,
): string {
  let canonicalHeaders = ''
  for (const h of signedHeaders) canonicalHeaders += `${h}:${collapse(headers.get(h) ?? '')}\n`
  return `${method}\n${canonicalUri(rawPath)}\n${pairs.length === 0 ? '' : canonicalQuery(pairs)}\n${canonicalHeaders}\n${signedHeaders.join(';')}\n${payloadHash}`
}

/** One-shot: a quarter of the time of createHash().update().digest() for a canonical request (#14). */
const sha256Hex = (data: string) => hash('sha256', data, 'hex')

/** A character outside US-ASCII: only a header value can bring one into a canonical request. */
const NON_ASCII = /[\u0080-\uffff]/

/**
 * The SHA-256 of a canonical request over the bytes the client sent. A client signs the bytes it
 * puts on the wire: botocore sends a header value's str as UTF-8 and hashes the same UTF-8
 * (`x-amz-meta-meta1: Hello World\xe9` is C3 A9 on the wire and in its hash). Node hands header
 * values over as latin1 text, one character per byte, so 'Ã©' here: hashed as UTF-8 (`hash` of a
 * string) they were four bytes and the signature never matched (ceph/s3-tests
 * test_object_set_get_unicode_metadata, #24). Everything else in the canonical request is ASCII
 * (the path and query are percent-encoded), so the latin1 bytes of the whole string are exactly
 * the bytes received. A header changed on the way still changes the hash.
 */
export const canonicalRequestHash = (canonical: string) =>
  NON_ASCII.test(canonical) ? hash('sha256', Buffer.from(canonical, 'latin1'), 'hex') : sha256Hex(canonical)
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest()

const BLOCK = 64
const HEX_SIGNATURE = /^[0-9a-f]{64}$/
/** Scratch for signature comparisons (synchronous: never shared by two at once). */
const expectedBytes = Buffer.alloc(32)
const presentedBytes = Buffer.alloc(32)

/**
 * A SigV4 signing key, with HMAC-SHA256 (RFC 2104) computed from its two pad blocks:
 * SHA-256((K ^ opad) || SHA-256((K ^ ipad) || message)), each a one-shot `hash`. Node's Hmac
 * imports its key into a new context for every signature: 3.5 against 1.3 µs here, and a fifth
 * of a 4 KiB GetObject's SigV4 verification (#14). Checked against createHmac in the tests.
 */
export class SigningKey {
  /** K ^ ipad, then room for the message. */
  private inner: Buffer
  /** K ^ opad, then the inner digest. */
  private readonly outer = Buffer.alloc(BLOCK + 32)

  constructor(key: Buffer) {
    // Keys longer than a block are hashed first (RFC 2104); SigV4's are 32 bytes.
    const k = key.length > BLOCK ? Buffer.from(hash('sha256', key, 'binary'), 'latin1') : key
    this.inner = Buffer.alloc(BLOCK + 256)
    for (let i = 0; i < BLOCK; i++) {
      this.inner[i] = (k[i] ?? 0) ^ 0x36
      this.outer[i] = (k[i] ?? 0) ^ 0x5c
    }
  }

  /** Whether `presentedHex` is the HMAC of `message` under this key, compared in constant time. */
  matches(message: string, presentedHex: string): boolean {
    if (!HEX_SIGNATURE.test(presentedHex)) return false
    expectedBytes.write(hash('sha256', this.outerBlock(message), 'binary'), 'latin1')
    presentedBytes.write(presentedHex, 'hex')
    return timingSafeEqual(expectedBytes, presentedBytes)
  }

  /** K ^ opad followed by the inner digest of `message`: what the outer hash covers. */
  private outerBlock(message: string): Buffer {
    const length = Buffer.byteLength(message)
    if (BLOCK + length > this.inner.length) {
      const bigger = Buffer.alloc(BLOCK + length)
      this.inner.copy(bigger, 0, 0, BLOCK)
      this.inner = bigger
    }
    this.inner.write(message, BLOCK, 'utf8')
    // The inner digest as latin1 ('binary') text is its 32 bytes exactly: written back, no Buffer is made.
    this.outer.write(hash('sha256', this.inner.subarray(0, BLOCK + length), 'binary'), BLOCK, 'latin1')
    return this.outer
  }
}

const keyCache = new Map<string, SigningKey>()
/** The key of the last signature: a client signs its requests of the day with the same one. */
let lastKey: { secret: string; date: string; region: string; key: SigningKey } | undefined

/** The SigV4 signing key for a secret, date (YYYYMMDD) and region; cached (it changes once a day). */
export function signingKey(secret: string, date: string, region: string): SigningKey {
  if (lastKey !== undefined && lastKey.secret === secret && lastKey.date === date && lastKey.region === region) return lastKey.key
  const id = `${date}\n${region}\n${secret}`
  let key = keyCache.get(id)
  if (!key) {
    key = new SigningKey(hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), 's3'), 'aws4_request'))
    if (keyCache.size > 10_000) keyCache.clear()
    keyCache.set(id, key)
  }
  lastKey = { secret, date, region, key }
  return key
}

interface Parsed {
  accessKeyId: string
  date: string
  region: string
  service: string
  terminator: string
  signedHeaders: string[]
  signature: string
  amzDate: string
}

const CREDENTIAL = /^([^/]{1,128})\/(\d{8})\/([^/]{1,64})\/([^/]{1,64})\/([^/]{1,64})$/

function parseCredential(value: string, malformed: (why: string) => S3Error): Omit<Parsed, 'signedHeaders' | 'signature' | 'amzDate'> {
  const m = value.match(CREDENTIAL)
  if (!m) throw malformed(`the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`)
  return { accessKeyId: m[1]!, date: m[2]!, region: m[3]!, service: m[4]!, terminator: m[5]! }
}

function parseHeaderAuth(authorization: string, headers: Map<string, string>): Parsed {
  const malformed = (why: string) => new S3Error('AuthorizationHeaderMalformed', `The authorization header is malformed; ${why}`)
  if (!authorization.startsWith(`${ALGORITHM} `)) {
    if (/^AWS /.test(authorization))
      throw new S3Error('InvalidRequest', 'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.')
    throw malformed('the authorization mechanism is not AWS4-HMAC-SHA256.')
  }
  // `Name=value` fields separated by commas, in any order; a repeated name keeps its last value.
  let credential: string | undefined
  let signedHeaders: string | undefined
  let signature: string | undefined
  let at = ALGORITHM.length + 1
  while (at <= authorization.length) {
    let comma = authorization.indexOf(',', at)
    if (comma < 0) comma = authorization.length
    const eq = authorization.indexOf('=', at)
    if (eq > at && eq < comma) {
      const name = authorization.slice(at, eq).trim()
      const value = authorization.slice(eq + 1, comma).trim()
      if (name === 'Credential') credential = value
      else if (name === 'SignedHeaders') signedHeaders = value
      else if (name === 'Signature') signature = value
    }
    at = comma + 1
  }
  if (credential === undefined || signedHeaders === undefined || signature === undefined) {
    throw malformed('it must contain Credential, SignedHeaders and Signature.')
  }
  const amzDate = headers.get('x-amz-date') ?? dateHeaderAsAmz(headers.get('date'))
  if (amzDate === undefined) throw new S3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header')
  const scope = parseCredential(credential, malformed)
  return {
    accessKeyId: scope.accessKeyId,
    date: scope.date,
    region: scope.region,
    service: scope.service,
    terminator: scope.terminator,
    signedHeaders: signedHeaders.split(';'),
    signature,
    amzDate,
  }
}

function dateHeaderAsAmz(value: string | undefined): string | undefined {
  if (value === undefined) return undefined
  const t = Date.parse(value)
  return Number.isNaN(t) ? undefined : toAmzDate(t)
}

function parseQueryAuth(query: ReadonlyMap<string, string>): Parsed & { expires: number } {
  const bad = (why: string) => new S3Error('AuthorizationQueryParametersError', why)
  if (query.get('X-Amz-Algorithm') !== ALGORITHM) throw bad('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
  const credential = query.get('X-Amz-Credential')
  const amzDate = query.get('X-Amz-Date')
  const expires = query.get('X-Amz-Expires')
  const signedHeaders = query.get('X-Amz-SignedHeaders')
  const signature = query.get('X-Amz-Signature')
  if (!credential || !amzDate || !expires || !signedHeaders || !signature) {
    throw bad(
      'Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.',
    )
  }
  // A signed integer, as AWS reads it: 0 and negative values are numbers (expired, below), `1e3` is not.
  if (!/^[+-]?\d{1,19}$/.test(expires)) throw bad('X-Amz-Expires should be a number')
  // A URL valid for more than 7 days is refused 403, as AWS answers it (the other malformed parameters are 400).
  if (Number(expires) > MAX_PRESIGN_SECONDS) {
    const message = 'X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be less than 604800 seconds'
    throw new S3Error('AuthorizationQueryParametersError', message, {}, 403)
  }
  return { ...parseCredential(credential, bad), signedHeaders: signedHeaders.split(';'), signature, amzDate, expires: Number(expires) }
}

const PAYLOAD_MODES: Record<string, Payload> = {
  [UNSIGNED_PAYLOAD]: { kind: 'unsigned' },
  [STREAMING_SIGNED]: { kind: 'streaming', signed: true, trailer: false },
  [STREAMING_SIGNED_TRAILER]: { kind: 'streaming', signed: true, trailer: true },
  [STREAMING_UNSIGNED_TRAILER]: { kind: 'streaming', signed: false, trailer: true },
}

function payloadOf(value: string): Payload {
  const mode = PAYLOAD_MODES[value]
  if (mode) return mode
  if (/^[0-9a-f]{64}$/.test(value)) return { kind: 'sha256', hex: value }
  throw new S3Error('InvalidArgument', 'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-*-PAYLOAD(-TRAILER), or a valid sha256 value.')
}

/**
 * The payload of an anonymous request (#26: a public-read-write bucket's writes): what its
 * `x-amz-content-sha256` says, so that an unsigned aws-chunked body (an SDK's default
 * STREAMING-UNSIGNED-PAYLOAD-TRAILER) is decoded and a given SHA-256 is checked; a signed
 * streaming mode cannot be without a signature.
 */
export function anonymousPayload(value: string | undefined): Payload {
  if (value === undefined) return { kind: 'unsigned' }
  const payload = payloadOf(value)
  if (payload.kind === 'streaming' && payload.signed) {
    throw new S3Error('InvalidRequest', 'A signed streaming payload needs a signed request (this one has no Authorization)')
  }
  return payload
}

const NO_QUERY: ReadonlyMap<string, string> = new Map()

/**
 * Whether a header present in a request must be covered by its SigV4 signature. S3 obeys every
 * `x-amz-*` header (x-amz-copy-source turns a PUT into a copy, x-amz-meta-* is stored), so one the
 * signature does not cover would let whoever holds a presigned URL, or sits on the path, change
 * what the signer asked for (#24). AWS refuses, in the header and the presigned form alike, every
 * `x-amz-*` header and `Content-MD5` left out of SignedHeaders, but `x-amz-content-sha256`, which
 * is the canonical request's payload line either way. Content-Type, Content-Disposition,
 * Cache-Control, Range, the conditionals and the like pass unsigned, as on AWS: a presigned URL's
 * holder may set them unless the URL signed them (README, S3).
 */
export function mustBeSigned(name: string): boolean {
  return (name.startsWith('x-amz-') && name !== 'x-amz-content-sha256') || name === 'content-md5'
}

export const HEADERS_NOT_SIGNED = 'There were headers present in the request which were not signed'

/** 403 AccessDenied naming every header that had to be signed and was not, as AWS's `HeadersNotSigned`. */
export function refuseUnsignedHeaders(headers: ReadonlyMap<string, string>, signedHeaders: readonly string[]): void {
  let missing: string[] | undefined
  for (const name of headers.keys()) {
    if (mustBeSigned(name) && !signedHeaders.includes(name)) (missing ??= []).push(name)
  }
  if (missing) throw new S3Error('AccessDenied', HEADERS_NOT_SIGNED, { HeadersNotSigned: missing.sort().join(', ') })
}

/**
 * Verifies a request's SigV4 signature (header or presigned query). Throws the S3 error a client
 * expects for every defect; anonymous requests are `AccessDenied`.
 */
export function verifySigV4<P>(req: SignedRequest, opts: VerifyOptions<P>): VerifiedV4<P> {
  const headers = headerMap(req.rawHeaders)
  const q = req.url.indexOf('?')
  const pairs = req.query ?? (q < 0 ? [] : parseQuery(req.url.slice(q + 1)))
  const query = pairs.length === 0 ? NO_QUERY : new Map(pairs)
  const given = headers.get('authorization')
  const authorization = given === undefined ? undefined : collapse(given)
  const presigned = authorization === undefined && query.has('X-Amz-Algorithm')
  if (authorization === undefined && !presigned) {
    if (query.has('AWSAccessKeyId') || query.has('Signature')) {
      throw new S3Error('InvalidRequest', 'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.')
    }
    throw new S3Error('AccessDenied', 'Anonymous access is not allowed: sign the request with an S3 credential')
  }
  const parsed = presigned ? parseQueryAuth(query) : parseHeaderAuth(authorization!, headers)
  const signedTime = parseAmzDate(parsed.amzDate)
  const malformedCode = presigned ? 'AuthorizationQueryParametersError' : 'AuthorizationHeaderMalformed'
  if (signedTime === undefined) throw new S3Error(malformedCode, `X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`)
  if (parsed.date !== parsed.amzDate.slice(0, 8))
    throw new S3Error(malformedCode, `Invalid credential date "${parsed.date}". This date is not the same as X-Amz-Date: "${parsed.amzDate.slice(0, 8)}".`)
  if (parsed.region !== opts.region) {
    throw new S3Error(malformedCode, `The authorization header is malformed; the region '${parsed.region}' is wrong; expecting '${opts.region}'`, {
      Region: opts.region,
    })
  }
  if (parsed.service !== 's3' || parsed.terminator !== 'aws4_request')
    throw new S3Error(malformedCode, 'The credential scope must be for service "s3" and end in "aws4_request"')
  if (!parsed.signedHeaders.includes('host') || parsed.signedHeaders.some((h) => h !== h.toLowerCase() || h === '')) {
    throw new S3Error(malformedCode, 'SignedHeaders must be lower case, separated by ";", and include host')
  }
  if (presigned) {
    const expires = (parsed as Parsed & { expires: number }).expires
    // A URL made already expired (boto3's negative ExpiresIn: X-Amz-Expires=-1000) is refused as
    // expired whatever its date, 403 as Ceph RGW and ceph/s3-tests have it (#24; README, S3).
    if (expires < 0 || opts.now > signedTime + expires * 1000) {
      const expiresAt = signedTime + expires * 1000
      throw new S3Error('AccessDenied', 'Request has expired', {
        'X-Amz-Expires': String(expires),
        // Date's range is ±8.64e15 ms: a far-negative X-Amz-Expires names no instant.
        ...(Math.abs(expiresAt) <= 8.64e15 ? { Expires: isoSeconds(expiresAt) } : {}),
        ServerTime: isoSeconds(opts.now),
      })
    }
    if (signedTime - opts.now > MAX_SKEW_MS) throw new S3Error('AccessDenied', 'Request is not valid yet')
  } else if (Math.abs(opts.now - signedTime) > MAX_SKEW_MS) {
    throw new S3Error('RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.', {
      RequestTime: parsed.amzDate,
      ServerTime: new Date(opts.now).toISOString(),
      MaxAllowedSkewMilliseconds: String(MAX_SKEW_MS),
    })
  }
  refuseUnsignedHeaders(headers, parsed.signedHeaders)
  const found = opts.lookup(parsed.accessKeyId)
  if (!found) throw new S3Error('InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.')

  const contentSha = headers.get('x-amz-content-sha256')
  let payloadHash: string
  // The SDK's presigner hoists x-amz-content-sha256 into the query; without it S3 assumes UNSIGNED-PAYLOAD.
  if (presigned) payloadHash = query.get('X-Amz-Content-Sha256') ?? query.get('x-amz-content-sha256') ?? contentSha ?? UNSIGNED_PAYLOAD
  else {
    if (contentSha === undefined) throw new S3Error('InvalidRequest', 'Missing required header for this request: x-amz-content-sha256')
    payloadHash = contentSha
  }
  const payload = payloadOf(payloadHash)
  if (repeatedParam(pairs) !== undefined) throw signatureMismatch()
  const canonical = canonicalRequest(
    req.method,
    q < 0 ? req.url : req.url.slice(0, q),
    presigned ? pairs.filter(([k]) => k !== 'X-Amz-Signature') : pairs,
    headers,
    parsed.signedHeaders,
    payloadHash,
  )
  const scope = `${parsed.date}/${parsed.region}/s3/aws4_request`
  const stringToSign = `${ALGORITHM}\n${parsed.amzDate}\n${scope}\n${canonicalRequestHash(canonical)}`
  const key = signingKey(found.secret, parsed.date, parsed.region)
  if (!key.matches(stringToSign, parsed.signature)) throw signatureMismatch()
  return {
    principal: found.principal,
    accessKeyId: parsed.accessKeyId,
    payload,
    // The presented signature is the expected one, digit for digit (lower-case hex, compared above).
    signing: { key, amzDate: parsed.amzDate, scope, seedSignature: parsed.signature },
    presigned,
    version: 4,
  }
}

/** String to sign of one aws-chunked chunk (S3 reference, "Signature calculation: transfer payload in multiple chunks"). */
export function chunkStringToSign(ctx: SigningContext, previousSignature: string, chunkSha256Hex: string): string {
  return `${ALGORITHM}-PAYLOAD\n${ctx.amzDate}\n${ctx.scope}\n${previousSignature}\n${EMPTY_SHA256}\n${chunkSha256Hex}`
}

/** String to sign of the trailer of a STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER body. */
export function trailerStringToSign(ctx: SigningContext, previousSignature: string, trailerSha256Hex: string): string {
  return `${ALGORITHM}-TRAILER\n${ctx.amzDate}\n${ctx.scope}\n${previousSignature}\n${trailerSha256Hex}`
}
