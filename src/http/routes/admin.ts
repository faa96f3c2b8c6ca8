import type { App } from '../types'
import type { Core } from '../../core'
import { adminAuth } from '../auth'
import { CreateTenantBody, CreatedTenant, RegeneratedKey, createdTenantView } from '../../contract/tenants'
import { PathId } from '../../contract/common'
import { Type } from '@sinclair/typebox'
import { withErrors } from '../responses'

/** Admin API: tenant creation and key rotation, behind the admin key. */
export async function adminRoutes(app: App, core: Core): Promise<void> {
  app.addHook('onRequest', adminAuth(core.config.adminApiKey))

  app.post(
    '/api/v1/admin/tenants',
    { schema: { tags: ['admin'], summary: 'Create a tenant', body: CreateTenantBody, response: withErrors({ 201: CreatedTenant }, 409, 413) } },
    async (request, reply) => {
      const { tenant, apiKey } = core.tenants.create(request.body)
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
}
