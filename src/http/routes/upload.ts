import { Type } from '@sinclair/typebox'
import { AppError } from '../../errors'
import type { App } from '../types'
import type { Core } from '../../core'
import { PathId } from '../../contract/common'
import { FileSchema, HandshakeBody, HandshakeResponse, UploadQuery, WorkspaceHeader, fileView, handshakeView } from '../../contract/files'
import { withErrors } from '../responses'
import { bodyError, contentLength, mediaType, rawBodies } from '../upload-body'

/** Step one of an upload: the handshake (registered in the tenant-key scope). */
export async function uploadRequestRoutes(app: App, core: Core): Promise<void> {
  app.post(
    '/api/v1/upload/request',
    {
      schema: {
        tags: ['upload'],
        summary: 'Request an upload: reserves the declared size and returns a presigned PUT path',
        body: HandshakeBody,
        headers: WorkspaceHeader,
        response: withErrors({ 200: HandshakeResponse }, 403, 404, 413),
      },
    },
    async (request) => {
      const tenant = request.tenant!
      const { file, grant } = await core.uploads.handshake(tenant, request.body, request.headers['x-workspace-id'])
      return handshakeView(file, grant, tenant.allowedFileTypes)
    },
  )
}

/** An unauthenticated body larger than this is not read to its end: the connection is closed instead. */
const DRAIN_LIMIT_BYTES = 64 * 1024

/** Step two: the PUT of the bytes, authorised by the presigned URL's token. The body is never parsed. */
export async function uploadContentRoutes(app: App, core: Core): Promise<void> {
  // A malformed Content-Type must not be refused by Fastify before the handler runs, which would
  // leave the upload pending with its reservation held: the upload service judges it, fails the
  // upload, releases its reservation and says what was wrong.
  const sentContentType = rawBodies(app)
  app.put(
    '/api/v1/upload/:fileId',
    {
      schema: {
        tags: ['upload'],
        summary: 'Send the content of a requested upload (Content-Type: the declared type)',
        params: Type.Object({ fileId: PathId }),
        querystring: UploadQuery,
        response: withErrors({ 200: FileSchema }, 403, 404, 409, 413, 507),
      },
    },
    async (request, reply) => {
      const length = contentLength(request.headers['content-length'])
      try {
        const file = await core.uploads.receive({
          fileId: request.params.fileId,
          expires: request.query.expires,
          token: request.query.token,
          contentType: mediaType(sentContentType(request)),
          contentLength: length,
          body: request.raw,
          bodyError,
        })
        return fileView(file)
      } catch (err) {
        if (!request.raw.readableEnded) {
          if (err instanceof AppError && err.code === 'UNAUTHORIZED' && !(length !== undefined && length <= DRAIN_LIMIT_BYTES)) {
            // Nobody proved anything: a large (or unsized) body is not worth reading to its end
            // (a 10 GB Content-Length was drained for 7 s). `Connection: close` makes Node close
            // the connection once the answer is written (#12 item 10).
            reply.header('connection', 'close')
          } else {
            // Answered before the whole body arrived: the rest is read and discarded, so that the
            // answer reaches a client still sending (closing the connection under it could reset it
            // before it reads the answer); the request timeout bounds a client that sends forever.
            request.raw.resume()
          }
        }
        throw err
      }
    },
  )
}
