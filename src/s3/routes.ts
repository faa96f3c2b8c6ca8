import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Core } from '../core'
import { registerTenantRateLimit } from '../http/rate-limit'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { ObjectInfo, ObjectRow } from '../db/repos/objects'
import { S3Error } from './errors'
import { parseQuery, type Verified } from './sigv4'
import { authenticate } from './authenticate'
import { hoistQueryHeaders } from './hoisted-headers'
import { readSmallBody, type BodySpec } from './ingest'
import { MAX_XML_BODY_BYTES, childOf, listOf, malformed, parseXml, textOf, xmlDocument, type XmlNode } from './xml'
import { etagOf, type ObjectInput } from './objects'
import { listPage } from './listing'
import { MAX_PARTS } from './multipart'
import { checkLocationConstraint } from './buckets'
import { checkCannedAcl, checkPutAcl, ownerOnlyAcl } from './acl'
import { awsEncode } from './sigv4'
import { sendObject } from './render'
import { copySourceHolds } from './conditions'
import { CHECKSUM_ALGORITHMS, checksumElement, uploadChecksum, type ChecksumAlgorithm } from './checksums'

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the S3 authentication hook. */
    s3Target?: Target
    s3Auth?: Verified<AuthenticatedTenant>
  }
}

type Req = FastifyRequest
type Reply = FastifyReply

/** What a request addresses, from path-style or virtual-hosted-style addressing. */
interface Target {
  bucket: string | undefined
  key: string | undefined
  query: Map<string, string>
}

/** Query parameters that never select an operation: signing (SigV4's, and SigV2's presigned three), the SDK's operation hint. */
const NEUTRAL_PARAM = /^(X-Amz-|x-amz-|x-id$|AWSAccessKeyId$|Signature$|Expires$)/

const BUCKET_LIST_PARAMS = new Set([
  'prefix',
  'delimiter',
  'max-keys',
  'marker',
  'continuation-token',
  'start-after',
  'fetch-owner',
  'encoding-type',
  'list-type',
  // Ceph RGW's extension (ceph/s3-tests use it): an ordered listing is a valid unordered one (#24).
  'allow-unordered',
])
const OBJECT_GET_PARAMS = new Set([
  'response-content-type',
  'response-content-language',
  'response-expires',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
  'partNumber',
  'versionId',
])
const UPLOADS_LIST_PARAMS = new Set(['uploads', 'prefix', 'delimiter', 'max-uploads', 'key-marker', 'upload-id-marker', 'encoding-type'])
const PARTS_LIST_PARAMS = new Set(['uploadId', 'max-parts', 'part-number-marker', 'encoding-type'])

const notImplemented = (what: string) => new S3Error('NotImplemented', `${what} is not implemented by Coffer`)

function decodePath(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    throw new S3Error('InvalidArgument', 'The request URL is not correctly percent-encoded')
  }
}

function targetOf(request: Req, domain: string | undefined): Target {
  const url = request.raw.url ?? '/'
  const q = url.indexOf('?')
  const rawPath = q < 0 ? url : url.slice(0, q)
  const query = new Map(parseQuery(q < 0 ? '' : url.slice(q + 1)))
  const host = (request.headers.host ?? '').toLowerCase()
  if (domain !== undefined && host.endsWith(`.${domain}`)) {
    const key = decodePath(rawPath.slice(1))
    return { bucket: host.slice(0, -domain.length - 1), key: key === '' ? undefined : key, query }
  }
  const path = rawPath.slice(1)
  const slash = path.indexOf('/')
  const bucket = decodePath(slash < 0 ? path : path.slice(0, slash))
  const key = slash < 0 ? '' : decodePath(path.slice(slash + 1))
  return { bucket: bucket === '' ? undefined : bucket, key: key === '' ? undefined : key, query }
}

/** Operation-selecting parameters of a request, after the neutral ones are dropped. */
function subresources(query: Map<string, string>, allowed: Set<string>): string[] {
  return [...query.keys()].filter((k) => !NEUTRAL_PARAM.test(k) && !allowed.has(k))
}

