import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Core } from '../core'
import { registerTenantRateLimit } from '../http/rate-limit'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import { S3Error } from './errors'
import { anonymousPayload, parseQuery, refuseRepeatedHeaders, repeatedParam, type Verified } from './sigv4'
import { authenticate } from './authenticate'
import { authorize, type Principal } from './authorize'
import { hoistQueryHeaders } from './hoisted-headers'
import { operationOf, type Operation, type OperationName, type Scope } from './operations'
import { decodePath, header, type Handler, type OpContext } from './ops/context'
import { anonymousListBuckets, serviceHandlers } from './ops/service'
import { bucketHandlers } from './ops/buckets'
import { objectHandlers } from './ops/objects'
import { multipartHandlers } from './ops/multipart'
import { aclHandlers } from './ops/acl'
import { checkSseHeader, encryptionHandlers, reportSse } from './ops/encryption'
import { corsHandlers } from './ops/cors'
import { postObject } from './ops/post-object'
import { preflight, registerCorsHeaders } from './cors'
import { versionHandlers } from './ops/versions'
import { policyHandlers } from './ops/policy'
import { objectLockHandlers } from './ops/object-lock'
import { taggingHandlers } from './ops/tagging'
import { lifecycleHandlers } from './ops/lifecycle'
import { ownershipHandlers } from './ops/ownership'
import { loggingHandlers } from './ops/logging'
import { logSourceOf } from './access-log'

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the S3 authentication hook. */
    s3Target?: Target
    /** Absent for an anonymous request (no signature at all, #26). */
    s3Auth?: Verified<AuthenticatedTenant>
    /** The operation the request is (operations.ts), or why it is none. */
    s3Operation?: Operation | S3Error
  }
}

/** What a request addresses, from path-style or virtual-hosted-style addressing. */
interface Target {
  bucket: string | undefined
  key: string | undefined
  /** The query as read by the operation and its handler: `pairs`, each name once. */
  query: Map<string, string>
  /** The decoded query pairs in order, parsed once: the signature is verified over these. */
  pairs: [string, string][]
}

/** Every operation's handler, by name: an operation of the table without one is a type error here. */
const HANDLERS = {
  ...serviceHandlers,
  ...bucketHandlers,
  ...objectHandlers,
  ...multipartHandlers,
  ...aclHandlers,
  ...encryptionHandlers,
  ...corsHandlers,
  ...versionHandlers,
  ...policyHandlers,
  ...objectLockHandlers,
  ...taggingHandlers,
  ...lifecycleHandlers,
  ...ownershipHandlers,
  ...loggingHandlers,
  // PostObject is signed by its form, not the request: its handler authenticates it (ops/post-object.ts).
} satisfies Record<Exclude<OperationName, 'PostObject'>, Handler>

function targetOf(request: FastifyRequest, domain: string | undefined): Target {
  const url = request.raw.url ?? '/'
  const q = url.indexOf('?')
  const rawPath = q < 0 ? url : url.slice(0, q)
  const pairs = parseQuery(q < 0 ? '' : url.slice(q + 1))
  // A name given twice never reaches a handler (the preHandler refuses it); should one, the first
  // value is the one read, as S3 reads it and as SigV2 signs it.
  const query = new Map<string, string>()
  for (const [name, value] of pairs) if (!query.has(name)) query.set(name, value)
  const host = (request.headers.host ?? '').toLowerCase()
  if (domain !== undefined && host.endsWith(`.${domain}`)) {
    const key = decodePath(rawPath.slice(1))
    return { bucket: host.slice(0, -domain.length - 1), key: key === '' ? undefined : key, query, pairs }
  }
  const path = rawPath.slice(1)
  const slash = path.indexOf('/')
  const bucket = decodePath(slash < 0 ? path : path.slice(0, slash))
  const key = slash < 0 ? '' : decodePath(path.slice(slash + 1))
  return { bucket: bucket === '' ? undefined : bucket, key: key === '' ? undefined : key, query, pairs }
}

