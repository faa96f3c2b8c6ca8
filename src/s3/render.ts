import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Core } from '../core'
import type { ObjectRow } from '../db/repos/objects'
import { openBlob, readBlobSync } from '../blobs/read'
import { parseRange } from '../lib/http-range'
import { noteStreamed } from '../lib/gc-pacer'
import { S3Error } from './errors'
import { etagOf } from './objects'

/** Reads up to this size are answered from one synchronous read, as the API's downloads (#7). */
const SMALL_READ_BYTES = 64 * 1024

export interface Conditions {
  ifMatch: string | undefined
  ifNoneMatch: string | undefined
  ifModifiedSince: string | undefined
  ifUnmodifiedSince: string | undefined
}

const stripTag = (t: string) => t.trim().replace(/^W\//, '')

function tagListMatches(header: string, etag: string): boolean {
  if (header.trim() === '*') return true
  return header.split(',').some((t) => stripTag(t) === etag || stripTag(t) === etag.replace(/"/g, ''))
}

/**
 * RFC 9110 §13.2.2 order, as S3 applies it: If-Match (else If-Unmodified-Since) may fail the
 * request (412); If-None-Match (else If-Modified-Since) may make it a 304.
 */
export function evaluateConditions(c: Conditions, etag: string, modifiedMs: number): 'ok' | 'failed' | 'not-modified' {
  const modified = Math.floor(modifiedMs / 1000) * 1000
  if (c.ifMatch !== undefined) {
    if (!tagListMatches(c.ifMatch, etag)) return 'failed'
  } else if (c.ifUnmodifiedSince !== undefined) {
    const t = Date.parse(c.ifUnmodifiedSince)
    if (!Number.isNaN(t) && modified > t) return 'failed'
  }
  if (c.ifNoneMatch !== undefined) {
    if (tagListMatches(c.ifNoneMatch, etag)) return 'not-modified'
  } else if (c.ifModifiedSince !== undefined) {
    const t = Date.parse(c.ifModifiedSince)
    if (!Number.isNaN(t) && modified <= t) return 'not-modified'
  }
  return 'ok'
}

const OVERRIDES: [string, string][] = [
  ['response-content-type', 'content-type'],
  ['response-content-language', 'content-language'],
  ['response-expires', 'expires'],
  ['response-cache-control', 'cache-control'],
  ['response-content-disposition', 'content-disposition'],
  ['response-content-encoding', 'content-encoding'],
]

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(',') : v)

/** GetObject / HeadObject: headers, conditionals, one byte range, `response-*` overrides, streamed body. */
export async function sendObject(core: Core, request: FastifyRequest, reply: FastifyReply, o: ObjectRow, query: Map<string, string>): Promise<FastifyReply> {
  const etag = etagOf(o)
  const info = o.info
  reply.header('etag', etag)
  reply.header('last-modified', new Date(o.completedAt).toUTCString())
  reply.header('accept-ranges', 'bytes')
  reply.header('x-content-type-options', 'nosniff')
  reply.header('content-security-policy', 'sandbox')
  const outcome = evaluateConditions(
    { ifMatch: one(request.headers['if-match']), ifNoneMatch: one(request.headers['if-none-match']), ifModifiedSince: one(request.headers['if-modified-since']), ifUnmodifiedSince: one(request.headers['if-unmodified-since']) },
    etag,
    o.completedAt,
  )
  if (outcome === 'failed') throw new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', { Condition: 'If-Match' })
  if (outcome === 'not-modified') return reply.code(304).send()

  reply.header('content-type', info?.contentType ?? o.fileType)
  for (const [name, value] of Object.entries(info?.meta ?? {})) reply.header(`x-amz-meta-${name}`, value)
  if (info?.cacheControl) reply.header('cache-control', info.cacheControl)
  if (info?.contentDisposition) reply.header('content-disposition', info.contentDisposition)
  if (info?.contentEncoding) reply.header('content-encoding', info.contentEncoding)
  if (info?.contentLanguage) reply.header('content-language', info.contentLanguage)
  if (info?.expires) reply.header('expires', info.expires)
  if (info?.parts !== undefined && query.get('partNumber') !== undefined) reply.header('x-amz-mp-parts-count', info.parts)
  for (const [param, name] of OVERRIDES) {
    const v = query.get(param)
    if (v !== undefined) reply.header(name, v)
  }

  const size = o.size
  const ifRange = one(request.headers['if-range'])
  const rangeHeader = one(request.headers.range)
  const range = ifRange === undefined || stripTag(ifRange) === etag ? parseRange(rangeHeader, size) : ({ kind: 'full' } as const)
  if (range.kind === 'unsatisfiable') {
    throw new S3Error('InvalidRange', 'The requested range is not satisfiable', { RangeRequested: rangeHeader ?? '', ActualObjectSize: String(size) })
  }
  const start = range.kind === 'partial' ? range.start : 0
  const end = range.kind === 'partial' ? range.end : size - 1
  const length = Math.max(0, end - start + 1)
  if (range.kind === 'partial') reply.code(206).header('content-range', `bytes ${start}-${end}/${size}`)
  else if (info?.checksum && one(request.headers['x-amz-checksum-mode'])?.toUpperCase() === 'ENABLED') {
    reply.header(`x-amz-checksum-${info.checksum.algorithm}`, info.checksum.value)
  }
  reply.header('content-length', length)
  if (request.method === 'HEAD') return reply.send()
  if (length === 0) return reply.send('')
  function missing(err: unknown): never {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') request.log.error({ fileId: o.fileId, sha256: o.sha256 }, 'stored content is missing')
    throw err
  }
  if (length <= SMALL_READ_BYTES) {
    let buf: Buffer
    try {
      buf = readBlobSync(core.store, o.sha256, start, length)
    } catch (err) {
      missing(err)
    }
    noteStreamed(buf.length)
    core.metrics.downloadBytes.inc(buf.length)
    return reply.send(buf)
  }
  const stream = openBlob(core.store, o.sha256, { start, end })
  await new Promise<void>((resolve, reject) => {
    stream.once('open', () => resolve())
    stream.once('error', reject)
  }).catch(missing)
  stream.on('data', (chunk: string | Buffer) => {
    noteStreamed(chunk.length)
    core.metrics.downloadBytes.inc(chunk.length)
  })
  return reply.send(stream)
}
