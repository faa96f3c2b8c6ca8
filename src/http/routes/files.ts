import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { App } from '../types'
import type { Core } from '../../core'
import { AppError, validationError } from '../../errors'
import { authenticateTenant } from '../auth'
import { PathId, SuccessResponse } from '../../contract/common'
import {
  DownloadQuery,
  FileSchema,
  ListQuery,
  ListResponse,
  SignedUrlQuery,
  SignedUrlResponse,
  WorkspaceHeader,
  fileView,
  signedUrlView,
} from '../../contract/files'
import { withErrors } from '../responses'
import { dispositionFor } from '../../lib/content-disposition'
import type { FileRecord } from '../../db/repos/files'
import { BlobNotFoundError } from '../../blobs/blob-store'
import { sendBlob } from '../send-blob'
import { openSealedObject } from '../../s3/sealed-objects'
import { segmentsOf, serverKey } from '../../s3/sse'

const FileParams = Type.Object({ fileId: PathId })

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
      config: { inputPointer: '/query' },
    },
    async (request) => {
      const type = request.query.fileType
      if (type !== undefined && !core.fileTypes.supports(type)) throw validationError('/fileType', `must be one of: ${core.fileTypes.describe()}`)
      const page = core.files.list(request.tenant!, request.query, request.headers['x-workspace-id'])
      return { files: page.files.map(fileView), nextCursor: page.nextCursor, total: page.total }
    },
  )

  app.get(
    '/api/v1/files/:fileId',
    { schema: { tags: ['files'], summary: 'File metadata', params: FileParams, response: withErrors({ 200: FileSchema }, 404) } },
    async (request) => fileView(core.files.get(request.tenant!, request.params.fileId)),
  )

  app.delete(
    '/api/v1/files/:fileId',
    {
      schema: { tags: ['files'], summary: 'Soft-delete a file and release its quota', params: FileParams, response: withErrors({ 200: SuccessResponse }, 404) },
    },
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
      const { expiresIn } = request.query
      const { file, grant } = core.files.share(request.tenant!, request.params.fileId, expiresIn)
      const base = core.config.publicUrl ?? `${request.protocol}://${request.host}`
      return signedUrlView(file, grant, base, expiresIn)
    },
  )
}

/** Longest life of a presigned store URL a redirected download hands out. */
const REDIRECT_MAX_SECONDS = 300

/** The download: tenant key or signed-URL parameters. */
export async function downloadRoutes(app: App, core: Core): Promise<void> {
  const countBytes = (bytes: number) => core.metrics.downloadBytes.inc(bytes)
  app.route({
    method: ['GET', 'HEAD'],
    url: '/api/v1/files/:fileId/download',
    schema: {
      tags: ['files'],
      summary: 'Download the content (Bearer key or signed URL); Range, If-None-Match and HEAD supported',
      params: FileParams,
      querystring: DownloadQuery,
      response: withErrors({}, 404, 409, 412, 416),
    },
    handler: async (request, reply) => {
      const { file, signedExpires } = authorizeDownload(core, request, request.params.fileId, request.query)
      const sha256 = file.sha256!
      reply.header('x-content-type-options', 'nosniff')
      reply.header('content-security-policy', "default-src 'none'; sandbox")
      reply.header(
        'cache-control',
        signedExpires === undefined ? 'private, no-cache' : `private, max-age=${Math.max(0, Math.floor((signedExpires - core.clock.now()) / 1000))}`,
      )
      // Inline only for types that run nothing (#24): an S3 object may be text/html or SVG.
      const disposition = dispositionFor(file.originalName, file.fileType, request.query.disposition)
      // An S3 object sealed under a key of its own (#27): the ring's key opens an SSE-KMS one,
      // Coffer's SSE-S3 key an SSE-S3 one; the customer's key of an SSE-C one is only ever in an
      // S3 request, so the API cannot read it.
      const sse = file.workspaceId ? core.s3.objects.sealedInfo(file.id) : undefined
      if (sse?.type === 'C') {
        throw new AppError('CONFLICT', 'This file is an S3 object encrypted with a customer-provided key (SSE-C): only an S3 GetObject with that key reads it')
      }
      const key = sse ? serverKey(core, sse) : undefined
      if (sse?.type === 'KMS' && !key) {
        // A restart with a ring without that key: refused in the API's envelope (S3's front answers 403).
        throw new AppError('CONFLICT', `This file is sealed under the KMS key ${JSON.stringify(sse.keyId)}, which the server's key ring does not hold`, {
          field: 'encryption',
          keyId: sse.keyId,
        })
      }
      if (key === undefined && signedExpires !== undefined && core.config.blobS3RedirectDownloads && core.store.presign && request.method === 'GET') {
        // The bytes come from the store itself, valid for what is left of the signed URL (at most
        // 5 minutes): Coffer is off the data path (see README, S3-compatible object storage).
        const ttl = Math.max(1, Math.min(REDIRECT_MAX_SECONDS, Math.floor((signedExpires - core.clock.now()) / 1000)))
        const location = await core.store.presign(sha256, ttl, file.fileType, disposition)
        return reply.code(302).header('location', location).header('cache-control', 'no-store').send()
      }
      try {
        return await sendBlob(request, reply, {
          size: file.sizeBytes,
          // The plaintext's SHA-256 where it is recorded (an API upload sealed under a key of its own).
          etag: `"${sse?.sha256 ?? sha256}"`,
          contentType: file.fileType,
          disposition,
          open: (range) => (key ? openSealedObject(core.store, sha256, segmentsOf(sse!, file.sizeBytes), key, range) : core.store.open(sha256, range)),
          onBytes: countBytes,
        })
      } catch (err) {
        if (!(err instanceof BlobNotFoundError)) throw err
        request.log.error({ fileId: file.id, sha256 }, 'stored content is missing')
        throw new AppError('FILE_NOT_FOUND', 'File content is not in storage')
      }
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
  return { file, signedExpires: expires }
}
