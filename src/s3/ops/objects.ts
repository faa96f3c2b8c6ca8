import type { FastifyRequest } from 'fastify'
import type { ObjectInfo, ObjectRow } from '../../db/repos/objects'
import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, listOf, malformed, parseXml, textOf } from '../xml'
import { etagOf, type DeleteConditions } from '../objects'
import { MAX_PARTS } from '../multipart'
import { sendObject } from '../render'
import { copySourceHolds } from '../conditions'
import { copySourceOf } from '../copy-source'
import { checkLockRequest, header, iso, objectInput, refuseUnsupported, xml, type Handlers, type OpContext } from './context'
import { versionIdHeader } from '../versions'
import { lockHeaders, lockResponseHeaders } from '../object-lock'
import { sendExpiration } from '../lifecycle'
import type { FastifyReply } from 'fastify'

/** `x-amz-version-id` of an object just written or read, in a bucket whose versioning was ever configured (#25). */
function versionHeader(reply: FastifyReply, o: ObjectRow, name = 'x-amz-version-id', written = false): void {
  const id = versionIdHeader(o, written)
  if (id !== undefined) reply.header(name, id)
}
import { parseTagQuery } from '../../services/tagging'
import { COPY_SOURCE_CUSTOMER, hasCustomerHeaders, readKey, reportKey, writeKey } from '../sse'
import { tagsOrError } from './context'

