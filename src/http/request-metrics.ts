import type { App } from './types'
import type { Metrics } from '../lib/metrics'

const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** Counts and times every response by route template, and the requests in flight. */
export function registerRequestMetrics(app: App, metrics: Metrics): void {
  app.addHook('onRequest', async (request, reply) => {
    metrics.httpInFlight.inc()
    // 'close' follows 'finish', and also comes alone when the client goes away mid-response.
    reply.raw.once('close', () => metrics.httpInFlight.dec())
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
}
