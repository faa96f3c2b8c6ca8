/**
 * A minimal synchronous SigV4 signer for the bench's load runs (autocannon's setupRequest is
 * synchronous and signs every request afresh, as a client does). Written from the AWS reference,
 * independent of the server's verifier; only path-style requests without a query string.
 */
import { createHash, createHmac } from 'node:crypto'

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest()
export const sha256Hex = (data: Buffer | string) => createHash('sha256').update(data).digest('hex')

/** RFC 3986 encoding of each path segment, as S3 clients send it. */
export const encodePath = (p: string) =>
  p
    .split('/')
    .map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/')

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
): Record<string, string> {
  const amzDate = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '')
  const date = amzDate.slice(0, 8)
  const headers: Record<string, string> = { host, 'x-amz-content-sha256': payloadHash, 'x-amz-date': amzDate, ...extra }
  const names = Object.keys(headers)
    .map((h) => h.toLowerCase())
    .sort()
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v.trim()]))
  const canonical = [method, path, '', names.map((n) => `${n}:${lower[n]}\n`).join(''), names.join(';'), payloadHash].join('\n')
  const scope = `${date}/${creds.region}/s3/aws4_request`
  const toSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`
  const key = hmac(hmac(hmac(hmac(`AWS4${creds.secretAccessKey}`, date), creds.region), 's3'), 'aws4_request')
  const signature = createHmac('sha256', key).update(toSign).digest('hex')
  const { host: _host, ...rest } = headers
  return { ...rest, authorization: `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}` }
}
