import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { PathId } from '../../contract/common'
import { FileSchema, WorkspaceHeader, fileView } from '../../contract/files'
import { DeletedQuery, DeletedResponse, VersionParams, VersionsQuery, VersionsResponse, deletedFileView, fileVersionView } from '../../contract/file-versions'
import { withErrors } from '../responses'

const FileParams = Type.Object({ fileId: PathId })

/** A file's versions, their restore, and the deleted files that can be restored (#25): tenant key only. */
export async function fileVersionsRoutes(app: App, core: Core): Promise<void> {
  app.get(
    '/api/v1/files/:fileId/versions',
    {
      schema: {
        tags: ['files'],
        summary: "The versions of the file's key, newest first, delete markers included; keyset pagination",
        params: FileParams,
        querystring: VersionsQuery,
        response: withErrors({ 200: VersionsResponse }, 404),
      },
      config: { inputPointer: '/query' },
    },
    async (request) => {
      const page = core.fileVersions.list(request.tenant!, request.params.fileId, request.query)
      return { versions: page.versions.map(fileVersionView), nextCursor: page.nextCursor, total: page.total }
    },
  )

  app.post(
    '/api/v1/files/:fileId/versions/:versionId/restore',
    {
      schema: {
        tags: ['files'],
        summary: 'Copy a version over the current one: 201 with the new current file (200 when it already was current)',
        params: VersionParams,
        response: withErrors({ 200: FileSchema, 201: FileSchema }, 403, 404),
      },
    },
    async (request, reply) => {
      const { file, created } = core.fileVersions.restore(request.tenant!, request.params.fileId, request.params.versionId)
      return reply.code(created ? 201 : 200).send(fileView(file))
    },
  )

  app.get(
    '/api/v1/files/deleted',
    {
      schema: {
        tags: ['files'],
        summary: 'Deleted files that can be restored (a versioned key whose current version is a delete marker), newest deletion first',
        querystring: DeletedQuery,
        headers: WorkspaceHeader,
        response: withErrors({ 200: DeletedResponse }, 404),
      },
      config: { inputPointer: '/query' },
    },
    async (request) => {
      const page = core.fileVersions.deleted(request.tenant!, request.query, request.headers['x-workspace-id'])
      return { files: page.files.map(deletedFileView), nextCursor: page.nextCursor, total: page.total }
    },
  )
}
