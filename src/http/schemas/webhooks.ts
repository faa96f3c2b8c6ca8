import { Type } from '@sinclair/typebox'
import { IsoTime, Uuid } from './common'

const Status = Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('dead')], {
  'x-message': 'must be one of: pending, delivered, dead',
})

export const DeliveriesQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    status: Type.Optional(Status),
  },
  { additionalProperties: false },
)

export const DeliverySchema = Type.Object({
  id: Type.String({ description: 'The Standard Webhooks `webhook-id`, the same on every attempt' }),
  event: Type.Union([Type.Literal('file.uploaded'), Type.Literal('file.failed')]),
  fileId: Uuid,
  url: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('dead')], {
    description: 'pending: waiting for an attempt; delivered: a 2xx was received; dead: every attempt failed',
  }),
  attempts: Type.Integer({ description: 'Attempts made since the event was queued or last retried' }),
  lastError: Type.Union([Type.String(), Type.Null()]),
  createdAt: IsoTime,
  nextAttemptAt: Type.Union([IsoTime, Type.Null()], { description: 'When the next attempt is due (pending only)' }),
  deliveredAt: Type.Union([IsoTime, Type.Null()]),
})

export const DeliveryList = Type.Object({ deliveries: Type.Array(DeliverySchema) })
