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

/** Admin API: a tenant's S3 credential pairs (README, S3: credentials). Registered inside the admin scope. */
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

/**
 * Tenant API: the calling tenant's own S3 credential pairs (#31), the same pairs the admin routes
 * manage. Unless the admin turned the tenant's self-service off: then 403 SELF_SERVICE_DISABLED.
 * Registered inside the tenant scope (tenant key).
 */
export async function tenantS3CredentialRoutes(app: App, core: Core): Promise<void> {
  app.post(
    '/api/v1/tenant/s3-credentials',
    {
      schema: {
        tags: ['tenant'],
        summary: 'Create an S3 credential pair for the calling tenant (the secret is shown once; at most 20 pairs)',
        response: withErrors({ 201: CreatedCredential }, 403, 409),
      },
    },
    async (request, reply) => {
      const created = core.s3Credentials.createOwn(request.tenant!.id)
      request.log.info({ tenantId: request.tenant!.id, accessKeyId: created.accessKeyId }, 'S3 credential created by its tenant')
      return reply.code(201).send(created)
    },
  )
  app.get(
    '/api/v1/tenant/s3-credentials',
    {
      schema: {
        tags: ['tenant'],
        summary: "The calling tenant's S3 access key ids (never the secrets)",
        response: withErrors({ 200: CredentialList }, 403),
      },
    },
    async (request) => ({ credentials: core.s3Credentials.listOwn(request.tenant!.id) }),
  )
  app.delete(
    '/api/v1/tenant/s3-credentials/:accessKeyId',
    {
      schema: {
        tags: ['tenant'],
        summary: "Revoke one of the calling tenant's S3 credential pairs; effective on the next request",
        params: Type.Object({ accessKeyId: PathId }),
        response: withErrors({ 204: Type.Null() }, 403, 404),
      },
    },
    async (request, reply) => {
      core.s3Credentials.revokeOwn(request.tenant!.id, request.params.accessKeyId)
      request.log.info({ tenantId: request.tenant!.id, accessKeyId: request.params.accessKeyId }, 'S3 credential revoked by its tenant')
      return reply.code(204).send(null)
    },
  )
}
