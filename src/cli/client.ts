import http from 'node:http'
import type { Readable } from 'node:stream'
import { OperatorError, UsageError } from './io'

/** Where a client command talks to: a server's base URL and a tenant API key. */
export interface Remote {
  url: string
  key: string
}

/** An error answer of the API: its contract code and message. */
export class ApiError extends Error {
  override name = 'ApiError'
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

/** `--url`/`--key`, else COFFER_URL/COFFER_API_KEY. */
export function remoteFrom(values: { url?: string | undefined; key?: string | undefined }, env: Record<string, string | undefined>): Remote {
  const url = values.url ?? env.COFFER_URL
  const key = values.key ?? env.COFFER_API_KEY
  if (url === undefined || url === '') throw new UsageError('no server: pass --url URL or set COFFER_URL (e.g. http://127.0.0.1:8080)')
  if (key === undefined || key === '') throw new UsageError('no API key: pass --key KEY or set COFFER_API_KEY (a tenant key, sk_live_…)')
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new UsageError(`--url/COFFER_URL ${JSON.stringify(url)} is not a URL (e.g. http://127.0.0.1:8080)`)
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new UsageError(`--url/COFFER_URL must be an http:// or https:// URL, not ${parsed.protocol}`)
  // A base path (behind a reverse proxy) is kept: API paths are appended to it.
  return { url: url.replace(/\/+$/, ''), key }
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
])

function unreachable(remote: Remote, err: unknown): OperatorError {
  const code = (err as NodeJS.ErrnoException).code ?? (err as { cause?: NodeJS.ErrnoException }).cause?.code
  return new OperatorError(`cannot reach ${remote.url} (${code ?? (err as Error).message}): is coffer serve running there? Set --url or COFFER_URL`)
}

export interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  body: http.IncomingMessage
}

/**
 * One request to `remote` (`path` is appended to its base URL), the body streamed from `body`
 * when given. Resolves with the response, whatever its status; a network failure is an OperatorError.
 */
export function request(
  remote: Remote,
  method: string,
  path: string,
  opts: { headers?: Record<string, string | number>; body?: Readable | Buffer } = {},
): Promise<Answer> {
  const target = new URL(remote.url + path)
  // Loaded when used: the server, which bundles this module too, never needs it (#28).
  const lib = target.protocol === 'https:' ? process.getBuiltinModule('node:https') : http
  return new Promise((resolve, reject) => {
    const req = lib.request(target, { method, headers: { authorization: `Bearer ${remote.key}`, ...opts.headers } }, (res) => {
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res })
    })
    req.on('error', (err) => {
      const code = (err as NodeJS.ErrnoException).code
      reject(code !== undefined && NETWORK_CODES.has(code) ? unreachable(remote, err) : err)
    })
    if (opts.body === undefined) req.end()
    else if (Buffer.isBuffer(opts.body)) req.end(opts.body)
    else {
      opts.body.on('error', (err) => req.destroy(err))
      opts.body.pipe(req)
    }
  })
}

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of stream) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

/** The JSON body of a 2xx answer; an error answer becomes an ApiError with the contract's code and message. */
export async function json<T>(answer: Answer): Promise<T> {
  const text = await readAll(answer.body)
  if (answer.status >= 200 && answer.status < 300) return (text === '' ? undefined : JSON.parse(text)) as T
  throw apiError(answer.status, text)
}

/** Consumes an error answer's body into an ApiError. */
export async function failure(answer: Answer): Promise<ApiError> {
  return apiError(answer.status, await readAll(answer.body))
}

function apiError(status: number, text: string): ApiError {
  try {
    const e = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error
    if (e?.code && e.message) return new ApiError(status, e.code, e.message)
  } catch {
    // Not the API's envelope: a proxy's page or another server; reported by status below.
  }
  return new ApiError(status, `HTTP_${status}`, `the server answered ${status} without a Coffer error body: is --url a Coffer server?`)
}

/** A JSON request: `body` is sent as JSON. */
export async function call<T>(remote: Remote, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body))
  const answer = await request(remote, method, path, {
    headers: payload ? { 'content-type': 'application/json', 'content-length': payload.length, ...headers } : headers,
    ...(payload ? { body: payload } : {}),
  })
  return json<T>(answer)
}
