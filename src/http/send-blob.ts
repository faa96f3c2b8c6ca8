import fresh from 'fresh'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Readable } from 'node:stream'
import { AppError } from '../errors'
import type { ByteRange, OpenedBlob } from '../blobs/blob-store'
import { noteStreamed } from '../lib/heap-relief'
import { httpDateMs, ifMatch, parseRange } from './range'

/** What a front knows about the content it is about to send. */
export interface BlobResponse {
  /** Size of the whole content in bytes. */
  size: number
  /** The strong ETag, quoted. */
  etag: string
  /** Epoch ms. Sent as Last-Modified and used by If-Modified-Since, If-Unmodified-Since and If-Range. */
  lastModified?: number
  contentType: string
  /** The Content-Disposition value, when the front sends one. */
  disposition?: string
  /**
   * A range the front imposes (S3's partNumber: one part of the object), in place of the request's
   * Range header, which the front has refused beside it. Answered 206 like a requested range;
   * an empty one (`end < start`, an empty part) is answered 200 with no bytes.
   */
  range?: { start: number; end: number }
  /** Reads the content (or a range of it) once the request is known to need bytes. */
  open(range: ByteRange): Promise<OpenedBlob>
  /** Counts bytes as they are sent (metrics). */
  onBytes?: (bytes: number) => void
  /**
   * Headers that describe the content sent (S3's stored metadata, checksum, Content-Encoding …):
   * set on a 200 or 206 only, never on a 304, which carries no content (RFC 9110 §15.4.5). A 304
   * with `x-amz-checksum-*` made botocore ≥ 1.36 (checksum mode on every GetObject) crash instead
   * of raising its 304 error (#24).
   */
  contentHeaders?: Record<string, string | number>
}

/**
 * The one download renderer: every content download, whichever front serves it, goes through
 * here. It sets ETag, Accept-Ranges and Last-Modified, evaluates the preconditions in the order
 * of RFC 9110 §13.2.2 (If-Match, If-Unmodified-Since, then If-None-Match / If-Modified-Since via
 * `fresh`, then If-Range), honours one byte range, and answers 200, 206 or 304, HEAD included.
 * `fresh` is handed the two validators alone, not the request's Cache-Control: it answers "stale"
 * to `Cache-Control: no-cache`, a rule for caches (RFC 9111 §5.2.1.4: revalidate with the origin),
 * while the origin evaluates the conditions whatever the request's cache directives (RFC 9110
 * §13.2.1). Every fetch() with a conditional header sends `no-cache` (Fetch, HTTP-network-or-cache
 * fetch), so without this it never saw a 304 (#24). What `fresh` does is otherwise right: the
 * If-None-Match list with weak comparison and `*`, If-Modified-Since only without it.
 * Headers the front wants on every answer (caching, security) it sets on `reply` before calling.
 *
 * Errors are thrown, never rendered: 412 PRECONDITION_FAILED and 416 RANGE_NOT_SATISFIABLE as
 * AppErrors (with `Content-Range: bytes *\/size` already set for a 416), and whatever `open`
 * throws (BlobNotFoundError) as is, so each front answers in its own shape (JSON envelope, S3 XML).
 */
export async function sendBlob(request: FastifyRequest, reply: FastifyReply, blob: BlobResponse): Promise<FastifyReply> {
  const { headers } = request
  const { size, etag, lastModified } = blob
  reply.header('etag', etag)
  reply.header('accept-ranges', 'bytes')
  const lastModifiedHeader = lastModified === undefined ? undefined : new Date(lastModified).toUTCString()
  if (lastModifiedHeader !== undefined) reply.header('last-modified', lastModifiedHeader)

  const precondition = headers['if-match']
  if (typeof precondition === 'string' ? !ifMatch(precondition, etag) : isModifiedSince(headers['if-unmodified-since'], lastModified)) {
    throw new AppError('PRECONDITION_FAILED', 'A precondition (If-Match or If-Unmodified-Since) does not hold', {})
  }
  const validators = { 'if-none-match': headers['if-none-match'], 'if-modified-since': headers['if-modified-since'] }
  if (
    (validators['if-none-match'] !== undefined || validators['if-modified-since'] !== undefined) &&
    fresh(validators, { etag, 'last-modified': lastModifiedHeader })
  ) {
    return reply.code(304).send()
  }

  const ifRange = headers['if-range']
  const range = blob.range
    ? blob.range.end < blob.range.start
      ? ({ kind: 'empty', start: blob.range.start } as const)
      : ({ kind: 'partial', ...blob.range } as const)
    : typeof ifRange !== 'string' || ifRangeHolds(ifRange, etag, lastModified)
      ? parseRange(headers.range, size)
      : ({ kind: 'full' } as const)
  if (range.kind === 'unsatisfiable') {
    reply.header('content-range', `bytes */${size}`)
    throw new AppError('RANGE_NOT_SATISFIABLE', `The range is outside the ${size}-byte content`, { size })
  }
  const start = range.kind === 'partial' || range.kind === 'empty' ? range.start : 0
  const end = range.kind === 'partial' ? range.end : range.kind === 'empty' ? range.start - 1 : size - 1
  const head = request.method === 'HEAD'
  // HEAD still opens (no bytes): missing content answers the same error as a GET would.
  const opened = await blob.open(head ? { start, end: start - 1 } : { start, end })

  reply
    .code(range.kind === 'partial' ? 206 : 200)
    .type(blob.contentType)
    .header('content-length', end - start + 1)
  if (blob.disposition !== undefined) reply.header('content-disposition', blob.disposition)
  for (const [name, value] of Object.entries(blob.contentHeaders ?? {})) reply.header(name, value)
  if (range.kind === 'partial') reply.header('content-range', `bytes ${start}-${end}/${size}`)
  const { body } = opened
  if (Buffer.isBuffer(body)) {
    noteStreamed(body.length)
    blob.onBytes?.(body.length)
    return reply.send(head ? undefined : body)
  }
  countChunks(body, blob.onBytes)
  return reply.send(body)
}

function countChunks(stream: Readable, onBytes: ((bytes: number) => void) | undefined): void {
  stream.on('data', (chunk: Buffer) => {
    noteStreamed(chunk.length)
    onBytes?.(chunk.length)
  })
}

/** If-Unmodified-Since fails when the content changed after the given date (RFC 9110 §13.1.4). */
function isModifiedSince(header: string | undefined, lastModified: number | undefined): boolean {
  if (header === undefined || lastModified === undefined) return false
  const since = httpDateMs(header)
  return !Number.isNaN(since) && lastModified - (lastModified % 1000) > since
}

/** If-Range (RFC 9110 §13.1.5): an ETag matches strongly; a date matches Last-Modified exactly. */
function ifRangeHolds(header: string, etag: string, lastModified: number | undefined): boolean {
  if (header.startsWith('"') || header.startsWith('W/')) return header === etag
  return lastModified !== undefined && httpDateMs(header) === lastModified - (lastModified % 1000)
}