const header = (request: Req, name: string): string | undefined => {
  const v = request.headers[name]
  return Array.isArray(v) ? v.join(',') : v
}

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * Write options Coffer does not implement. Ignoring them would pretend (a client asking for
 * encryption, a public ACL, tags, a retention lock or a colder storage class must not believe it
 * got one): 501, on every write that could carry them — PutObject, CopyObject whatever its
 * metadata directive, CreateMultipartUpload, UploadPart(Copy), CreateBucket (#24).
 */
function refuseUnsupported(request: Req): void {
  // A value that is no canned ACL at all is the client's error (400), whatever else is refused.
  checkCannedAcl(header(request, 'x-amz-acl'))
  for (const name of Object.keys(request.headers)) {
    const value = header(request, name)
    if (
      name.startsWith('x-amz-server-side-encryption') ||
      name.startsWith('x-amz-copy-source-server-side-encryption') ||
      name.startsWith('x-amz-object-lock') ||
      name === 'x-amz-bucket-object-lock-enabled' ||
      name === 'x-amz-tagging' ||
      (name === 'x-amz-tagging-directive' && value?.toUpperCase() !== 'COPY') ||
      name === 'x-amz-website-redirect-location' ||
      name.startsWith('x-amz-grant-') ||
      (name === 'x-amz-acl' && value !== 'private' && value !== 'bucket-owner-full-control') ||
      (name === 'x-amz-storage-class' && value !== 'STANDARD') ||
      // ACLs disabled is what every Coffer bucket is; the other two settings are about ACLs.
      (name === 'x-amz-object-ownership' && value !== 'BucketOwnerEnforced')
    ) {
      throw notImplemented(`The ${name} header`)
    }
  }
}

/** The stored attributes of an object written with these request headers (s3.md: user metadata ≤ 2 KB). */
function objectInput(request: Req): ObjectInput {
  refuseUnsupported(request)
  const meta: Record<string, string> = {}
  let metaBytes = 0
  for (const [name, value] of Object.entries(request.headers)) {
    if (!name.startsWith('x-amz-meta-') || value === undefined) continue
    const v = Array.isArray(value) ? value.join(',') : value
    const n = name.slice('x-amz-meta-'.length)
    meta[n] = v
    metaBytes += Buffer.byteLength(n) + Buffer.byteLength(v)
  }
  if (metaBytes > 2048) throw new S3Error('MetadataTooLarge', 'Your metadata headers exceed the maximum allowed metadata size.')
  const contentType = request.s3ContentType?.trim()
  const opt = (name: string) => {
    const v = header(request, name)
    return v === undefined || v === '' ? undefined : v.slice(0, 1024)
  }
  const out: ObjectInput = { contentType: contentType && contentType.length <= 255 ? contentType : 'application/octet-stream', meta }
  const cacheControl = opt('cache-control')
  const contentDisposition = opt('content-disposition')
  // Only `aws-chunked` (the transfer's framing) is removed; the rest is kept as the client spelt it
  // (`deflate, gzip` stays `deflate, gzip`, #24).
  const contentEncoding = opt('content-encoding')
    ?.split(',')
    .filter((s) => s.trim().toLowerCase() !== 'aws-chunked')
    .join(',')
    .trim()
  const contentLanguage = opt('content-language')
  const expires = opt('expires')
  if (cacheControl) out.cacheControl = cacheControl
  if (contentDisposition) out.contentDisposition = contentDisposition
  if (contentEncoding) out.contentEncoding = contentEncoding
  if (contentLanguage) out.contentLanguage = contentLanguage
  if (expires) out.expires = expires
  return out
}

function intParam(query: Map<string, string>, name: string, def: number, max: number): number {
  const raw = query.get(name)
  if (raw === undefined || raw === '') return def
  if (!/^\d{1,10}$/.test(raw)) throw new S3Error('InvalidArgument', `${name} must be a non-negative integer`)
  return Math.min(Number(raw), max)
}

function xml(reply: Reply, root: string, body: XmlNode): Reply {
  return reply.type('application/xml').send(xmlDocument(root, body))
}

/**
 * COFFER_RATE_LIMIT_MAX applies to S3 requests too, per tenant, answered with S3's `SlowDown`
 * (503, with Retry-After). The counters are the API's (core.rateBudget, the same `tenant:<id>`
 * keys): a tenant has one budget whichever front it uses.
 */
async function registerS3RateLimit(app: FastifyInstance, core: Core): Promise<void> {
  await registerTenantRateLimit(app, core.config, core.rateBudget, {
    // The API's keys (`tenant:<id>`): one budget for a tenant on either front.
    key: (request) => (request.s3TenantId === undefined ? '' : `tenant:${request.s3TenantId}`),
    refusal: (context) =>
      new S3Error(
        'SlowDown',
        `Please reduce your request rate: ${context.max} requests per ${core.config.rateLimitWindowSeconds} s; retry in ${context.after}`,
      ),
  })
}

/** Registers the one route of the S3 listener and dispatches by method, bucket, key and sub-resource. */
export async function s3Routes(app: FastifyInstance, core: Core): Promise<void> {
  const { s3, s3Credentials, config } = core
  const region = config.s3Region

  // Authentication first (a hook, so the per-tenant rate limit that follows knows the tenant).
  app.addHook('preHandler', (request, _reply, done) => {
    try {
      const target = targetOf(request, config.s3Domain)
      request.s3Target = target
      request.s3Resource = target.bucket === undefined ? '/' : `/${target.bucket}${target.key !== undefined ? `/${target.key}` : ''}`
      if (request.method === 'OPTIONS' || request.method === 'PATCH') throw notImplemented(`${request.method} (CORS and other methods)`)
      const auth = authenticate(
        {
          method: request.method,
          url: request.raw.url ?? '/',
          rawHeaders: request.raw.rawHeaders,
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

  app.route({
    method: ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'PATCH'],
    url: '*',
    handler: async (request, reply) => {
      const target = request.s3Target!
      const auth = request.s3Auth!
      const tenant = auth.principal
      const body = (): BodySpec => ({
        source: request.raw,
        payload: auth.payload,
        signing: auth.signing,
        headers: request.headers,
        proceed: () => {
          // Node's own test for a continue expectation (the server's 'checkContinue'), so every
          // request Node held for a 100 gets one; any other Expect is ignored (server.ts).
          if (/(?:^|\W)100-continue(?:$|\W)/i.test(header(request, 'expect') ?? '') && !reply.raw.headersSent) reply.raw.writeContinue()
        },
      })
      // A client stating whose bucket it expects (AWS's bucket-owner condition) must not be ignored:
      // a tenant's buckets are its own, their owner ID its id (owner() below); any other is AccessDenied, as AWS.
      for (const name of ['x-amz-expected-bucket-owner', 'x-amz-source-expected-bucket-owner']) {
        const expected = header(request, name)
        if (expected !== undefined && expected !== tenant.id) throw new S3Error('AccessDenied', 'Access Denied')
      }
      if (target.bucket === undefined) return service(request, reply, tenant, target)
      if (target.key === undefined) return bucketOp(request, reply, tenant, target, body, auth)
      return objectOp(request, reply, tenant, target, body, auth)
    },
  })

  function owner(tenant: AuthenticatedTenant): XmlNode {
    return { ID: tenant.id, DisplayName: tenant.name }
  }

  function service(request: Req, reply: Reply, tenant: AuthenticatedTenant, target: Target) {
    if (request.method !== 'GET') throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.')
    if (subresources(target.query, new Set(['max-buckets', 'continuation-token', 'prefix', 'bucket-region'])).length > 0)
      throw notImplemented('This service operation')
    const buckets = s3.buckets.list(tenant)
    return xml(reply, 'ListAllMyBucketsResult', {
      Owner: owner(tenant),
      Buckets: { Bucket: buckets.map((b) => ({ Name: b.slug, CreationDate: iso(b.createdAt) })) },
    })
  }

  async function bucketOp(request: Req, reply: Reply, tenant: AuthenticatedTenant, target: Target, body: () => BodySpec, _auth: Verified<AuthenticatedTenant>) {
    const bucket = target.bucket!
    const q = target.query
    switch (request.method) {
      case 'HEAD':
        s3.buckets.resolve(tenant, bucket)
        return reply.header('x-amz-bucket-region', region).send()
      case 'GET': {
        if (q.has('acl')) {
          if (subresources(q, new Set(['acl'])).length > 0) throw notImplemented('This bucket sub-resource')
          s3.buckets.resolve(tenant, bucket)
          return reply.type('application/xml').send(ownerOnlyAcl({ ID: tenant.id, DisplayName: tenant.name }))
        }
        if (q.has('location')) {
          s3.buckets.resolve(tenant, bucket)
          return reply
            .type('application/xml')
            .send(
              `<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${region === 'us-east-1' ? '' : region}</LocationConstraint>`,
            )
        }
        if (q.has('versioning')) {
          s3.buckets.resolve(tenant, bucket)
          return xml(reply, 'VersioningConfiguration', {})
        }
        if (q.has('uploads')) {
          if (subresources(q, UPLOADS_LIST_PARAMS).length > 0) throw notImplemented('This bucket sub-resource')
          return listUploads(reply, tenant, bucket, q)
        }
        const extra = subresources(q, BUCKET_LIST_PARAMS)
        if (extra.length > 0) throw notImplemented(`The bucket sub-resource "${extra[0]}"`)
        return listObjects(reply, tenant, bucket, q)
      }
      case 'PUT': {
        if (q.has('acl')) {
          if (subresources(q, new Set(['acl'])).length > 0) throw notImplemented('This bucket sub-resource')
          s3.buckets.resolve(tenant, bucket)
          checkPutAcl(request.headers, (await readSmallBody(body(), MAX_XML_BODY_BYTES)).length, 'bucket')
          return reply.send()
        }
        const extra = subresources(q, new Set())
        if (extra.length > 0) throw notImplemented(`PUT of the bucket sub-resource "${extra[0]}"`)
        const doc = await readSmallBody(body(), MAX_XML_BODY_BYTES)
        if (doc.length > 0) {
          const parsed = parseXml(doc)
          const cfg = childOf(parsed, 'CreateBucketConfiguration')
          if (!cfg) throw malformed()
          checkLocationConstraint(textOf(cfg, 'LocationConstraint'), region)
        }
        refuseUnsupported(request)
        s3.buckets.create(tenant, bucket)
        return reply.header('location', `/${bucket}`).send()
      }
      case 'DELETE': {
        const extra = subresources(q, new Set())
        if (extra.length > 0) throw notImplemented(`DELETE of the bucket sub-resource "${extra[0]}"`)
        await s3.buckets.delete(tenant, bucket)
        return reply.code(204).send()
      }
      case 'POST': {
        if (!q.has('delete') || subresources(q, new Set(['delete'])).length > 0) throw notImplemented('This bucket POST operation')
        return deleteObjects(request, reply, tenant, bucket, body)
      }
    }
    throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.')
  }

  function listObjects(reply: Reply, tenant: AuthenticatedTenant, bucket: string, q: Map<string, string>) {
    const w = s3.buckets.resolve(tenant, bucket)
    const v2 = q.get('list-type') === '2'
    if (q.has('list-type') && !v2) throw new S3Error('InvalidArgument', 'list-type must be 2')
    const encoding = q.get('encoding-type')
    if (encoding !== undefined && encoding !== 'url') throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request')
    const enc = (s: string) => (encoding === 'url' ? awsEncode(s, true) : s)
    const prefix = q.get('prefix') ?? ''
    const delimiter = q.get('delimiter') ?? ''
    // RGW cannot group an unordered listing by a delimiter, and refuses the two together: so does Coffer,
    // so that a client written against RGW gets the same answer here.
    if (q.get('allow-unordered')?.toLowerCase() === 'true' && delimiter !== '') {
      throw new S3Error('InvalidArgument', 'allow-unordered cannot be combined with a delimiter', {
        ArgumentName: 'allow-unordered',
        ArgumentValue: q.get('allow-unordered')!,
      })
    }
    const maxKeys = intParam(q, 'max-keys', 1000, 1000)
    let after: string | undefined
    // An empty continuation-token is no token, as AWS treats it (#24).
    const token = q.get('continuation-token') || undefined
    if (v2 && token !== undefined) {
      if (!/^[A-Za-z0-9_-]{2,3000}$/.test(token)) throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect')
      const decoded = Buffer.from(token, 'base64url').toString('utf8')
      if (!decoded.startsWith('k:')) throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect')
      after = decoded.slice(2)
    } else if (v2) after = q.get('start-after') || undefined
    else after = q.get('marker') || undefined
    const page = listPage(s3.objectsRepo, w.id, { prefix, delimiter, after, maxKeys })
    const last = page.last === undefined ? undefined : page.last.kind === 'object' ? page.last.row.key : page.last.prefix
    const contents = page.entries.flatMap((e) => (e.kind === 'object' ? [e.row] : []))
    const prefixes = page.entries.flatMap((e) => (e.kind === 'prefix' ? [e.prefix] : []))
    const withOwner = !v2 || q.get('fetch-owner') === 'true'
    const body: XmlNode = {
      Name: bucket,
      // With encoding-type=url, AWS encodes every key-bearing element once, except ListObjects
      // (v1)'s Prefix, which it sends as given: botocore decodes all but that one (its
      // decode_list_object), so an encoded v1 Prefix reached boto3 as `%0A` (#24).
      Prefix: v2 ? enc(prefix) : prefix,
      ...(v2
        ? {
            // Echoed as sent, an empty one too (AWS; ceph/s3-tests reads it back).
            ...(q.has('continuation-token') ? { ContinuationToken: q.get('continuation-token')! } : {}),
            ...(q.has('start-after') ? { StartAfter: enc(q.get('start-after')!) } : {}),
            KeyCount: page.entries.length,
          }
        : { Marker: enc(q.get('marker') ?? '') }),
      MaxKeys: maxKeys,
      ...(delimiter !== '' ? { Delimiter: enc(delimiter) } : {}),
      ...(encoding ? { EncodingType: encoding } : {}),
      IsTruncated: page.truncated,
      ...(page.truncated && last !== undefined
        ? v2
          ? { NextContinuationToken: Buffer.from(`k:${last}`).toString('base64url') }
          : delimiter !== ''
            ? { NextMarker: enc(last) }
            : {}
        : {}),
      Contents: contents.map((o) => ({
        Key: enc(o.key),
        LastModified: iso(o.completedAt),
        ETag: etagOf(o),
        Size: o.size,
        ...(withOwner ? { Owner: owner(tenant) } : {}),
        StorageClass: 'STANDARD',
      })),
      CommonPrefixes: prefixes.map((p) => ({ Prefix: enc(p) })),
    }
    return xml(reply, 'ListBucketResult', body)
  }

  function listUploads(reply: Reply, tenant: AuthenticatedTenant, bucket: string, q: Map<string, string>) {
    const encoding = q.get('encoding-type')
    if (encoding !== undefined && encoding !== 'url') throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request')
    const enc = (s: string) => (encoding === 'url' ? awsEncode(s, true) : s)
    const prefix = q.get('prefix') ?? ''
    const delimiter = q.get('delimiter') ?? ''
    const max = intParam(q, 'max-uploads', 1000, 1000)
    const keyMarker = q.get('key-marker') || undefined
    // S3 ignores upload-id-marker without a key-marker.
    const idMarker = keyMarker === undefined ? undefined : q.get('upload-id-marker') || undefined
    const page = s3.multipart.listUploads(tenant, bucket, { prefix, delimiter, keyMarker, uploadIdMarker: idMarker, maxUploads: max })
    const last = page.last
    return xml(reply, 'ListMultipartUploadsResult', {
      Bucket: bucket,
      KeyMarker: enc(keyMarker ?? ''),
      UploadIdMarker: idMarker ?? '',
      // A page ending on a common prefix resumes past all of it: the prefix is the next key marker.
      ...(page.truncated && last
        ? last.kind === 'object'
          ? { NextKeyMarker: enc(last.row.key), NextUploadIdMarker: last.row.id }
          : { NextKeyMarker: enc(last.prefix), NextUploadIdMarker: '' }
        : {}),
      ...(encoding ? { EncodingType: encoding } : {}),
      ...(delimiter !== '' ? { Delimiter: enc(delimiter) } : {}),
      Prefix: enc(prefix),
      MaxUploads: max,
      IsTruncated: page.truncated,
      Upload: page.entries.flatMap((e) =>
        e.kind === 'object'
          ? [
              {
                Key: enc(e.row.key),
                UploadId: e.row.id,
                Initiator: owner(tenant),
                Owner: owner(tenant),
                StorageClass: 'STANDARD',
                Initiated: iso(e.row.createdAt),
              },
            ]
          : [],
      ),
      CommonPrefixes: page.entries.flatMap((e) => (e.kind === 'prefix' ? [{ Prefix: enc(e.prefix) }] : [])),
    })
  }

  async function deleteObjects(request: Req, reply: Reply, tenant: AuthenticatedTenant, bucket: string, body: () => BodySpec) {
    s3.buckets.resolve(tenant, bucket)
    // AWS requires the body's digest, Content-MD5 or a flexible checksum (header or trailer), which
    // readSmallBody then verifies (BadDigest): without one a presigned POST ?delete URL, which signs
    // no body, deleted whatever keys its holder put in the body (#24).
    const names = Object.keys(request.headers)
    const trailer = (header(request, 'x-amz-trailer') ?? '').toLowerCase()
    const digested =
      names.includes('content-md5') || names.some((n) => /^x-amz-checksum-(?!mode$|type$|algorithm$)/.test(n)) || /(^|,)\s*x-amz-checksum-/.test(trailer)
    if (!digested) throw new S3Error('InvalidRequest', 'Missing required header for this request: Content-MD5 OR x-amz-checksum-*')
    const doc = parseXml(await readSmallBody(body(), MAX_XML_BODY_BYTES))
    const del = childOf(doc, 'Delete')
    if (!del) throw malformed()
    const objects = listOf(del, 'Object')
    if (objects.length === 0 || objects.length > 1000) throw malformed()
    const keys = objects.map((o) => textOf(o, 'Key'))
    if (keys.some((k) => k === undefined)) throw malformed()
    const quiet = textOf(del, 'Quiet') === 'true'
    const result = s3.objects.deleteMany(tenant, bucket, keys as string[])
    request.log.debug({ deleted: result.deleted.length }, 'objects deleted')
    return xml(reply, 'DeleteResult', {
      Deleted: quiet ? [] : result.deleted.map((k) => ({ Key: k })),
      Error: result.errors.map((e) => ({ Key: e.key, Code: e.code, Message: e.message })),
    })
  }

  async function objectOp(request: Req, reply: Reply, tenant: AuthenticatedTenant, target: Target, body: () => BodySpec, _auth: Verified<AuthenticatedTenant>) {
    const bucket = target.bucket!
    const key = target.key!
    const q = target.query
    switch (request.method) {
      case 'GET':
      case 'HEAD': {
        if (request.method === 'GET' && q.has('uploadId')) {
          if (subresources(q, PARTS_LIST_PARAMS).length > 0) throw notImplemented('This object sub-resource')
          return listParts(reply, tenant, bucket, key, q)
        }
        if (request.method === 'GET' && q.has('acl')) {
          if (subresources(q, new Set(['acl', 'versionId'])).length > 0) throw notImplemented('This object sub-resource')
          objectAclTarget(tenant, bucket, key, q)
          return reply.type('application/xml').send(ownerOnlyAcl({ ID: tenant.id, DisplayName: tenant.name }))
        }
        if (request.method === 'GET' && q.has('attributes')) {
          if (subresources(q, new Set(['attributes', 'versionId'])).length > 0) throw notImplemented('This object sub-resource')
          return objectAttributes(request, reply, tenant, bucket, key, q)
        }
        const extra = subresources(q, OBJECT_GET_PARAMS)
        if (extra.length > 0) throw notImplemented(`The object sub-resource "${extra[0]}"`)
        const version = q.get('versionId')
        if (version !== undefined && version !== 'null') throw notImplemented('Object versions')
        const partNumber = q.get('partNumber')
        if (partNumber === undefined) return sendObject(core, request, reply, s3.objects.head(tenant, bucket, key), q)
        if (!/^\d{1,5}$/.test(partNumber) || Number(partNumber) < 1 || Number(partNumber) > MAX_PARTS) {
          throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive')
        }
        if (request.headers.range !== undefined) throw new S3Error('InvalidRequest', 'Cannot specify both Range header and partNumber query parameter')
        const { object, part } = s3.objects.headPart(tenant, bucket, key, Number(partNumber))
        return sendObject(core, request, reply, object, q, part)
      }
      case 'PUT': {
        if (q.has('acl')) {
          if (subresources(q, new Set(['acl', 'versionId'])).length > 0) throw notImplemented('This object sub-resource')
          objectAclTarget(tenant, bucket, key, q)
          checkPutAcl(request.headers, (await readSmallBody(body(), MAX_XML_BODY_BYTES)).length, 'object')
          return reply.send()
        }
        if (q.has('uploadId') || q.has('partNumber')) {
          if (subresources(q, new Set(['uploadId', 'partNumber'])).length > 0) throw notImplemented('This object sub-resource')
          return uploadPart(request, reply, tenant, bucket, key, q, body)
        }
        const extra = subresources(q, new Set())
        if (extra.length > 0) throw notImplemented(`PUT of the object sub-resource "${extra[0]}"`)
        if (header(request, 'x-amz-copy-source') !== undefined) return copyObject(request, reply, tenant, bucket, key)
        const { etag, checksum } = await s3.objects.put(tenant, bucket, key, body(), objectInput(request), {
          ifMatch: header(request, 'if-match'),
          ifNoneMatch: header(request, 'if-none-match'),
        })
        reply.header('etag', etag)
        if (checksum) reply.header(`x-amz-checksum-${checksum.algorithm}`, checksum.value)
        return reply.send()
      }
      case 'POST': {
        if (q.has('uploads')) {
          if (subresources(q, new Set(['uploads'])).length > 0) throw notImplemented('This object sub-resource')
          const checksum = uploadChecksum(header(request, 'x-amz-checksum-algorithm'), header(request, 'x-amz-checksum-type'))
          const upload = s3.multipart.create(tenant, bucket, key, objectInput(request), checksum)
          if (checksum) reply.header('x-amz-checksum-algorithm', checksum.algorithm.toUpperCase()).header('x-amz-checksum-type', checksum.type)
          return xml(reply, 'InitiateMultipartUploadResult', { Bucket: bucket, Key: key, UploadId: upload.id })
        }
        if (q.has('uploadId')) {
          if (subresources(q, new Set(['uploadId'])).length > 0) throw notImplemented('This object sub-resource')
          // Conditional completion (If-Match / If-None-Match) is not built: refused, not ignored (#24).
          for (const name of ['if-match', 'if-none-match']) {
            if (header(request, name) !== undefined) {
              throw new S3Error('NotImplemented', 'A header you provided implies functionality that is not implemented', {
                Header: name === 'if-match' ? 'If-Match' : 'If-None-Match',
                additionalMessage: 'Coffer does not implement conditional CompleteMultipartUpload',
              })
            }
          }
          return completeUpload(request, reply, tenant, bucket, key, q.get('uploadId')!, body)
        }
        throw notImplemented('This object POST operation')
      }
      case 'DELETE': {
        if (q.has('uploadId')) {
          if (subresources(q, new Set(['uploadId'])).length > 0) throw notImplemented('This object sub-resource')
          await s3.multipart.abort(tenant, bucket, key, q.get('uploadId')!)
          return reply.code(204).send()
        }
        const extra = subresources(q, new Set(['versionId']))
        if (extra.length > 0) throw notImplemented(`DELETE of the object sub-resource "${extra[0]}"`)
        const version = q.get('versionId')
        if (version !== undefined && version !== 'null') throw notImplemented('Object versions')
        s3.objects.delete(tenant, bucket, key)
        return reply.code(204).send()
      }
    }
    throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.')
  }

  /** The object a GetObjectAcl / PutObjectAcl names: it must exist (NoSuchKey), in its only version. */
  function objectAclTarget(tenant: AuthenticatedTenant, bucket: string, key: string, q: Map<string, string>): void {
    const version = q.get('versionId')
    if (version !== undefined && version !== 'null') throw notImplemented('Object versions')
    s3.objects.head(tenant, bucket, key)
  }

  /** `x-amz-copy-source`: `[/]bucket/key[?versionId=…]`, URL-encoded. */
  function copySource(request: Req): { bucket: string; key: string } {
    const raw = header(request, 'x-amz-copy-source')!
    const [pathPart, queryPart] = raw.split('?', 2)
    if (queryPart !== undefined && !/^versionId=null$/.test(queryPart)) throw notImplemented('Copying from an object version')
    const path = decodePath(pathPart!.replace(/^\//, ''))
    const slash = path.indexOf('/')
    if (slash <= 0 || slash === path.length - 1)
      throw new S3Error('InvalidArgument', 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey')
    return { bucket: path.slice(0, slash), key: path.slice(slash + 1) }
  }

  /** x-amz-copy-source-if-* preconditions, as GetObject's conditionals but answered 412. */
  function copyConditions(request: Req) {
    return (source: ObjectRow) => {
      const holds = copySourceHolds(
        {
          ifMatch: header(request, 'x-amz-copy-source-if-match'),
          ifNoneMatch: header(request, 'x-amz-copy-source-if-none-match'),
          ifModifiedSince: header(request, 'x-amz-copy-source-if-modified-since'),
          ifUnmodifiedSince: header(request, 'x-amz-copy-source-if-unmodified-since'),
        },
        etagOf(source),
        source.completedAt,
      )
      if (!holds) throw new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold')
    }
  }

  function copyObject(request: Req, reply: Reply, tenant: AuthenticatedTenant, bucket: string, key: string) {
    const from = copySource(request)
    const directive = (header(request, 'x-amz-metadata-directive') ?? 'COPY').toUpperCase()
    if (directive !== 'COPY' && directive !== 'REPLACE') throw new S3Error('InvalidArgument', 'Unknown metadata directive.')
    if (directive === 'COPY' && from.bucket === bucket && from.key === key) {
      throw new S3Error(
        'InvalidRequest',
        "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
      )
    }
    // The COPY directive keeps the source's metadata, not the request's options: those are refused
    // as under REPLACE, never silently dropped (#24).
    refuseUnsupported(request)
    const info: ObjectInfo | 'copy' = directive === 'REPLACE' ? { ...objectInput(request), etag: '' } : 'copy'
    // The destination's own conditions are honoured, as AWS's CopyObject does, never ignored (#24).
    const row = s3.objects.copy(tenant, from, { bucket, key }, info, copyConditions(request), {
      ifMatch: header(request, 'if-match'),
      ifNoneMatch: header(request, 'if-none-match'),
    })
    return xml(reply, 'CopyObjectResult', { ETag: etagOf(row), LastModified: iso(row.completedAt) })
  }

  async function uploadPart(
    request: Req,
    reply: Reply,
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    q: Map<string, string>,
    body: () => BodySpec,
  ) {
    const uploadId = q.get('uploadId')
    const partRaw = q.get('partNumber') ?? ''
    if (uploadId === undefined || !/^\d{1,5}$/.test(partRaw) || Number(partRaw) < 1 || Number(partRaw) > MAX_PARTS) {
      throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive, with an uploadId')
    }
    const partNumber = Number(partRaw)
    // SSE-C keys on a part (or on its copy source) would be ignored: refused as on the upload's creation.
    refuseUnsupported(request)
    if (header(request, 'x-amz-copy-source') !== undefined) {
      const from = copySource(request)
      const source = s3.objects.head(tenant, from.bucket, from.key)
      copyConditions(request)(source)
      let range: { start: number; end: number } | undefined
      const rangeHeader = header(request, 'x-amz-copy-source-range')
      if (rangeHeader !== undefined) {
        // Not one range of the form bytes=first-last: InvalidArgument. One that the source does not
        // hold: InvalidRange, as the S3 conformance suite (ceph/s3-tests) and RGW have it (#24; see README).
        const m = /^bytes=(\d{1,15})-(\d{1,15})$/.exec(rangeHeader)
        if (!m || Number(m[1]) > Number(m[2])) {
          throw new S3Error(
            'InvalidArgument',
            'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy',
            { ArgumentName: 'x-amz-copy-source-range', ArgumentValue: rangeHeader },
          )
        }
        if (Number(m[2]) >= source.size) {
          throw new S3Error('InvalidRange', `The requested range is not satisfiable: the source object is ${source.size} bytes`, {
            RangeRequested: rangeHeader,
          })
        }
        range = { start: Number(m[1]), end: Number(m[2]) }
      }
      const r = await s3.multipart.uploadPartCopy(tenant, bucket, key, uploadId, partNumber, source, range)
      return xml(reply, 'CopyPartResult', {
        ETag: r.etag,
        LastModified: iso(r.lastModified),
        ...(r.checksum ? { [checksumElement(r.checksum.algorithm)]: r.checksum.value } : {}),
      })
    }
    const r = await s3.multipart.uploadPart(tenant, bucket, key, uploadId, partNumber, body())
    reply.header('etag', r.etag)
    if (r.checksum) reply.header(`x-amz-checksum-${r.checksum.algorithm}`, r.checksum.value)
    return reply.send()
  }

  async function completeUpload(request: Req, reply: Reply, tenant: AuthenticatedTenant, bucket: string, key: string, uploadId: string, body: () => BodySpec) {
    // On CompleteMultipartUpload, an x-amz-checksum-<algorithm> header is the checksum the client
    // expects of the whole object (S3: ChecksumSHA256 … of the request), not one of the XML body.
    const spec = body()
    const headers = { ...spec.headers }
    let expected: { algorithm: string; value: string } | undefined
    for (const name of Object.keys(headers)) {
      const m = /^x-amz-checksum-(.+)$/.exec(name)
      if (!m || m[1] === 'mode' || m[1] === 'type' || m[1] === 'algorithm') continue
      expected = { algorithm: m[1]!, value: header(request, name)! }
      delete headers[name]
    }
    const doc = parseXml(await readSmallBody({ ...spec, headers }, MAX_XML_BODY_BYTES))
    const root = childOf(doc, 'CompleteMultipartUpload')
    if (!root) throw malformed()
    const listed = listOf(root, 'Part').map((p) => {
      const n = textOf(p, 'PartNumber')
      const etag = textOf(p, 'ETag')
      if (n === undefined || !/^\d{1,5}$/.test(n.trim()) || etag === undefined) throw malformed()
      const checksums: Partial<Record<ChecksumAlgorithm, string>> = {}
      for (const a of CHECKSUM_ALGORITHMS) {
        const v = textOf(p, checksumElement(a))
        if (v !== undefined) checksums[a] = v
      }
      return { partNumber: Number(n.trim()), etag, checksums }
    })
    // A part number listed twice in a row: the later entry, as RGW takes it (a client that re-sent a
    // part lists the ETag of each attempt, the last to finish last; ceph/s3-tests, #24).
    const parts = listed.filter((p, i) => listed[i + 1]?.partNumber !== p.partNumber)
    if (parts.length === 0 || parts.length > MAX_PARTS) throw malformed()
    const row = await s3.multipart.complete(tenant, bucket, key, uploadId, parts, expected)
    const checksum = row.info?.checksum
    return xml(reply, 'CompleteMultipartUploadResult', {
      Location: `/${bucket}/${awsEncode(key, true)}`,
      Bucket: bucket,
      Key: key,
      ETag: etagOf(row),
      ...(checksum ? { [checksumElement(checksum.algorithm as ChecksumAlgorithm)]: checksum.value, ChecksumType: checksum.type ?? 'COMPOSITE' } : {}),
    })
  }

  function listParts(reply: Reply, tenant: AuthenticatedTenant, bucket: string, key: string, q: Map<string, string>) {
    const max = intParam(q, 'max-parts', 1000, 1000)
    const marker = intParam(q, 'part-number-marker', 0, MAX_PARTS)
    const { upload, parts, truncated } = s3.multipart.listParts(tenant, bucket, key, q.get('uploadId')!, marker, max)
    const algorithm = upload.info.checksumAlgorithm as ChecksumAlgorithm | undefined
    return xml(reply, 'ListPartsResult', {
      Bucket: bucket,
      Key: key,
      UploadId: upload.id,
      Initiator: owner(tenant),
      Owner: owner(tenant),
      StorageClass: 'STANDARD',
      PartNumberMarker: marker,
      ...(truncated && parts.length > 0 ? { NextPartNumberMarker: parts.at(-1)!.partNumber } : {}),
      MaxParts: max,
      IsTruncated: truncated,
      ...(algorithm ? { ChecksumAlgorithm: algorithm.toUpperCase(), ChecksumType: upload.info.checksumType ?? 'COMPOSITE' } : {}),
      Part: parts.map((p) => ({
        PartNumber: p.partNumber,
        LastModified: iso(p.createdAt),
        ETag: `"${p.md5}"`,
        Size: p.size,
        ...(algorithm && p.checksum !== null ? { [checksumElement(algorithm)]: p.checksum } : {}),
      })),
    })
  }

  /** GetObjectAttributes: what the object is, without its bytes (S3 API reference). */
  function objectAttributes(request: Req, reply: Reply, tenant: AuthenticatedTenant, bucket: string, key: string, q: Map<string, string>) {
    const version = q.get('versionId')
    if (version !== undefined && version !== 'null') throw notImplemented('Object versions')
    const attributes = (header(request, 'x-amz-object-attributes') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')
    const headerInt = (name: string, def: number, max: number) => {
      const raw = header(request, name)?.trim()
      if (raw === undefined || raw === '') return def
      if (!/^\d{1,10}$/.test(raw)) throw new S3Error('InvalidArgument', `${name} must be a non-negative integer`)
      return Math.min(Number(raw), max)
    }
    const { lastModified, body } = s3.objects.attributes(tenant, bucket, key, {
      attributes,
      maxParts: headerInt('x-amz-max-parts', 1000, 1000),
      partNumberMarker: headerInt('x-amz-part-number-marker', 0, MAX_PARTS),
    })
    reply.header('last-modified', new Date(lastModified).toUTCString())
    return xml(reply, 'GetObjectAttributesResponse', body)
  }
}
