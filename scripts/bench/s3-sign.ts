/**
 * A minimal synchronous SigV4 signer for the bench: the single large transfers sign as they go,
 * the wrk load runs sign every request ahead (a C generator cannot sign, and a JavaScript one
 * would be the bottleneck). Written from the AWS reference, independent of the server's verifier;
 * only path-style requests; a query string's parameters are signed sorted.
 */
import { createHash, createHmac } from 'node:crypto'
import fs from 'node:fs'

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest()
export const sha256Hex = (data: Buffer | string) => createHash('sha256').update(data).digest('hex')

const rfc3986 = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

/** RFC 3986 encoding of each path segment, as S3 clients send it. */
export const encodePath = (p: string) => p.split('/').map(rfc3986).join('/')

export interface Credentials {
  accessKeyId: string
  secretAccessKey: string
  region: string
}

/** The headers that sign `method host path` with `payloadHash` (hex SHA-256, or UNSIGNED-PAYLOAD). */
export function signHeaders(
  creds: Credentials,
  method: string,
  host: string,
  path: string,
  payloadHash: string,
  extra: Record<string, string> = {},
  amzDate = amzDateOf(new Date()),
  signingKey?: Buffer,
): Record<string, string> {
  const date = amzDate.slice(0, 8)
  const headers: Record<string, string> = { host, 'x-amz-content-sha256': payloadHash, 'x-amz-date': amzDate, ...extra }
  const names = Object.keys(headers)
    .map((h) => h.toLowerCase())
    .sort()
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v.trim()]))
  // A query string (multipart's ?uploads, ?partNumber=N&uploadId=X) is signed sorted and encoded.
  const [uri, query = ''] = path.split('?') as [string, string?]
  const canonicalQuery = query
    .split('&')
    .filter((p) => p.length > 0)
    .map((p) => {
      const [k, v = ''] = p.split('=')
      return `${rfc3986(decodeURIComponent(k!))}=${rfc3986(decodeURIComponent(v))}`
    })
    .sort()
    .join('&')
  const canonical = [method, uri, canonicalQuery, names.map((n) => `${n}:${lower[n]}\n`).join(''), names.join(';'), payloadHash].join('\n')
  const scope = `${date}/${creds.region}/s3/aws4_request`
  const toSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`
  const key = signingKey ?? signingKeyOf(creds, date)
  const signature = createHmac('sha256', key).update(toSign).digest('hex')
  const { host: _host, ...rest } = headers
  return { ...rest, authorization: `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}` }
}

/** SigV4's `x-amz-date` form of a time: 20261123T141500Z. */
export const amzDateOf = (d: Date) =>
  d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '')

/** The day's signing key (four HMACs), reused by every request signed ahead on that day. */
export const signingKeyOf = (creds: Credentials, date: string) =>
  hmac(hmac(hmac(hmac(`AWS4${creds.secretAccessKey}`, date), creds.region), 's3'), 'aws4_request')

/**
 * Signs `count` requests ahead for wrk (scripts/bench/wrk.ts, `preparedS3`), one a line:
 * `path<TAB>x-amz-date<TAB>authorization`, with UNSIGNED-PAYLOAD (what a presigned URL carries),
 * so that wrk can make every PUT body unique itself. Valid for 15 minutes (the server's allowed
 * clock skew), far longer than a load run. Returns the file.
 */
export function prepareSigned(file: string, creds: Credentials, method: string, host: string, paths: Iterable<string>): string {
  const amzDate = amzDateOf(new Date())
  const key = signingKeyOf(creds, amzDate.slice(0, 8))
  const lines: string[] = []
  for (const p of paths) {
    const h = signHeaders(creds, method, host, p, 'UNSIGNED-PAYLOAD', {}, amzDate, key)
    lines.push(`${p}\t${amzDate}\t${h.authorization}`)
  }
  fs.writeFileSync(file, `${lines.join('\n')}\n`)
  return file
}
