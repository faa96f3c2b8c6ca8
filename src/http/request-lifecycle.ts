import type { ServerResponse } from 'node:http'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
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
 * What one front (the JSON API, S3) tells the lifecycle about itself; everything else is common.
 * The shutdown refusal is the same AppError NOT_READY on both: each front's error handler renders
 * it in its own shape (the contract's JSON envelope, S3's `ServiceUnavailable` XML document).
 */
export interface Front {
  /** The `front` field of the access log line: `api` or `s3`. */
  name: 'api' | 's3'
  /** Sets the headers every answer carries: the request id under the front's own names. */
  stamp(request: FastifyRequest, reply: FastifyReply): void
  /** The `route` label of the request metrics: a bounded set (templates), never the URL. */
  route(request: FastifyRequest): string
  /** The authenticated tenant, if any, for the access log line. */
  tenantId(request: FastifyRequest): string | undefined
  /** More fields for the access log line. Each must be free of secrets: the line is not redacted. */
  logFields?(request: FastifyRequest): Record<string, unknown>
}

/**
 * Follows every request of a front from arrival to the close of its response, in one onRequest and
 * one onResponse hook (callbacks, not promises: every hook and microtask counts on a path that runs
 * for every request, #7):
 * - the request id headers (`Front.stamp`);
 * - requests in flight, for the metrics (read at scrape time, summed over the fronts) and a
 *   graceful close. Once `app.close()` begins, a new request, also one on a kept-alive connection,
 *   is refused (503 NOT_READY in the front's shape) with `Connection: close` (Fastify's own 503 is
 *   turned off on both listeners: its body is neither front's error shape), and requests in flight
 *   run to their end, their connections closing right after the response rather than idling until
 *   the keep-alive timeout (72 s);
 * - counts and latency by route template (`Front.route`);
 * - the access log line. It is made only of fields that never carry a secret (redactUrl masks
 *   the URL's credentials), so it skips the logger's redaction pass, which was half the cost of
 *   writing the line (6 of 12 us, measured for #7). Every other log call is still redacted.
 */
export function registerRequestLifecycle(app: FastifyInstance, metrics: Metrics, logger: FastifyBaseLogger, front: Front): void {
  const inFlight = new Set<ServerResponse>()
  let closing = false
  const accessLog = logger.child({}, { redact: [] })

  app.decorate('inFlightRequests', () => inFlight.size)
  metrics.readInFlight(() => inFlight.size)

  app.addHook('onRequest', (request, reply, done) => {
    front.stamp(request, reply)
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
    metrics.recordRequest(method, front.route(request), reply.statusCode, reply.elapsedTime / 1000)
    const line = {
      reqId: request.id,
      front: front.name,
      method: request.method,
      url: redactUrl(request.url),
      statusCode: reply.statusCode,
      responseTimeMs: Math.round(reply.elapsedTime * 100) / 100,
      tenantId: front.tenantId(request),
    }
    accessLog.info(front.logFields ? Object.assign(line, front.logFields(request)) : line, 'request completed')
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
export async function closeGracefully(app: FastifyInstance, timeoutMs: number, log: FastifyBaseLogger): Promise<void> {
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
