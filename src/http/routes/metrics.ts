import type { App } from '../types'
import type { Core } from '../../core'
import { AppError } from '../../errors'
import { bearerToken } from '../auth'
import { safeEqual } from '../../lib/secrets'

/**
 * `GET /metrics` in the Prometheus text format. Open like /health unless COFFER_METRICS_TOKEN is
 * set: it is usually scraped from a private network, and it carries no tenant data, only counts by
 * route template. A deployment reachable from outside sets the token (README, Metrics).
 */
export async function metricsRoutes(app: App, core: Core): Promise<void> {
  const token = core.config.metricsToken
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (token !== undefined) {
      const given = bearerToken(request)
      if (given === undefined) throw new AppError('UNAUTHORIZED', 'Missing Authorization: Bearer <COFFER_METRICS_TOKEN> header')
      if (!safeEqual(given, token)) throw new AppError('UNAUTHORIZED', 'Invalid metrics token')
    }
    reply.type(core.metrics.registry.contentType)
    return core.metrics.registry.metrics()
  })
}
