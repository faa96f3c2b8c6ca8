import rateLimit from '@fastify/rate-limit'
import type { App } from './types'
import type { Core } from '../core'
import { AppError } from '../errors'

/**
 * Per-tenant rate limiting, off unless COFFER_RATE_LIMIT_MAX > 0. Requests count against the
 * tenant that makes them: the key's tenant, or for presigned uploads and signed downloads the
 * tenant owning the file. Health, readiness and admin routes are never limited.
 */
export async function registerRateLimit(app: App, core: Core): Promise<void> {
  const { rateLimitMax, rateLimitWindowSeconds } = core.config
  if (rateLimitMax === 0) return
  await app.register(rateLimit, {
    global: true,
    // After authentication (onRequest), so the tenant is known.
    hook: 'preHandler',
    max: rateLimitMax,
    timeWindow: rateLimitWindowSeconds * 1000,
    keyGenerator: (request) => {
      if (request.tenant) return request.tenant.id
      const fileId = (request.params as { fileId?: unknown } | undefined)?.fileId
      return (typeof fileId === 'string' && core.files.tenantOf(fileId)) || ''
    },
    allowList: (_request, key) => key === '',
    errorResponseBuilder: (_request, context) =>
      new AppError('RATE_LIMITED', `Rate limit of ${context.max} requests per ${rateLimitWindowSeconds} s exceeded; retry in ${context.after}`, {
        limit: context.max,
        windowSeconds: rateLimitWindowSeconds,
        retryAfterSeconds: Math.ceil(context.ttl / 1000),
      }),
  })
}
