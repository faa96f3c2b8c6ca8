import type { FastifyReply, FastifyRequest } from 'fastify'
import { AppError } from '../errors'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { TenantsService } from '../services/tenants'
import { safeEqual } from '../lib/secrets'
import { discardRestOfBody } from './discard-body'

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated tenant; set by the tenant auth hook, absent elsewhere. */
    tenant: AuthenticatedTenant | null
  }
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization
  if (typeof header !== 'string') return undefined
  const m = /^Bearer[ ]+([^\s]+)\s*$/i.exec(header)
  return m?.[1]
}

const unauthorized = (message: string) => new AppError('UNAUTHORIZED', message)

/**
 * onRequest hook for tenant routes: a valid tenant key, or 401. A callback hook: it runs on every request.
 * A refused request's body has not been read: Node would read all of it after the 401, however
 * large and for however long (a request from nobody). It is discarded within the bounds of
 * discard-body.ts instead, then the connection closed (#24).
 */
export function tenantAuth(tenants: TenantsService) {
  return (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void => {
    try {
      request.tenant = authenticateTenant(tenants, request)
    } catch (err) {
      discardRestOfBody(request, reply)
      return done(err as Error)
    }
    done()
  }
}

export function authenticateTenant(tenants: TenantsService, request: FastifyRequest): AuthenticatedTenant {
  const token = bearerToken(request)
  if (token === undefined) throw unauthorized('Missing Authorization: Bearer <API key> header')
  const tenant = tenants.authenticate(token)
  if (!tenant) throw unauthorized('Invalid or revoked API key')
  return tenant
}

/** onRequest hook for admin routes: the configured admin key (compared in constant time), or 401. */
export function adminAuth(adminApiKey: string | undefined) {
  const check = (request: FastifyRequest): void => {
    if (adminApiKey === undefined) {
      throw unauthorized('The admin API is disabled: set COFFER_ADMIN_API_KEY (at least 16 characters) and restart coffer')
    }
    const token = bearerToken(request)
    if (token === undefined) throw unauthorized('Missing Authorization: Bearer <admin API key> header')
    if (!safeEqual(token, adminApiKey)) throw unauthorized('Invalid admin API key')
  }
  // As tenantAuth: a refused request's body is discarded within bounds, not read to its end.
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    try {
      check(request)
    } catch (err) {
      discardRestOfBody(request, reply)
      throw err
    }
  }
}
