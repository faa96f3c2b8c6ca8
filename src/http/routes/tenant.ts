import type { App } from '../types'
import type { Core } from '../../core'
import { QuotaInfo, TenantInfo, tenantInfoView } from '../../contract/tenants'
import { withErrors } from '../responses'

/** The calling tenant's own profile and quota. */
export async function tenantRoutes(app: App, core: Core): Promise<void> {
  app.get('/api/v1/tenant/info', { schema: { tags: ['tenant'], summary: 'The calling tenant', response: withErrors({ 200: TenantInfo }) } }, async (request) =>
    tenantInfoView(request.tenant!),
  )

  app.get(
    '/api/v1/tenant/quota',
    { schema: { tags: ['tenant'], summary: 'Storage quota and usage', response: withErrors({ 200: QuotaInfo }) } },
    async (request) => core.tenants.quota(request.tenant!.id),
  )
}
