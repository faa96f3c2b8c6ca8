import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { PathId } from '../../contract/common'
import { FileSchema, HandshakeBody, HandshakeResponse, UploadQuery, WorkspaceHeader, fileView, handshakeView } from '../../contract/files'
import { withErrors } from '../responses'
import { bodyError, contentLength, mediaType } from '../upload-body'

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

/** Step two: the PUT of the bytes, authorised by the presigned URL's token. The body is never parsed. */
export async function uploadContentRoutes(app: App, core: Core): Promise<void> {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))
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
    async (request) => {
      try {
        const file = await core.uploads.receive({
          fileId: request.params.fileId,
          expires: request.query.expires,
          token: request.query.token,
          contentType: mediaType(request.headers['content-type']),
          contentLength: contentLength(request.headers['content-length']),
          body: request.raw,
          bodyError,
        })
        return fileView(file)
      } catch (err) {
        // Answered before the whole body arrived: the rest is read and discarded. Closing the
        // connection instead would reset it under a client still sending, which then never sees the
        // answer; the server's request timeout bounds a client that sends forever.
        if (!request.raw.readableEnded) request.raw.resume()
        throw err
      }
    },
  )
}
