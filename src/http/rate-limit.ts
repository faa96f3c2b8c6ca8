import type { errorResponseBuilderContext, FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import type { App } from './types'
import type { RateBudget } from '../lib/rate-budget'
import type { Core } from '../core'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Config } from '../config'
import { AppError } from '../errors'
import { bearerToken } from './auth'

/**
 * Per-tenant rate limiting, off unless COFFER_RATE_LIMIT_MAX > 0. A request counts against the
 * tenant it proves: the key's tenant, or for presigned uploads and signed downloads the tenant
 * whose valid signature the token carries. Anything unproven (a bad key or token, a guessed file
 * id) counts against the client's address instead, so that holding a file id neither locks its
 * owner out nor learns from the x-ratelimit-* headers that the id exists (#12 item 2).
 * Health, readiness and admin routes are never limited. The counters are the process's one
 * RateBudget, which the S3 front counts in too: a tenant has one budget whichever front it uses.
 */
export async function registerRateLimit(app: App, core: Core): Promise<void> {
  const { rateLimitWindowSeconds } = core.config
  await registerTenantRateLimit(app, core.config, core.rateBudget, {
    key: (request) => {
      if (request.tenant) return `tenant:${request.tenant.id}`
      // Health, metrics and admin routes: never limited.
      if (!TOKEN_ROUTES.has(request.routeOptions.url ?? '')) return ''
      const tenantId = provenTenant(core, request)
      return tenantId === undefined ? `ip:${request.ip}` : `tenant:${tenantId}`
    },
    refusal: (context) =>
      new AppError('RATE_LIMITED', `Rate limit of ${context.max} requests per ${rateLimitWindowSeconds} s exceeded; retry in ${context.after}`, {
        limit: context.max,
        windowSeconds: rateLimitWindowSeconds,
        retryAfterSeconds: Math.ceil(context.ttl / 1000),
      }),
  })
}

/**
 * COFFER_RATE_LIMIT_MAX requests per COFFER_RATE_LIMIT_WINDOW_SECONDS for each key, on any front
 * (off at 0). The count is taken after authentication (a preHandler hook), so the key can be the
 * tenant; a request whose key is '' is never limited. The front says how a refusal reads. Every
 * front counts in `budget`, so the same key has one window whichever front it comes through.
 */
export async function registerTenantRateLimit(
  app: FastifyInstance,
  config: Pick<Config, 'rateLimitMax' | 'rateLimitWindowSeconds'>,
  budget: RateBudget,
  front: { key: (request: FastifyRequest) => string; refusal: (context: errorResponseBuilderContext) => Error },
): Promise<void> {
  if (config.rateLimitMax === 0) return
  // Loaded only when a limit is on (off by default): the plugin and the IPv6 library it requires were
  // evaluated at every start (8 ms in a bundle instrumented per module, at load 4).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const rateLimit = (require('@fastify/rate-limit') as typeof import('@fastify/rate-limit')).default
  await app.register(rateLimit, {
    global: true,
    // After authentication (onRequest) and validation, so the tenant, params and query are known.
    hook: 'preHandler',
    max: config.rateLimitMax,
    timeWindow: config.rateLimitWindowSeconds * 1000,
    store: budgetStore(budget),
    keyGenerator: front.key,
    allowList: (_request, key) => key === '',
    errorResponseBuilder: (_request, context) => front.refusal(context),
  })
}

/** @fastify/rate-limit's store over a RateBudget: every front registering it counts in the same windows. */
export function budgetStore(budget: RateBudget): FastifyRateLimitStoreCtor {
  return class BudgetStore implements FastifyRateLimitStore {
    incr(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void, timeWindow: number): void {
      callback(null, budget.count(key, timeWindow))
    }
    read(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void, timeWindow: number): void {
      callback(null, budget.peek(key, timeWindow))
    }
    child(): FastifyRateLimitStore {
      return this
    }
  }
}

/** Routes authorised by a presigned or signed URL (or, for downloads, a key checked in the handler). */
const TOKEN_ROUTES: ReadonlySet<string> = new Set(['/api/v1/upload/:fileId', '/api/v1/files/:fileId/download'])

/** The tenant a request on a token route proves by a Bearer key or a valid signature, if any. */
function provenTenant(core: Core, request: FastifyRequest): string | undefined {
  if (request.headers.authorization !== undefined) {
    const key = bearerToken(request)
    return key === undefined ? undefined : core.tenants.authenticate(key)?.id
  }
  const fileId = (request.params as { fileId?: unknown } | undefined)?.fileId
  const query = request.query as { expires?: unknown; token?: unknown } | undefined
  if (typeof fileId !== 'string' || typeof query?.expires !== 'string' || typeof query.token !== 'string') return undefined
  return core.files.tokenSigner(request.method === 'PUT' ? 'upload' : 'download', fileId, query.expires, query.token)
}