/**
 * A request that carries no signature at all, in the header or the query, is anonymous (#26):
 * authorize() decides what a public ACL or policy grants it. Anything that looks signed is
 * verified, and a bad signature stays an error (never a fall back to anonymous).
 */
function isAnonymous(request: FastifyRequest, query: Map<string, string>): boolean {
  return (
    request.headers.authorization === undefined &&
    !['X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Signature', 'Signature', 'AWSAccessKeyId'].some((p) => query.has(p))
  )
}

const scopeOf = (target: Target): Scope => (target.bucket === undefined ? 'service' : target.key === undefined ? 'bucket' : 'object')

/**
 * COFFER_RATE_LIMIT_MAX applies to S3 requests too, per tenant, answered with S3's `SlowDown`
 * (503, with Retry-After). The counters are the API's (core.rateBudget, the same `tenant:<id>`
 * keys): a tenant has one budget whichever front it uses.
 */
async function registerS3RateLimit(app: FastifyInstance, core: Core): Promise<void> {
  await registerTenantRateLimit(app, core.config, core.rateBudget, {
    // The API's keys (`tenant:<id>`): one budget for a tenant on either front.
    // An anonymous request (#26) is counted by its client address, as the API's unproven requests are.
    key: (request) => (request.s3TenantId !== undefined ? `tenant:${request.s3TenantId}` : request.s3Payload === 'anonymous' ? `ip:${request.ip}` : ''),
    refusal: (context) =>
      new S3Error(
        'SlowDown',
        `Please reduce your request rate: ${context.max} requests per ${core.config.rateLimitWindowSeconds} s; retry in ${context.after}`,
      ),
  })
}

/**
 * Registers the one route of the S3 listener. A request is parsed into its operation
 * (operations.ts), authenticated, authorized with that operation, and dispatched to its handler.
 */
