import pino, { type DestinationStream, type Logger } from 'pino'

/** Query parameters whose values are credentials; they never reach a log line. */
const SECRET_PARAMS = /([?&](?:token|apiKey|api_key|key|secret)=)[^&#]*/gi

/** The URL with every credential-bearing query value replaced by `[REDACTED]`. */
export function redactUrl(url: string): string {
  return url.replace(SECRET_PARAMS, '$1[REDACTED]')
}

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
        ],
        censor: '[REDACTED]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  )
}
