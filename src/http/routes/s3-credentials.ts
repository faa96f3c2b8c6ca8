import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { IsoTime, PathId } from '../../contract/common'
import { withErrors } from '../responses'

const CreatedCredential = Type.Object({
  accessKeyId: Type.String(),
  secretAccessKey: Type.String({ description: 'Shown only in this response: store it' }),
  createdAt: IsoTime,
})
const CredentialList = Type.Object({ credentials: Type.Array(Type.Object({ accessKeyId: Type.String(), createdAt: IsoTime })) })
const TenantParams = Type.Object({ tenantId: PathId })

/** Admin API: a tenant's S3 credential pairs (s3.md: Credentials). Registered inside the admin scope. */
export async function s3CredentialRoutes(app: App, core: Core): Promise<void> {
  app.post(
    '/api/v1/admin/tenants/:tenantId/s3-credentials',
    {
      schema: {
        tags: ['admin'],
        summary: 'Create an S3 credential pair for a tenant (the secret is shown once)',
        params: TenantParams,
        response: withErrors({ 201: CreatedCredential }, 404),
      },
    },
    async (request, reply) => {
      const created = core.s3Credentials.create(request.params.tenantId)
      request.log.info({ tenantId: request.params.tenantId, accessKeyId: created.accessKeyId }, 'S3 credential created')
      return reply.code(201).send(created)
    },
  )
  app.get(
    '/api/v1/admin/tenants/:tenantId/s3-credentials',
    {
      schema: {
        tags: ['admin'],
        summary: "A tenant's S3 access key ids (never the secrets)",
        params: TenantParams,
        response: withErrors({ 200: CredentialList }, 404),
      },
    },
    async (request) => ({ credentials: core.s3Credentials.list(request.params.tenantId) }),
  )
  app.delete(
    '/api/v1/admin/tenants/:tenantId/s3-credentials/:accessKeyId',
    {
      schema: {
        tags: ['admin'],
        summary: 'Revoke an S3 credential pair; effective on the next request',
        params: Type.Object({ tenantId: PathId, accessKeyId: PathId }),
        response: withErrors({ 204: Type.Null() }, 404),
      },
    },
    async (request, reply) => {
      core.s3Credentials.revoke(request.params.tenantId, request.params.accessKeyId)
      request.log.info({ tenantId: request.params.tenantId, accessKeyId: request.params.accessKeyId }, 'S3 credential revoked')
      return reply.code(204).send(null)
    },
  )
}
