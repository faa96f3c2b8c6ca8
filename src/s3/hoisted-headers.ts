import type { IncomingHttpHeaders } from 'node:http'
import { S3Error } from './errors'
import { HEADERS_NOT_SIGNED } from './sigv4'

/** A presigned SigV4 URL's own parameters: its authentication, never request headers. */
const AUTH_PARAMS = new Set([
  'x-amz-algorithm',
  'x-amz-credential',
  'x-amz-date',
  'x-amz-expires',
  'x-amz-signedheaders',
  'x-amz-signature',
  'x-amz-security-token',
  // The payload line of the canonical request, which the verifier reads from the query already.
  'x-amz-content-sha256',
])

/** What an HTTP header value may hold (RFC 9110 §5.5): no CR, LF or other control character. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

/**
 * The `x-amz-*` query parameters of a presigned request, read as the headers they stand for. The
 * JS SDK's presigner (and botocore's SigV2 one) moves `x-amz-meta-*`, `x-amz-checksum-*`,
 * `x-amz-sdk-checksum-algorithm` and the like from the headers into the query string, where the
 * signature covers them (SigV4's canonical query, SigV2's canonical x-amz headers); AWS obeys them
 * as headers: the metadata is stored, the checksum checked. Read from headers only, a presigned
 * PutObject's metadata was silently dropped (#24; README, S3).
 *
 * A value is turned into the header form Node gives (its UTF-8 bytes as latin1 text, one character
 * per byte), so metadata sent either way is stored alike. A parameter that disagrees with a header
 * of the same name (or with another spelling of itself) is refused, as a header outside the
 * signature is; one no header could carry (a CR or LF) is 400 InvalidArgument.
 */
export function hoistQueryHeaders(headers: IncomingHttpHeaders, query: ReadonlyMap<string, string>): void {
  const hoisted = new Map<string, string>()
  for (const [param, decoded] of query) {
    const name = param.toLowerCase()
    if (!name.startsWith('x-amz-') || AUTH_PARAMS.has(name)) continue
    const value = Buffer.from(decoded, 'utf8').toString('latin1')
    if (!FIELD_VALUE.test(value)) {
      throw new S3Error('InvalidArgument', `The query parameter ${name} is not a valid header value`, { ArgumentName: name })
    }
    const sent = hoisted.get(name) ?? headers[name]
    if (sent !== undefined && (Array.isArray(sent) ? sent.join(',') : sent) !== value) {
      throw new S3Error('AccessDenied', HEADERS_NOT_SIGNED, { HeadersNotSigned: name })
    }
    hoisted.set(name, value)
  }
  for (const [name, value] of hoisted) headers[name] = value
}
