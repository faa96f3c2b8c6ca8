import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Core } from '../core'
import type { ObjectPart, ObjectRow } from '../db/repos/objects'
import { sendBlob } from '../http/send-blob'
import { etagOf } from './objects'
import { versionIdHeader } from './versions'
import { sendExpiration } from './lifecycle'
import { openSealedObject } from './sealed-objects'
import { reportKey, segmentsOf, type SseKey } from './sse'

const OVERRIDES: [string, string][] = [
  ['response-content-language', 'content-language'],
  ['response-expires', 'expires'],
  ['response-cache-control', 'cache-control'],
  ['response-content-encoding', 'content-encoding'],
]

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(',') : v)

/**
 * GetObject / HeadObject through the one blob renderer (http/send-blob.ts): conditionals, one
 * byte range, HEAD. This adds what S3 returns beside the bytes: stored metadata and headers,
 * `response-*` overrides (S3 honours them on signed requests only, and every request here is),
 * and the stored checksum when asked with `x-amz-checksum-mode: ENABLED`. The renderer's errors
 * (412, 416, missing content) reach the S3 error handler and are answered in S3's XML.
 *
 * With `part` (GetObject/HeadObject with partNumber) only that part's bytes are sent, as AWS
 * answers it: 206 with the part's Content-Range, the whole object's ETag, and for a checksummed
 * multipart upload the part's own checksum (which the SDKs verify against the bytes).
 */
export async function sendObject(
  core: Core,
  request: FastifyRequest,
  reply: FastifyReply,
  o: ObjectRow,
  query: Map<string, string>,
  part?: ObjectPart,
  /** The key the object is sealed under (SSE-C, SSE-KMS; ./sse.ts readKey), which opens it. */
  key?: SseKey,
): Promise<FastifyReply> {
  const info = o.info
  reportKey(reply, key)
  // On every answer, 304 included: the validators (sendBlob) and what RFC 9110 §15.4.5 requires a
  // 304 to repeat of its 200, Cache-Control and Expires; the rest describes the bytes and goes
  // with them only (contentHeaders, #24).
  reply.header('x-content-type-options', 'nosniff')
  reply.header('content-security-policy', 'sandbox')
  // Which version this is (#25), on a 304 too: it names the representation the validators are of.
  const versionId = versionIdHeader(o)
  if (versionId !== undefined) reply.header('x-amz-version-id', versionId)
  // When a lifecycle rule will expire it (#25): for the current object, which rules expire.
  if (!query.has('versionId')) sendExpiration(core.lifecycle, reply, o)
  if (info?.cacheControl) reply.header('cache-control', info.cacheControl)
  if (info?.expires) reply.header('expires', info.expires)
  const content: Record<string, string | number> = {}
  for (const [name, value] of Object.entries(info?.meta ?? {})) content[`x-amz-meta-${name}`] = value
  if (info?.contentEncoding) content['content-encoding'] = info.contentEncoding
  if (info?.contentLanguage) content['content-language'] = info.contentLanguage
  if (info?.parts !== undefined && part) content['x-amz-mp-parts-count'] = info.parts
  // GetObject's TagCount (AWS): present when the object has tags.
  const tagCount = Object.keys(info?.tags ?? {}).length
  if (tagCount > 0) content['x-amz-tagging-count'] = tagCount
  for (const [param, name] of OVERRIDES) {
    const v = query.get(param)
    if (v === undefined) continue
    if (name === 'cache-control' || name === 'expires') reply.header(name, v)
    else content[name] = v
  }
  // A checksum describes the whole object (or the part): not sent with a range.
  if (info?.checksum && request.headers.range === undefined && one(request.headers['x-amz-checksum-mode'])?.toUpperCase() === 'ENABLED') {
    const multipart = info.parts !== undefined
    const value = !part ? info.checksum.value : multipart ? part.checksum : part.partNumber === 1 ? info.checksum.value : null
    if (value !== null) {
      content[`x-amz-checksum-${info.checksum.algorithm}`] = value
      // With partNumber too, the object's type (as ceph/s3-tests expect of a part's checksum).
      content['x-amz-checksum-type'] = info.checksum.type ?? 'FULL_OBJECT'
    }
  }
  const disposition = query.get('response-content-disposition') ?? info?.contentDisposition
  return sendBlob(request, reply, {
    size: o.size,
    etag: etagOf(o),
    lastModified: o.completedAt,
    contentType: query.get('response-content-type') ?? info?.contentType ?? o.fileType,
    ...(disposition !== undefined ? { disposition } : {}),
    ...(part ? { range: { start: part.offset, end: part.offset + part.size - 1 } } : {}),
    open: (range) => (key ? openSealedObject(core.store, o.sha256, segmentsOf(key.stored, o.size), key, range) : core.store.open(o.sha256, range)),
    onBytes: (bytes) => core.metrics.downloadBytes.inc(bytes),
    contentHeaders: content,
  })
}
