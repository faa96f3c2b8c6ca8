import type { App } from '../types'
import type { Core } from '../../core'
import { adminAuth } from '../auth'
import {
  CreateTenantBody,
  CreatedTenant,
  RegeneratedKey,
  TenantList,
  TenantListQuery,
  TenantSummary,
  UpdateTenantBody,
  createdTenantView,
  quotaBytesOf,
  tenantSummaryView,
} from '../../contract/tenants'
import { PathId } from '../../contract/common'
import { Type } from '@sinclair/typebox'
import { withErrors } from '../responses'

const TenantParams = Type.Object({ tenantId: PathId })

/** Admin API: the tenant lifecycle (create, list, show, update, delete) and key rotation, behind the admin key. */
export async function adminRoutes(app: App, core: Core): Promise<void> {
  app.addHook('onRequest', adminAuth(core.config.adminApiKey))

  app.post(
    '/api/v1/admin/tenants',
    { schema: { tags: ['admin'], summary: 'Create a tenant', body: CreateTenantBody, response: withErrors({ 201: CreatedTenant }, 409, 413) } },
    async (request, reply) => {
      const { quotaBytes, ...rest } = request.body
      const quota = quotaBytesOf(quotaBytes)
      const { tenant, apiKey } = core.tenants.create({ ...rest, ...(quota !== undefined ? { quotaBytes: quota } : {}) })
      request.log.info({ tenantId: tenant.id }, 'tenant created')
      return reply.code(201).send(createdTenantView(tenant, apiKey))
    },
  )

  app.post(
    '/api/v1/admin/tenants/:tenantId/regenerate-key',
    {
      schema: {
        tags: ['admin'],
        summary: "Replace a tenant's API key and webhook secret; the old key stops working at once",
        params: Type.Object({ tenantId: PathId }),
        response: withErrors({ 200: RegeneratedKey }, 404),
      },
    },
    async (request) => {
      const { tenant, apiKey } = core.tenants.regenerateKey(request.params.tenantId)
      request.log.info({ tenantId: tenant.id }, 'tenant key regenerated')
      return {
        tenantId: tenant.id,
        apiKey,
        webhookSecret: tenant.webhookSecret,
        message: 'API key regenerated; the previous key no longer works. The webhook signing secret was rotated too.',
      }
    },
  )

  app.get(
    '/api/v1/admin/tenants',
    {
      schema: {
        tags: ['admin'],
        summary: 'List tenants with their usage, newest first, with keyset pagination',
        querystring: TenantListQuery,
        response: withErrors({ 200: TenantList }),
      },
      config: { inputPointer: '/query' },
    },
    async (request) => {
      const page = core.tenants.list(request.query)
      return { tenants: page.tenants.map(tenantSummaryView), nextCursor: page.nextCursor }
    },
  )

  app.get(
    '/api/v1/admin/tenants/:tenantId',
    { schema: { tags: ['admin'], summary: 'A tenant with its usage', params: TenantParams, response: withErrors({ 200: TenantSummary }, 404) } },
    async (request) => tenantSummaryView(core.tenants.show(request.params.tenantId)),
  )

  app.patch(
    '/api/v1/admin/tenants/:tenantId',
    {
      schema: {
        tags: ['admin'],
        summary: "Change a tenant's name, quota, allowed file types or self-service S3 credentials",
        params: TenantParams,
        body: UpdateTenantBody,
        response: withErrors({ 200: TenantSummary }, 404, 409, 413),
      },
    },
    async (request) => {
      const { quotaBytes, ...rest } = request.body
      const quota = quotaBytesOf(quotaBytes)
      const updated = core.tenants.update(request.params.tenantId, { ...rest, ...(quota !== undefined ? { quotaBytes: quota } : {}) })
      request.log.info({ tenantId: updated.id, changed: Object.keys(request.body) }, 'tenant updated')
      return tenantSummaryView(updated)
    },
  )

  app.delete(
    '/api/v1/admin/tenants/:tenantId',
    {
      schema: {
        tags: ['admin'],
        summary: 'Delete a tenant irreversibly: its key and URLs stop at once, its files and workspaces are deleted, pending webhooks dropped',
        params: TenantParams,
        response: withErrors({ 204: Type.Null({ description: 'Deleted' }) }, 404),
      },
    },
    async (request, reply) => {
      core.tenants.delete(request.params.tenantId)
      request.log.info({ tenantId: request.params.tenantId }, 'tenant deleted')
      return reply.code(204).send(null)
    },
  )
}
