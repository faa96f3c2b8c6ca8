import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Core } from '../core'
import { matchCorsRule, type CorsRule } from '../services/bucket-cors'
import { S3Error } from './errors'

/**
 * CORS on the S3 listener, as AWS answers it (Amazon S3 User Guide, "How does Amazon S3 evaluate
 * the CORS configuration on a bucket?"): a preflight `OPTIONS` is answered from the bucket's rules
 * without a signature (a browser sends none), and every actual response to a request with an
 * `Origin` a rule allows, errors included, carries the headers that let the page read it.
 *
 * Bucket names are per tenant and a preflight names no tenant by itself: a presigned URL's
 * access key id names it; otherwise every bucket of that name is consulted, and a bucket that does
 * not exist, one without CORS and one whose rules refuse are one same 403 (README, S3: CORS).
 */

type Target = { bucket: string | undefined; key: string | undefined; query: Map<string, string> }

/** The access key id a presigned URL (SigV4 or SigV2) carries in its query string, if any. */
function queryAccessKey(query: Map<string, string>): string | undefined {
  const credential = query.get('X-Amz-Credential')
  if (credential !== undefined) return credential.split('/')[0]
  return query.get('AWSAccessKeyId')
}

/** The rules that apply to a request: its tenant's bucket when a tenant is known, else every bucket of that name. */
function rulesFor(core: Core, tenantId: string | undefined, bucket: string, query: Map<string, string>): readonly CorsRule[] {
  let tenant = tenantId
  if (tenant === undefined) {
    const id = queryAccessKey(query)
    if (id !== undefined) tenant = core.s3Credentials.lookup(id)?.tenant.id
  }
  if (tenant !== undefined) return core.bucketCors.ofBucket(tenant, bucket) ?? []
  return core.bucketCors.byBucketName(bucket)
}

const forbidden = (method: string, target: Target, message: string) =>
  new S3Error('AccessForbidden', message, { Method: method, ResourceType: target.key === undefined ? 'BUCKET' : 'OBJECT' })

/** Answers a preflight `OPTIONS`: 200 with the allowing rule's headers, 400 without Origin or method, 403 otherwise. */
export function preflight(core: Core, request: FastifyRequest, reply: FastifyReply, target: Target): FastifyReply {
  const origin = request.headers.origin
  if (typeof origin !== 'string' || origin === '') throw new S3Error('BadRequest', 'Insufficient information. Origin request header needed.')
  const method = request.headers['access-control-request-method']
  if (typeof method !== 'string' || method === '') {
    throw new S3Error('BadRequest', 'Insufficient information. Access-Control-Request-Method request header needed.')
  }
  const asked = request.headers['access-control-request-headers']
  const headers = (Array.isArray(asked) ? asked.join(',') : (asked ?? ''))
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '')
  const rule = target.bucket === undefined ? undefined : matchCorsRule(rulesFor(core, undefined, target.bucket, target.query), origin, method, headers)
  if (rule === undefined) {
    throw forbidden(
      method,
      target,
      "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
    )
  }
  setCorsHeaders(reply, rule, origin)
  if (headers.length > 0) reply.header('access-control-allow-headers', headers.join(', '))
  return reply.send()
}

function setCorsHeaders(reply: FastifyReply, rule: CorsRule, origin: string): void {
  const any = rule.allowedOrigins.includes('*')
  reply.header('access-control-allow-origin', any ? '*' : origin)
  reply.header('access-control-allow-methods', rule.allowedMethods.join(', '))
  if (!any) reply.header('access-control-allow-credentials', 'true')
  if (rule.exposeHeaders.length > 0) reply.header('access-control-expose-headers', rule.exposeHeaders.join(', '))
  if (rule.maxAgeSeconds !== undefined) reply.header('access-control-max-age', String(rule.maxAgeSeconds))
  reply.header('vary', 'Origin, Access-Control-Request-Headers, Access-Control-Request-Method')
}

/**
 * The CORS headers of actual responses, errors too (a page must read a 403 or a 412 to act on it).
 * A request without `Origin` costs one header lookup here, no database read.
 */
export function registerCorsHeaders(app: FastifyInstance, core: Core): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    const origin = request.headers.origin
    const target = request.s3Target
    if (typeof origin !== 'string' || origin === '' || target?.bucket === undefined || request.method === 'OPTIONS') return done(null, payload)
    try {
      // RGW matches an actual request carrying Access-Control-Request-Method by that method (ceph/s3-tests' test_cors_origin_response).
      const asked = request.headers['access-control-request-method']
      const method = typeof asked === 'string' && asked !== '' ? asked : request.method
      const rule = matchCorsRule(rulesFor(core, request.s3TenantId, target.bucket, target.query), origin, method)
      if (rule !== undefined) setCorsHeaders(reply, rule, origin)
    } catch (err) {
      // Headers are a courtesy to the page: a failed read must not turn the answer into another one.
      request.log.warn({ err }, 'CORS headers not added')
    }
    done(null, payload)
  })
}
