import type { ServerResponse } from 'node:http'
import type { FastifyBaseLogger } from 'fastify'
import type { App } from './types'
import type { Metrics } from '../lib/metrics'
import { AppError } from '../errors'
import { redactUrl } from '../lib/logger'

declare module 'fastify' {
  interface FastifyInstance {
    /** Requests received whose response has not finished yet. */
    inFlightRequests(): number
  }
}

const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/**
 * Follows every request from arrival to the close of its response, in one onRequest and one
 * onResponse hook (callbacks, not promises: every hook and microtask counts on a path that runs
 * for every request, #7):
 * - the `X-Request-Id` header;
 * - requests in flight, for the metrics (read at scrape time) and a graceful close. Once
 *   `app.close()` begins, a new request, also one on a kept-alive connection, is answered 503
 *   NOT_READY with `Connection: close` (Fastify's own 503 is turned off in app.ts: its body is not
 *   the contract's error shape), and requests in flight run to their end, their connections
 *   closing right after the response rather than idling until the keep-alive timeout (72 s);
 * - counts and latency by route template;
 * - the access log line. It is made only of fields that never carry a secret (redactUrl masks
 *   the URL's credentials), so it skips the logger's redaction pass, which was half the cost of
 *   writing the line (6 of 12 us, measured for #7). Every other log call is still redacted.
 */
export function registerRequestLifecycle(app: App, metrics: Metrics, logger: FastifyBaseLogger): void {
  const inFlight = new Set<ServerResponse>()
  let closing = false
  const accessLog = logger.child({}, { redact: [] })

  app.decorate('inFlightRequests', () => inFlight.size)
  metrics.readInFlight(() => inFlight.size)

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    const res = reply.raw
    inFlight.add(res)
    // 'close' follows 'finish', and also comes alone when the client goes away mid-response.
    res.once('close', () => inFlight.delete(res))
    if (closing) {
      reply.header('connection', 'close')
      return done(new AppError('NOT_READY', 'Coffer is shutting down; retry shortly'))
    }
    done()
  })

  app.addHook('onResponse', (request, reply, done) => {
    const method = METHODS.has(request.method) ? request.method : 'OTHER'
    // The template (`/api/v1/files/:fileId`), never the URL: bounded, and free of ids and tokens.
    metrics.recordRequest(method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000)
    accessLog.info(
      {
        reqId: request.id,
        method: request.method,
        url: redactUrl(request.url),
        statusCode: reply.statusCode,
        responseTimeMs: Math.round(reply.elapsedTime * 100) / 100,
        tenantId: request.tenant?.id,
      },
      'request completed',
    )
    done()
  })

  app.addHook('preClose', async () => {
    closing = true
    for (const res of inFlight) {
      if (!res.headersSent) res.setHeader('connection', 'close')
      // Headers already out (a download streaming): close the connection once it goes idle.
      else res.once('finish', () => setImmediate(() => app.server.closeIdleConnections()))
    }
  })
}

/**
 * `app.close()` with a bound: requests still running after `timeoutMs` have their connections
 * closed (an upload cut off this way fails cleanly, see UploadsService.settled).
 */
export async function closeGracefully(app: App, timeoutMs: number, log: FastifyBaseLogger): Promise<void> {
  const timer = setTimeout(() => {
    log.warn({ inFlight: app.inFlightRequests(), timeoutMs }, 'requests still running at the shutdown timeout: closing their connections')
    app.server.closeAllConnections()
  }, timeoutMs)
  try {
    await app.close()
  } finally {
    clearTimeout(timer)
  }
}
