import type { App } from '../types'
import type { Core } from '../../core'
import { Overview, OverviewQuery } from '../../contract/overview'
import { tenantSummaryView } from '../../contract/tenants'
import { withErrors } from '../responses'

/** Admin API: the server at a glance (#31), what the console's admin overview shows. Registered inside the admin scope. */
export async function overviewRoutes(app: App, core: Core): Promise<void> {
  app.get(
    '/api/v1/admin/overview',
    {
      schema: {
        tags: ['admin'],
        summary: "The server at a glance: version, uptime, the data dir's free space, blobs, request and error rates, webhook backlog, tenants by usage",
        querystring: OverviewQuery,
        response: withErrors({ 200: Overview }),
      },
      config: { inputPointer: '/query' },
    },
    async (request) => {
      const o = core.overview.get(request.query.limit)
      return { ...o, tenants: { count: o.tenants.count, byUsage: o.tenants.byUsage.map(tenantSummaryView) } }
    },
  )
}
