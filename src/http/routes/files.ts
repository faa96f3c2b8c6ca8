import fs from 'node:fs'
import path from 'node:path'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { App } from '../types'
import type { Core } from '../../core'
import { AppError, notFound } from '../../errors'
import { authenticateTenant } from '../auth'
import { PathId, SuccessResponse, withErrors } from '../schemas/common'
import { DownloadQuery, FileSchema, ListQuery, ListResponse, SignedUrlQuery, SignedUrlResponse, WorkspaceHeader } from '../schemas/files'
import { fileView } from '../../services/files'
import { contentDisposition } from '../../lib/content-disposition'
import { etagMatches, parseRange } from '../../lib/http-range'
import type { FileRecord } from '../../db/repos/files'
import { noteStreamed } from '../../lib/gc-pacer'

const FileParams = Type.Object({ fileId: PathId })

/** Downloads up to this size are read synchronously in one piece; larger ones stream. */
const SMALL_READ_BYTES = 64 * 1024

/** `length` bytes of `file` from `start`: open, read, close. */
function readSync(file: string, start: number, length: number): Buffer {
  const fd = fs.openSync(file, 'r')
  try {
    const buf = Buffer.allocUnsafe(length)
    let got = 0
    while (got < length) {
      const n = fs.readSync(fd, buf, got, length - got, start + got)
      if (n === 0) break
      got += n
    }
    if (got !== length) throw new Error(`stored content ${path.basename(file)} is shorter than its record`)
    return buf
  } finally {
    fs.closeSync(fd)
  }
}

/** Listing, reading, deleting and sharing files: tenant key only. */
export async function filesRoutes(app: App, core: Core): Promise<void> {
  app.get(
    '/api/v1/files',
    {
      schema: {
        tags: ['files'],
        summary: 'List files, newest first, with keyset pagination',
        querystring: ListQuery,
        headers: WorkspaceHeader,
        response: withErrors({ 200: ListResponse }, 404),
      },
    },
    async (request) => core.files.list(request.tenant!, request.query, request.headers['x-workspace-id']),
  )

  app.get(
    '/api/v1/files/:fileId',
    { schema: { tags: ['files'], summary: 'File metadata', params: FileParams, response: withErrors({ 200: FileSchema }, 404) } },
    async (request) => fileView(core.files.get(request.tenant!, request.params.fileId)),
  )

  app.delete(
    '/api/v1/files/:fileId',
    { schema: { tags: ['files'], summary: 'Soft-delete a file and release its quota', params: FileParams, response: withErrors({ 200: SuccessResponse }, 404) } },
    async (request) => {
      core.files.delete(request.tenant!, request.params.fileId)
      return { success: true }
    },
  )

  app.get(
    '/api/v1/files/:fileId/signed-url',
    {
      schema: {
        tags: ['files'],
        summary: 'A time-limited download URL that needs no Authorization header',
        params: FileParams,
        querystring: SignedUrlQuery,
        response: withErrors({ 200: SignedUrlResponse }, 404),
      },
    },
    async (request) => {
      const base = core.config.publicUrl ?? `${request.protocol}://${request.host}`
      return core.files.signedUrl(request.tenant!, request.params.fileId, request.query.expiresIn, base)
    },
  )
}

/** The download: tenant key or signed-URL parameters. */
export async function downloadRoutes(app: App, core: Core): Promise<void> {
  app.route({
    method: ['GET', 'HEAD'],
    url: '/api/v1/files/:fileId/download',
    schema: {
      tags: ['files'],
      summary: 'Download the content (Bearer key or signed URL); Range, If-None-Match and HEAD supported',
      params: FileParams,
      querystring: DownloadQuery,
      response: withErrors({}, 404, 416),
    },
    handler: async (request, reply) => {
      const { file, signedExpires } = authorizeDownload(core, request, request.params.fileId, request.query)
      const etag = `"${file.sha256}"`
      const size = file.sizeBytes
      reply.header('etag', etag)
      reply.header('accept-ranges', 'bytes')
      reply.header('x-content-type-options', 'nosniff')
      reply.header('content-security-policy', "default-src 'none'; sandbox")
      reply.header(
        'cache-control',
        signedExpires === undefined
          ? 'private, no-cache'
          : `private, max-age=${Math.max(0, Math.floor((signedExpires - core.clock.now()) / 1000))}`,
      )
      if (etagMatches(request.headers['if-none-match'], etag)) return reply.code(304).send()

      const ifRange = request.headers['if-range']
      const range = ifRange === undefined || ifRange === etag ? parseRange(request.headers.range, size) : ({ kind: 'full' } as const)
      if (range.kind === 'unsatisfiable') {
        reply.header('content-range', `bytes */${size}`)
        throw new AppError('RANGE_NOT_SATISFIABLE', `The range is outside the ${size}-byte content`, { size })
      }
      const start = range.kind === 'partial' ? range.start : 0
      const end = range.kind === 'partial' ? range.end : size - 1
      const length = end - start + 1
      const blobPath = core.store.pathOf(file.sha256!)
      function missing(err: unknown): never {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
          request.log.error({ fileId: file.id, sha256: file.sha256 }, 'stored content is missing')
          throw new AppError('FILE_NOT_FOUND', 'File content is not in storage')
        }
        throw err
      }
      const disposition = request.query.disposition ?? 'attachment'
      const answer = () => {
        reply
          .code(range.kind === 'partial' ? 206 : 200)
          .type(file.fileType)
          .header('content-length', length)
          .header('content-disposition', contentDisposition(file.originalName, disposition))
        if (range.kind === 'partial') reply.header('content-range', `bytes ${start}-${end}/${size}`)
      }
      if (request.method === 'HEAD' || length <= SMALL_READ_BYTES) {
        // Small content is read in one synchronous open/read/close (a few microseconds from the
        // page cache) instead of four thread-pool round trips (open, read, read to EOF, close),
        // each costing more main-thread time than the whole read: 4 KiB downloads/s went from
        // about 0.2x to about 0.9x of nginx's (#7). Like nginx, a cold-cache read blocks briefly.
        let body: Buffer
        try {
          body = readSync(blobPath, start, request.method === 'HEAD' ? 0 : length)
        } catch (err) {
          missing(err)
        }
        answer()
        noteStreamed(body.length)
        core.metrics.downloadBytes.inc(body.length)
        return reply.send(request.method === 'HEAD' ? undefined : body)
      }
      let fh: fs.promises.FileHandle
      try {
        fh = await fs.promises.open(blobPath, 'r')
      } catch (err) {
        missing(err)
      }
      answer()
      const stream = fh.createReadStream({ start, end, highWaterMark: 256 * 1024 })
      stream.on('data', (chunk: string | Buffer) => {
        noteStreamed(chunk.length)
        core.metrics.downloadBytes.inc(chunk.length)
      })
      return reply.send(stream)
    },
  })
}

function authorizeDownload(
  core: Core,
  request: FastifyRequest,
  fileId: string,
  query: { expires?: string; token?: string },
): { file: FileRecord; signedExpires?: number } {
  if (request.headers.authorization !== undefined) {
    const tenant = authenticateTenant(core.tenants, request)
    request.tenant = tenant
    return { file: core.files.downloadable(tenant, fileId) }
  }
  const { file, expires } = core.files.bySignedToken(fileId, query.expires, query.token)
  if (!file.sha256) throw notFound.file()
  return { file, signedExpires: expires }
}
