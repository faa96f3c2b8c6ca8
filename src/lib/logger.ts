import pino, { type DestinationStream, type Logger } from 'pino'
import { isoFormatter } from './clock'
import { escapeUnsafe, terminalJson } from './text'

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

/** How log lines are written: pino's JSON, or one readable line each (a person at a terminal). */
export type LogFormat = 'json' | 'pretty'

/**
 * The format of COFFER_LOG_FORMAT (`auto`, `json` or `pretty`) for logs written to `stream`: `auto`
 * is readable lines on a terminal, and JSON when the output is a pipe, a file or the journal (a
 * collector reads those).
 */
export function logFormatFor(setting: 'auto' | LogFormat, stream: NodeJS.WritableStream): LogFormat {
  if (setting !== 'auto') return setting
  return (stream as { isTTY?: boolean }).isTTY === true ? 'pretty' : 'json'
}

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' }

/** Fields every line has, or that a person reading one line after another does not need. */
const QUIET_FIELDS = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname'])

/** One field's value as `name=value`: bare when it is a plain word or number, else quoted as JSON (control characters escaped). */
function prettyValue(value: unknown): string {
  if (typeof value === 'string') return /^[\w./:@+,-]+$/.test(value) ? value : terminalJson(value)
  return terminalJson(value)
}

/**
 * One pino JSON line as a person reads it: `12:00:01.123 INFO  coffer listening on … port=8080`,
 * then an error's stack, indented. pino has already redacted it: this only rearranges what the
 * JSON line says. A line that is not JSON is passed on as it is.
 */
export function prettyLine(json: string): string {
  let o: Record<string, unknown>
  try {
    o = JSON.parse(json) as Record<string, unknown>
  } catch {
    return json
  }
  if (o === null || typeof o !== 'object') return json
  const time = typeof o.time === 'string' ? o.time.slice(11, 23) : ''
  const level = (LEVEL_NAMES[o.level as number] ?? String(o.level)).padEnd(5)
  let line = `${time} ${level} ${typeof o.msg === 'string' ? escapeUnsafe(o.msg) : ''}`
  let stack = ''
  for (const [name, value] of Object.entries(o)) {
    if (QUIET_FIELDS.has(name)) continue
    const err = value as { message?: unknown; stack?: unknown } | null
    if ((name === 'err' || name === 'error') && err && typeof err === 'object' && typeof err.message === 'string') {
      line += ` ${name}=${prettyValue(err.message)}`
      if (typeof err.stack === 'string')
        stack += err.stack
          .split('\n')
          .map((l) => `\n    ${escapeUnsafe(l)}`)
          .join('')
      continue
    }
    line += ` ${name}=${prettyValue(value)}`
  }
  return `${line}${stack}\n`
}

/** A destination that writes each pino line readably (prettyLine) to `out`, synchronously, in pino's process. */
export function prettyDestination(out: DestinationStream | NodeJS.WritableStream): DestinationStream {
  return { write: (chunk: string) => void out.write(prettyLine(chunk)) }
}

/**
 * pino JSON logs, or (`format` pretty) the same lines made readable on the way out: no pino
 * transport, which would run in a worker thread that the single bundle cannot carry. Fastify's request logging is replaced by one line per response (see app.ts)
 * that never includes headers; `redact` is the second line of defence for anything that carries
 * a key, token or secret by name.
 */
export function createLogger(level: string, destination: DestinationStream | NodeJS.WritableStream = process.stdout, format: LogFormat = 'json'): Logger {
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
    format === 'pretty' ? prettyDestination(destination) : destination,
  )
}
