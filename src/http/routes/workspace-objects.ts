import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { PathId } from '../../contract/common'
import { ObjectDetails, ObjectDetailsQuery, ObjectsQuery, ObjectsResponse, objectDetailsView, objectEntryView } from '../../contract/workspace-objects'
import { withErrors } from '../responses'

const Params = Type.Object({ workspaceId: PathId })

/** A workspace seen as a bucket, for the console's bucket browser (#31): tenant key only. */
export async function workspaceObjectsRoutes(app: App, core: Core): Promise<void> {
  app.get(
    '/api/v1/workspaces/:workspaceId/objects',
    {
      schema: {
        tags: ['workspaces'],
        summary: "The workspace's objects (S3 keys) and common prefixes, in key order: ListObjectsV2's listing, keyset-paged by `after`",
        params: Params,
        querystring: ObjectsQuery,
        response: withErrors({ 200: ObjectsResponse }, 404),
      },
      config: { inputPointer: '/query' },
    },
    async (request) => {
      const page = core.workspaceObjects.list(request.tenant!, request.params.workspaceId, request.query)
      return { prefixes: page.prefixes, objects: page.objects.map(objectEntryView), nextAfter: page.nextAfter }
    },
  )

  app.get(
    '/api/v1/workspaces/:workspaceId/objects/details',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'One object by key: size, type, ETag, SHA-256, user metadata, tags, version, lock state, ACL',
        params: Params,
        querystring: ObjectDetailsQuery,
        response: withErrors({ 200: ObjectDetails }, 404),
      },
      config: { inputPointer: '/query' },
    },
    async (request) => objectDetailsView(core.workspaceObjects.details(request.tenant!, request.params.workspaceId, request.query.key)),
  )
}