/** Objects: read, write, copy, delete, describe. */
export const objectHandlers = {
  GetObject: getOrHead,
  HeadObject: getOrHead,

  async PutObject(c) {
    const { core, s3, tenant, bucket, key, request, reply, body } = c
    const input = objectInput(request, tenant.id)
    checkLockRequest(c, input)
    const sse = writeKey(request, core, core.bucketEncryption.get(s3.buckets.resolve(tenant, bucket).id), tenant.id)
    const { etag, checksum, row } = await s3.objects.put(
      tenant,
      bucket,
      key,
      body(),
      input,
      { ifMatch: header(request, 'if-match'), ifNoneMatch: header(request, 'if-none-match') },
      sse,
    )
    reportKey(reply, sse)
    reply.header('etag', etag)
    versionHeader(reply, row, 'x-amz-version-id', true)
    sendExpiration(core.lifecycle, reply, row)
    if (checksum) reply.header(`x-amz-checksum-${checksum.algorithm}`, checksum.value)
    return reply.send()
  },

  async CopyObject(c) {
    const { core, s3, tenant, bucket, key, request, reply } = c
    const from = copySource(request, tenant.id)
    const directive = (header(request, 'x-amz-metadata-directive') ?? 'COPY').toUpperCase()
    if (directive !== 'COPY' && directive !== 'REPLACE') throw new S3Error('InvalidArgument', 'Unknown metadata directive.')
    // The copy's own encryption (#27): the request's, else the destination bucket's default.
    const sse = writeKey(request, core, core.bucketEncryption.get(s3.buckets.resolve(tenant, bucket).id), tenant.id)
    const changesEncryption =
      sse !== undefined || header(request, 'x-amz-server-side-encryption') !== undefined || hasCustomerHeaders(request, COPY_SOURCE_CUSTOMER)
    // Copying a version of the key over it is how a version is restored (AWS allows it), and so is
    // changing its encryption.
    if (directive === 'COPY' && !changesEncryption && from.bucket === bucket && from.key === key && from.versionId === undefined) {
      throw new S3Error(
        'InvalidRequest',
        "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
      )
    }
    // The COPY directive keeps the source's metadata, not the request's options: those are refused
    // as under REPLACE, never silently dropped (#24).
    refuseUnsupported(request)
    // An ACL is never copied: the copy has the one this request asks for (AWS), private by default.
    const input = objectInput(request, tenant.id)
    const info: ObjectInfo | { copy: true; acl?: string } =
      directive === 'REPLACE' ? { ...input, etag: '' } : { copy: true, ...(input.acl ? { acl: input.acl } : {}) }
    const lock = lockHeaders(request)
    checkLockRequest(c, lock ? { contentType: '', meta: {}, lock } : { contentType: '', meta: {} })
    const tagging = (header(request, 'x-amz-tagging-directive') ?? 'COPY').toUpperCase()
    if (tagging !== 'COPY' && tagging !== 'REPLACE') throw new S3Error('InvalidArgument', 'Unknown tagging directive.')
    // REPLACE: the request's x-amz-tagging (none: no tags), read whatever the metadata directive.
    const tags = tagging === 'COPY' ? 'copy' : tagsOrError(() => parseTagQuery(header(request, 'x-amz-tagging') ?? ''))
    const conditions = { ifMatch: header(request, 'if-match'), ifNoneMatch: header(request, 'if-none-match') }
    // A source or a copy sealed under a key of its own cannot share content: re-sealed (#27).
    const sourceKey = (o: ObjectRow) => readKey(request, o.info?.sse, core, COPY_SOURCE_CUSTOMER)
    if (sse !== undefined || hasCustomerHeaders(request, COPY_SOURCE_CUSTOMER) || sealedSource(c, from)) {
      const { row, source } = await s3.objects.copySealed(tenant, from, { bucket, key }, info, tags, copyConditions(request), conditions, lock, sourceKey, sse)
      versionHeader(reply, row, 'x-amz-version-id', true)
      versionHeader(reply, source, 'x-amz-copy-source-version-id')
      reportKey(reply, sse)
      return xml(reply, 'CopyObjectResult', { ETag: etagOf(row), LastModified: iso(row.completedAt) })
    }
    // The destination's own conditions are honoured, as AWS's CopyObject does, never ignored (#24).
    const { row, source } = s3.objects.copy(tenant, from, { bucket, key }, info, tags, copyConditions(request), conditions, lock)
    versionHeader(reply, row, 'x-amz-version-id', true)
    versionHeader(reply, source, 'x-amz-copy-source-version-id')
    return xml(reply, 'CopyObjectResult', { ETag: etagOf(row), LastModified: iso(row.completedAt) })
  },

  DeleteObject({ s3, tenant, bucket, key, query, request, reply }) {
    const outcome = s3.objects.delete(tenant, bucket, key, query.get('versionId'), {
      ifMatch: header(request, 'if-match'),
      lastModified: header(request, 'x-amz-if-match-last-modified-time'),
      size: header(request, 'x-amz-if-match-size'),
      bypassGovernance: header(request, 'x-amz-bypass-governance-retention')?.toLowerCase() === 'true',
    })
    // A marker added, or a version deleted (a marker or not): as AWS, x-amz-delete-marker and x-amz-version-id.
    if (outcome.deleteMarker) reply.header('x-amz-delete-marker', 'true')
    if (outcome.versionId !== undefined) reply.header('x-amz-version-id', outcome.versionId)
    return reply.code(204).send()
  },

  async DeleteObjects({ s3, tenant, bucket, request, reply, body }) {
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
    const items = objects.map((o) => ({
      key: textOf(o, 'Key'),
      versionId: textOf(o, 'VersionId'),
      ifMatch: textOf(o, 'ETag'),
      lastModified: textOf(o, 'LastModifiedTime'),
      size: textOf(o, 'Size'),
    }))
    if (items.some((i) => i.key === undefined)) throw malformed()
    const quiet = textOf(del, 'Quiet') === 'true'
    const bypassGovernance = header(request, 'x-amz-bypass-governance-retention')?.toLowerCase() === 'true'
    for (const i of items) (i as DeleteConditions).bypassGovernance = bypassGovernance
    const result = s3.objects.deleteVersions(tenant, bucket, items as ({ key: string } & DeleteConditions & { versionId?: string | undefined })[])
    request.log.debug({ deleted: result.deleted.length }, 'objects deleted')
    // A logged bucket's access log records each key deleted too (access-log.ts).
    if (request.s3LogSource !== undefined)
      request.s3BatchDeleted = result.deleted.map((d) => ({ key: d.key, versionId: d.versionId ?? d.deleteMarkerVersionId }))
    return xml(reply, 'DeleteResult', {
      Deleted: quiet
        ? []
        : result.deleted.map((d) => ({
            Key: d.key,
            ...(d.versionId !== undefined ? { VersionId: d.versionId } : {}),
            ...(d.deleteMarker ? { DeleteMarker: true } : {}),
            ...(d.deleteMarkerVersionId !== undefined ? { DeleteMarkerVersionId: d.deleteMarkerVersionId } : {}),
          })),
      Error: result.errors.map((e) => ({ Key: e.key, ...(e.versionId !== undefined ? { VersionId: e.versionId } : {}), Code: e.code, Message: e.message })),
    })
  },

  /** GetObjectAttributes: what the object is, without its bytes (S3 API reference). */
  GetObjectAttributes(c) {
    const { s3, tenant, bucket, key, query, request, reply } = c
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
    const { lastModified, body, object } = s3.objects.attributes(tenant, bucket, key, {
      attributes,
      maxParts: headerInt('x-amz-max-parts', 1000, 1000),
      partNumberMarker: headerInt('x-amz-part-number-marker', 0, MAX_PARTS),
      versionId: query.get('versionId'),
    })
    // An SSE-C object describes itself only to whoever brings its key, as GetObject (#27).
    reportKey(reply, readKey(request, object.info?.sse, c.core))
    reply.header('last-modified', new Date(lastModified).toUTCString())
    versionHeader(reply, object)
    return xml(reply, 'GetObjectAttributesResponse', body)
  },
} satisfies Handlers

