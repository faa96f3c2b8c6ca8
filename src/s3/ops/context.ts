import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Core } from '../../core'
import type { AuthenticatedTenant } from '../../db/repos/tenants'
import type { S3Services } from '../services'
import type { Verified } from '../sigv4'
import type { BodySpec } from '../ingest'
import type { ObjectInput } from '../objects'
import type { OperationName } from '../operations'
import { S3Error } from '../errors'
import { checkCannedAcl, requestedAcl } from '../acl'
import { lockHeaders } from '../object-lock'
import { xmlDocument, type XmlNode } from '../xml'
import { TagError, parseTagQuery, type Tags } from '../../services/tagging'

/** What every operation's handler gets: the request, its verified tenant, what it addresses. */
export interface OpContext {
  readonly core: Core
  readonly s3: S3Services
  readonly region: string
  readonly request: FastifyRequest
  readonly reply: FastifyReply
  /** The tenant whose bucket the request addresses (authorize.ts): the signer, or the owner of what it may read. */
  readonly tenant: AuthenticatedTenant
  /** The request's verified signature; absent for an anonymous request. */
  readonly auth: Verified<AuthenticatedTenant> | undefined
  /** The bucket (empty for the service's operations). */
  readonly bucket: string
  /** The key (empty for the service's and buckets' operations). */
  readonly key: string
  readonly query: Map<string, string>
  /** The request body as the operation must read it (signed, chunked, checksummed: ingest.ts). */
  readonly body: () => BodySpec
}

export type Handler = (c: OpContext) => unknown

/** One family's handlers, by operation name (routes.ts checks that every operation has one). */
export type Handlers = Partial<Record<OperationName, Handler>>

export const notImplemented = (what: string) => new S3Error('NotImplemented', `${what} is not implemented by Coffer`)

export const header = (request: Pick<FastifyRequest, 'headers'>, name: string): string | undefined => {
  const v = request.headers[name]
  return Array.isArray(v) ? v.join(',') : v
}

export const iso = (ms: number) => new Date(ms).toISOString()

export function xml(reply: FastifyReply, root: string, body: XmlNode): FastifyReply {
  return reply.type('application/xml').send(xmlDocument(root, body))
}

/** The owner of everything a tenant stores: the tenant (its id is the canonical user ID). */
export function owner(tenant: AuthenticatedTenant): XmlNode {
  return { ID: tenant.id, DisplayName: tenant.name }
}

export function intParam(query: Map<string, string>, name: string, def: number, max: number): number {
  const raw = query.get(name)
  if (raw === undefined || raw === '') return def
  if (!/^\d{1,10}$/.test(raw)) throw new S3Error('InvalidArgument', `${name} must be a non-negative integer`)
  return Math.min(Number(raw), max)
}

export function decodePath(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    throw new S3Error('InvalidArgument', 'The request URL is not correctly percent-encoded')
  }
}

/**
 * Write options Coffer does not implement. Ignoring them would pretend (a client asking for
 * encryption, a retention lock of a bucket without one or a colder storage class must not believe
 * it got one): 501, on every write that could carry them — PutObject, CopyObject whatever its
 * metadata directive, CreateMultipartUpload, UploadPart(Copy), CreateBucket (#24). ACLs
 * (x-amz-acl, x-amz-grant-*), object ownership, tags and object lock are read by the operations
 * that take them (../acl.ts, #26; services/tagging.ts; ../object-lock.ts, #25).
 */
export function refuseUnsupported(request: Pick<FastifyRequest, 'headers'>): void {
  // A value that is no canned ACL at all is the client's error (400), whatever else is refused.
  checkCannedAcl(header(request, 'x-amz-acl'))
  for (const name of Object.keys(request.headers)) {
    const value = header(request, name)
    if (
      // Server-side encryption's headers are checkSseHeader's (ops/encryption.ts) and the operations' (../sse.ts).
      name === 'x-amz-website-redirect-location' ||
      (name === 'x-amz-storage-class' && value !== 'STANDARD')
    ) {
      throw notImplemented(`The ${name} header`)
    }
  }
}

/**
 * The stored attributes of an object written with these request headers (user metadata at most 2
 * KB, as AWS), its canned ACL included (`ownerId` is the bucket owner's, whom grants may name).
 */
export function objectInput(request: Pick<FastifyRequest, 'headers' | 's3ContentType'>, ownerId: string): ObjectInput {
  refuseUnsupported(request)
  const acl = requestedAcl(request, ownerId)
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
  // `private` is every object's default: not stored (#26).
  if (acl !== undefined && acl !== 'private' && acl !== 'bucket-owner-full-control' && acl !== 'bucket-owner-read') out.acl = acl
  const lock = lockHeaders(request)
  if (lock) out.lock = lock
  const tagging = header(request, 'x-amz-tagging')
  if (tagging !== undefined) {
    const tags = tagsOrError(() => parseTagQuery(tagging))
    if (Object.keys(tags).length > 0) out.tags = tags
  }
  return out
}

/**
 * A write asking for an object lock (x-amz-object-lock-*) of a bucket without one: InvalidRequest
 * before any byte is read or an upload begins, as AWS (the commit checks again, under its lock, #25).
 */
export function checkLockRequest({ s3, tenant, bucket }: OpContext, input: ObjectInput): void {
  if (input.lock === undefined) return
  const w = s3.buckets.resolve(tenant, bucket)
  if (!s3.objectLock.enabled(w.id)) throw new S3Error('InvalidRequest', 'Bucket is missing Object Lock Configuration')
}

/** A tag set built by services/tagging.ts, its TagError answered as the S3 error of that code. */
export function tagsOrError(build: () => Tags): Tags {
  try {
    return build()
  } catch (err) {
    if (err instanceof TagError) throw new S3Error(err.code, err.message)
    throw err
  }
}
