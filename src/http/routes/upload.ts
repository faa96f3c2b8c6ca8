import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { PathId, withErrors } from '../schemas/common'
import { FileSchema, HandshakeBody, HandshakeResponse, UploadQuery, WorkspaceHeader } from '../schemas/files'
import { fileView } from '../../services/files'

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
    async (request) => core.uploads.handshake(request.tenant!, request.body, request.headers['x-workspace-id']),
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
    async (request, reply) => {
      const lengthHeader = request.headers['content-length']
      const contentLength = lengthHeader !== undefined && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : undefined
      try {
        const file = await core.uploads.receive({
          fileId: request.params.fileId,
          expires: request.query.expires,
          token: request.query.token,
          contentType: request.headers['content-type'],
          contentLength,
          body: request.raw,
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
