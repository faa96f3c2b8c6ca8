import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { PathId } from '../../contract/common'
import { DeliveriesQuery, DeliveryList, DeliverySchema, deliveryView } from '../../contract/webhooks'
import { withErrors } from '../responses'

/** The calling tenant's webhook deliveries (registered in the tenant-key scope). */
export async function webhooksRoutes(app: App, core: Core): Promise<void> {
  app.get(
    '/api/v1/webhooks/deliveries',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'The most recent webhook deliveries, newest first, optionally of one status',
        querystring: DeliveriesQuery,
        response: withErrors({ 200: DeliveryList }),
      },
    },
    async (request) => ({ deliveries: core.webhookEvents.recentFor(request.tenant!, request.query).map(deliveryView) }),
  )

  app.post(
    '/api/v1/webhooks/deliveries/:deliveryId/retry',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Retry a dead delivery: a fresh set of attempts starts at once, with the same webhook-id',
        params: Type.Object({ deliveryId: PathId }),
        response: withErrors({ 200: DeliverySchema }, 404, 409),
      },
    },
    async (request) => {
      const delivery = core.webhookEvents.retryDeadFor(request.tenant!, request.params.deliveryId)
      request.log.info({ deliveryId: delivery.id }, 'webhook delivery re-queued')
      return deliveryView(delivery)
    },
  )
}
