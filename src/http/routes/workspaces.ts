import { Type, type Static } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { PathId, SuccessResponse } from '../../contract/common'
import { CreateWorkspaceBody, UpdateWorkspaceBody, WorkspaceList, WorkspaceSchema, workspaceView } from '../../contract/workspaces'
import { withErrors } from '../responses'

const Params = Type.Object({ workspaceId: PathId })
const DeleteQuery = Type.Object(
  {
    ifEmpty: Type.Optional(
      Type.Boolean({
        description:
          'Delete only an empty workspace (no live file, version or delete marker), else 409 CONFLICT with details.reason NOT_EMPTY, as S3 DeleteBucket',
      }),
    ),
  },
  { additionalProperties: false },
)

/** Workspace CRUD (registered in the tenant-key scope). */
export async function workspacesRoutes(app: App, core: Core): Promise<void> {
  app.get(
    '/api/v1/workspaces',
    { schema: { tags: ['workspaces'], summary: 'List workspaces, oldest first', response: withErrors({ 200: WorkspaceList }) } },
    async (request) => ({
      // With each one's file count, from the maintained counts (#31: the console's bucket list).
      workspaces: core.workspaces
        .list(request.tenant!)
        .map((w) => ({ ...workspaceView(w), fileCount: core.workspaceObjects.fileCount(request.tenant!, w.id) })),
    }),
  )

  app.post(
    '/api/v1/workspaces',
    { schema: { tags: ['workspaces'], summary: 'Create a workspace', body: CreateWorkspaceBody, response: withErrors({ 201: WorkspaceSchema }, 409, 413) } },
    async (request, reply) => reply.code(201).send(workspaceView(core.workspaces.create(request.tenant!, request.body))),
  )

  app.get(
    '/api/v1/workspaces/:workspaceId',
    { schema: { tags: ['workspaces'], summary: 'One workspace', params: Params, response: withErrors({ 200: WorkspaceSchema }, 404) } },
    async (request) => workspaceView(core.workspaces.get(request.tenant!, request.params.workspaceId)),
  )

  app.patch(
    '/api/v1/workspaces/:workspaceId',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'Rename, change or remove the quota, replace the metadata',
        params: Params,
        body: UpdateWorkspaceBody,
        response: withErrors({ 200: WorkspaceSchema }, 404, 413),
      },
    },
    async (request) => workspaceView(core.workspaces.update(request.tenant!, request.params.workspaceId, request.body)),
  )

  app.delete(
    '/api/v1/workspaces/:workspaceId',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'Delete a workspace: soft-deletes its files and releases their quota (with ifEmpty=true: only an empty one)',
        params: Params,
        querystring: DeleteQuery,
        response: withErrors({ 200: SuccessResponse }, 404, 409),
      },
      config: { inputPointer: '/query' },
    },
    async (request) => {
      const query: Static<typeof DeleteQuery> = request.query
      if (query.ifEmpty) core.workspaceObjects.deleteIfEmpty(request.tenant!, request.params.workspaceId)
      else core.workspaces.delete(request.tenant!, request.params.workspaceId)
      return { success: true }
    },
  )
}
