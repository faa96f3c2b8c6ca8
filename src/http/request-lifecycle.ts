import type { ServerResponse } from 'node:http'
import type { FastifyBaseLogger } from 'fastify'
import type { App } from './types'
import type { Metrics } from '../lib/metrics'
import { AppError } from '../errors'

declare module 'fastify' {
  interface FastifyInstance {
    /** Requests received whose response has not finished yet. */
    inFlightRequests(): number
  }
}

const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/**
 * Follows every request from arrival to the close of its response: for the metrics (counts and
 * latency by route template, requests in flight) and for a graceful close. Once `app.close()`
 * begins:
 * - a new request, also one on a kept-alive connection, is answered 503 NOT_READY with
 *   `Connection: close` (Fastify's own 503 is turned off in app.ts: its body is not the contract's
 *   error shape);
 * - requests in flight run to their end, and their connections close right after the response
 *   rather than idling until the keep-alive timeout (72 s), which would hold the close that long.
 */
export function registerRequestLifecycle(app: App, metrics: Metrics): void {
  const inFlight = new Set<ServerResponse>()
  let closing = false

  app.decorate('inFlightRequests', () => inFlight.size)

  app.addHook('onRequest', async (request, reply) => {
    const res = reply.raw
    inFlight.add(res)
    metrics.httpInFlight.inc()
    // 'close' follows 'finish', and also comes alone when the client goes away mid-response.
    res.once('close', () => {
      inFlight.delete(res)
      metrics.httpInFlight.dec()
    })
    if (closing) {
      reply.header('connection', 'close')
      throw new AppError('NOT_READY', 'Coffer is shutting down; retry shortly')
    }
  })

  app.addHook('onResponse', async (request, reply) => {
    const labels = {
      method: METHODS.has(request.method) ? request.method : 'OTHER',
      // The template (`/api/v1/files/:fileId`), never the URL: bounded, and free of ids and tokens.
      route: request.routeOptions.url ?? 'unmatched',
      status_code: String(reply.statusCode),
    }
    metrics.httpRequests.inc(labels)
    metrics.httpDuration.observe(labels, reply.elapsedTime / 1000)
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