/** GetObject and HeadObject: the object, or one part of it (`partNumber`). */
function getOrHead(c: OpContext) {
  const { core, s3, tenant, bucket, key, query: q, request, reply } = c
  const versionId = q.get('versionId')
  const partNumber = q.get('partNumber')
  if (partNumber === undefined) {
    const object = s3.objects.head(tenant, bucket, key, versionId)
    lockHeadersOf(c, object)
    return sendObject(core, request, reply, object, q, undefined, readKey(request, object.info?.sse, core))
  }
  if (!/^\d{1,5}$/.test(partNumber) || Number(partNumber) < 1 || Number(partNumber) > MAX_PARTS) {
    throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive')
  }
  if (request.headers.range !== undefined) throw new S3Error('InvalidRequest', 'Cannot specify both Range header and partNumber query parameter')
  const { object, part } = s3.objects.headPart(tenant, bucket, key, Number(partNumber), versionId)
  lockHeadersOf(c, object)
  return sendObject(core, request, reply, object, q, part, readKey(request, object.info?.sse, core))
}

/**
 * `x-amz-copy-source`: `[/]bucket/key[?versionId=…]`, URL-encoded. A copy runs within the tenant
 * whose bucket it writes (authorize.ts checked the requester may read the source): a source named
 * `<tenant-id>:<bucket>` (or RGW's `:<bucket>`) is that tenant's bucket, and another tenant's is 501.
 */
export function copySource(request: FastifyRequest, tenantId: string): { bucket: string; key: string; versionId?: string } {
  const { query: _query, ...source } = copySourceOf(header(request, 'x-amz-copy-source')!)
  const colon = source.bucket.indexOf(':')
  if (colon < 0) return source
  const qualifier = source.bucket.slice(0, colon).toLowerCase()
  if (qualifier !== '' && qualifier !== tenantId) throw new S3Error('NotImplemented', 'A copy between buckets of two tenants is not implemented by Coffer')
  return { ...source, bucket: source.bucket.slice(colon + 1) }
}

/** Whether the copy source is sealed under a key of its own (SSE-C, SSE-KMS): the copy must re-seal it. */
function sealedSource({ s3, tenant }: OpContext, from: { bucket: string; key: string; versionId?: string }): boolean {
  try {
    return s3.objects.head(tenant, from.bucket, from.key, from.versionId).info?.sse !== undefined
  } catch {
    // A missing source is answered by the copy itself.
    return false
  }
}

/** x-amz-copy-source-if-* preconditions, as GetObject's conditionals but answered 412. */
export function copyConditions(request: FastifyRequest) {
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

/** GET/HEAD of a version report its object lock (#25): x-amz-object-lock-mode, -retain-until-date, -legal-hold. */
function lockHeadersOf({ s3, reply }: OpContext, o: ObjectRow): void {
  if (o.versionId === undefined || !s3.objectLock.enabled(o.workspaceId)) return
  reply.headers(lockResponseHeaders(s3.objectLock.get(o.workspaceId, o.key, o.versionId)))
}
