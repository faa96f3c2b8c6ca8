import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { PathId } from '../../contract/common'
import {
  ObjectDetails,
  ObjectDetailsQuery,
  ObjectEntry,
  ObjectsQuery,
  ObjectsResponse,
  objectDetailsView,
  objectEntryView,
} from '../../contract/workspace-objects'
import { withErrors } from '../responses'
import { AppError, type ErrorCode } from '../../errors'
import { S3Error } from '../../s3/errors'
import { mediaType, rawBodies } from '../upload-body'

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

  await app.register(async (scope) => objectPutRoute(scope, core))
}

/** The bytes of a PUT are the object: no parser reads them, the S3 write streams them to the store. */
async function objectPutRoute(scope: App, core: Core): Promise<void> {
  // The Content-Type is the object's, whatever it is: set aside before Fastify judges it as a body's.
  const sent = rawBodies(scope)
  scope.put(
    '/api/v1/workspaces/:workspaceId/objects',
    {
      schema: {
        tags: ['workspaces'],
        summary:
          "Store the request body as the object at `key`, as S3's PutObject does (any content type, the bucket's quota, size limit, versioning, default encryption and lock apply); Content-Type: the object's",
        params: Params,
        querystring: ObjectDetailsQuery,
        response: withErrors({ 200: ObjectEntry }, 403, 404, 413, 507),
      },
    },
    async (request) => {
      const tenant = request.tenant!
      try {
        const type = sent(request)
        if (mediaType(type) === null) {
          throw new AppError('VALIDATION_ERROR', `Content-Type ${JSON.stringify(type)} is not a media type`, {
            errors: [{ path: '/headers/content-type', message: 'is not a media type' }],
          })
        }
        const w = core.workspaces.get(tenant, request.params.workspaceId)
        const contentType = type?.trim() || 'application/octet-stream'
        const { etag, row } = await core.s3.objects.put(
          tenant,
          w.slug,
          request.query.key,
          { source: request.raw, payload: { kind: 'unsigned' }, headers: request.headers },
          { contentType: contentType.length <= 255 ? contentType : 'application/octet-stream', meta: {} },
          {},
          core.bucketEncryption.uploadKey(w.id, tenant.id),
        )
        return objectEntryView({ key: row.key, fileId: row.fileId, size: row.size, contentType: row.fileType, etag, completedAt: row.completedAt })
      } catch (err) {
        // Answered before the whole body arrived: the rest is read and discarded, so that the
        // client still sending reads the answer.
        if (!request.raw.readableEnded) request.raw.resume()
        throw err instanceof S3Error ? apiErrorOf(err) : err
      }
    },
  )
}

/** The S3 write's refusals in the API's words: its code for the same failure, the message kept. */
function apiErrorOf(err: S3Error): AppError {
  const byS3Code: Partial<Record<string, ErrorCode>> = {
    QuotaExceeded: 'QUOTA_EXCEEDED',
    EntityTooLarge: 'BODY_TOO_LARGE',
    NoSuchBucket: 'WORKSPACE_NOT_FOUND',
    PreconditionFailed: 'PRECONDITION_FAILED',
    InsufficientStorage: 'INSUFFICIENT_STORAGE',
    ServiceUnavailable: 'STORE_UNAVAILABLE',
  }
  const code = byS3Code[err.code] ?? (err.status === 400 ? 'VALIDATION_ERROR' : err.status === 409 ? 'CONFLICT' : 'INTERNAL_ERROR')
  if (code !== 'VALIDATION_ERROR') return new AppError(code, err.message)
  // S3 refuses a key (too long, NUL) or a body (cut short, not the declared digest) with a 400.
  const path = err.code === 'KeyTooLongError' || /\bkey\b/i.test(err.message) ? '/query/key' : '/body'
  return new AppError(code, `${path}: ${err.message}`, { errors: [{ path, message: err.message }] })
}
