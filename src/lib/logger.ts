import pino, { type DestinationStream, type Logger } from 'pino'
import { isoFormatter } from './clock'

/** Query parameter names (lowercase) whose values are credentials; they never reach a log line. */
const SECRET_PARAMS: ReadonlySet<string> = new Set([
  'token',
  'apikey',
  'api_key',
  'key',
  'secret',
  'x-amz-signature',
  'x-amz-security-token',
  'signature',
  // SSE-C's key as a presigned URL carries it (#27).
  'x-amz-server-side-encryption-customer-key',
  'x-amz-copy-source-server-side-encryption-customer-key',
])

/**
 * The URL with every credential-bearing query value replaced by `[REDACTED]`. Names are compared
 * as the query parser reads them: percent-decoded (`%74oken` is `token`, #12 item 7), `+` as a
 * space, case-insensitively; a name that does not decode is redacted too, to be safe.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?')
  if (q === -1) return url
  const hash = url.indexOf('#', q)
  const end = hash === -1 ? url.length : hash
  const params = url
    .slice(q + 1, end)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=')
      const rawName = eq === -1 ? part : part.slice(0, eq)
      return isSecretName(rawName) ? `${rawName}=[REDACTED]` : part
    })
  return `${url.slice(0, q + 1)}${params.join('&')}${url.slice(end)}`
}

function isSecretName(rawName: string): boolean {
  if (!rawName.includes('%')) return SECRET_PARAMS.has(rawName.replace(/\+/g, ' ').toLowerCase())
  try {
    return SECRET_PARAMS.has(decodeURIComponent(rawName.replace(/\+/g, ' ')).toLowerCase())
  } catch {
    return true
  }
}

/** The log lines' own formatter: its one-second cache is not shared with the views' timestamps. */
const logTime = isoFormatter()

/**
 * pino JSON logs. Fastify's request logging is replaced by one line per response (see app.ts)
 * that never includes headers; `redact` is the second line of defence for anything that carries
 * a key, token or secret by name.
 */
export function createLogger(level: string, destination: DestinationStream | NodeJS.WritableStream = process.stdout): Logger {
  return pino(
    {
      level,
      base: { service: 'coffer' },
      redact: {
        paths: [
          'req.headers.authorization',
          'headers.authorization',
          'authorization',
          'apiKey',
          '*.apiKey',
          'adminApiKey',
          '*.adminApiKey',
          'secret',
          '*.secret',
          'webhookSecret',
          '*.webhookSecret',
          'token',
          '*.token',
          'secretAccessKey',
          '*.secretAccessKey',
          // SSE-C's customer key (#27), should headers ever be logged.
          'req.headers["x-amz-server-side-encryption-customer-key"]',
          'req.headers["x-amz-copy-source-server-side-encryption-customer-key"]',
          'headers["x-amz-server-side-encryption-customer-key"]',
          'headers["x-amz-copy-source-server-side-encryption-customer-key"]',
        ],
        censor: '[REDACTED]',
      },
      // pino.stdTimeFunctions.isoTime's output, without its toISOString (~8k instructions a line, #15).
      timestamp: () => `,"time":"${logTime(Date.now())}"`,
    },
    destination,
  )
}