export async function s3Routes(app: FastifyInstance, core: Core): Promise<void> {
  const { s3, s3Credentials, config } = core
  const region = config.s3Region

  // Authentication first (a hook, so the per-tenant rate limit that follows knows the tenant).
  app.addHook('preHandler', (request, _reply, done) => {
    try {
      const target = targetOf(request, config.s3Domain)
      request.s3Target = target
      request.s3Resource = target.bucket === undefined ? '/' : `/${target.bucket}${target.key !== undefined ? `/${target.key}` : ''}`
      // A CORS preflight is answered from the bucket's rules, unsigned, as a browser sends it (cors.ts).
      if (request.method === 'OPTIONS') return done()
      const operation = operationOf(request.method, scopeOf(target), target.query, request.headers)
      request.s3Operation = operation
      // A method no operation has (PATCH) is refused before any signature is checked.
      if (operation instanceof S3Error && operation.code === 'NotImplemented' && !['GET', 'HEAD', 'PUT', 'POST', 'DELETE'].includes(request.method)) {
        throw operation
      }
      refuseRepeatedHeaders(request.raw.rawHeaders)
      // A query parameter given twice, where no signature of the request covers the query (a form
      // upload's, an anonymous request): 400 InvalidArgument. A signed request's verifier refuses it
      // as a signature that does not match (sigv4.ts, repeatedParam).
      const isForm = !(operation instanceof S3Error) && operation.name === 'PostObject'
      const anonymous = !isForm && isAnonymous(request, target.query)
      if (isForm || anonymous) {
        const repeated = repeatedParam(target.pairs)
        if (repeated !== undefined) throw new S3Error('InvalidArgument', `The query parameter ${repeated} may be given only once`, { ArgumentName: repeated })
      }
      // A form upload is signed by its form's fields, which its handler reads and verifies (post-object.ts).
      if (isForm) return done()
      if (anonymous) {
        request.s3Payload = 'anonymous'
        return done()
      }
      const auth = authenticate(
        {
          method: request.method,
          url: request.raw.url ?? '/',
          rawHeaders: request.raw.rawHeaders,
          query: target.pairs,
          // A virtual-hosted-style request's SigV2 resource starts with the bucket its Host names (targetOf).
          hostBucket: config.s3Domain !== undefined && (request.headers.host ?? '').toLowerCase().endsWith(`.${config.s3Domain}`) ? target.bucket : undefined,
        },
        {
          region,
          sigV2: config.s3Sigv2,
          now: core.clock.now(),
          lookup: (id) => {
            const found = s3Credentials.lookup(id)
            return found && { secret: found.secret, principal: found.tenant }
          },
        },
      )
      request.s3Auth = auth
      request.s3TenantId = auth.principal.id
      // A presigned URL's x-amz-* query parameters are the headers its signer moved there.
      if (auth.presigned) hoistQueryHeaders(request.headers, target.query)
      const p = auth.payload
      const kind =
        p.kind === 'streaming' ? `chunked-${p.signed ? 'signed' : 'unsigned'}${p.trailer ? '-trailer' : ''}` : auth.presigned ? `presigned-${p.kind}` : p.kind
      request.s3Payload = auth.version === 2 ? `sigv2-${kind}` : kind
    } catch (err) {
      return done(err as Error)
    }
    done()
  })
  await registerS3RateLimit(app, core)
  registerCorsHeaders(app, core)

  // Every object of an encrypted data dir is sealed at rest: its answers say so (SSE-S3, #27).
  if (core.bucketEncryption.atRest) {
    app.addHook('onSend', async (request, reply) => {
      const operation = request.s3Operation
      if (operation && !(operation instanceof S3Error)) reportSse(reply, operation.name)
    })
  }

  app.route({
    method: ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'PATCH'],
    url: '*',
    handler: async (request, reply) => {
      const target = request.s3Target!
      if (request.method === 'OPTIONS') return preflight(core, request, reply, target)
      const auth = request.s3Auth
      const operation = request.s3Operation!
      if (operation instanceof S3Error) throw operation
      if (operation.name === 'PostObject') return postObject(core, request, reply, target.bucket!)
      const principal: Principal = auth ? { kind: 'tenant', tenant: auth.principal } : { kind: 'anonymous' }
      // Anonymous ListBuckets lists the buckets anonymous owns: none (an empty list, as Ceph RGW answers it).
      if (!auth && operation.name === 'ListBuckets') return anonymousListBuckets(reply)
      // The tenant whose bucket it is, and the bucket's name within it (a `<tenant-id>:` qualifier removed).
      const { tenant, bucket } = authorize(core, request, principal, operation, target)
      // The bucket's server access log may record it, once answered (access-log.ts).
      if (target.bucket !== undefined) {
        if (operation.name === 'PutBucketLogging') request.s3LogAfter = { tenant, bucket }
        else request.s3LogSource = logSourceOf(core, tenant, bucket)
      }
      checkSseHeader(request, operation.name, core.kms, tenant.id)
      const context: OpContext = {
        core,
        s3,
        region,
        request,
        reply,
        tenant,
        auth,
        bucket,
        key: target.key ?? '',
        query: target.query,
        body: () => ({
          source: request.raw,
          payload: auth?.payload ?? anonymousPayload(header(request, 'x-amz-content-sha256')),
          ...(auth?.signing ? { signing: auth.signing } : {}),
          headers: request.headers,
          proceed: () => {
            // Node's own test for a continue expectation (the server's 'checkContinue'), so every
            // request Node held for a 100 gets one; any other Expect is ignored (server.ts).
            if (/(?:^|\W)100-continue(?:$|\W)/i.test(header(request, 'expect') ?? '') && !reply.raw.headersSent) reply.raw.writeContinue()
          },
        }),
      }
      return HANDLERS[operation.name](context)
    },
  })
}
