import { Type, type Static } from '@sinclair/typebox'
import type { FileRecord } from '../db/repos/files'
import type { FileEventName, OutboxEvent } from '../db/repos/outbox'
import { isoTime } from '../lib/clock'
import { IsoTime, Uuid } from './common'
import { fileView } from './files'

/** Why an upload failed, as a `file.failed` event reports it. */
export interface UploadError {
  code: string
  message: string
}

/** The JSON body of a `file.uploaded` / `file.failed` / `file.deleted` webhook (contract: Webhooks). */
export function fileEventPayload(event: FileEventName, f: FileRecord, now: number, error?: UploadError, versionId?: string) {
  return {
    event,
    fileId: f.id,
    tenantId: f.tenantId,
    workspaceId: f.workspaceId,
    file: fileView(f),
    timestamp: isoTime(now),
    // Additive (#25): the S3 versionId of the version the event is about, in a versioned bucket.
    ...(versionId !== undefined ? { versionId } : {}),
    ...(error ? { error: { code: error.code, message: error.message } } : {}),
  }
}

/** An outbox event as `coffer webhooks list` shows it: the delivery state, never the payload. */
export function outboxEventView(e: OutboxEvent) {
  return {
    id: e.id,
    event: e.event,
    status: e.status,
    attempts: e.attempts,
    fileId: e.fileId,
    tenantId: e.tenantId,
    url: e.url,
    lastError: e.lastError,
    createdAt: isoTime(e.createdAt),
    nextAttemptAt: e.status === 'pending' ? isoTime(e.nextAttemptAt) : null,
    deliveredAt: e.deliveredAt === null ? null : isoTime(e.deliveredAt),
  }
}

const DeliveryStatus = Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('dead')], {
  'x-message': 'must be one of: pending, delivered, dead',
})

/** `GET /api/v1/webhooks/deliveries`: the most recent first, optionally of one status. */
export const DeliveriesQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    status: Type.Optional(DeliveryStatus),
  },
  { additionalProperties: false },
)

/** A tenant's own webhook delivery: the outbox event without its payload or tenant. */
export const DeliverySchema = Type.Object({
  id: Type.String({ description: 'The Standard Webhooks `webhook-id`, the same on every attempt' }),
  event: Type.Union([Type.Literal('file.uploaded'), Type.Literal('file.failed'), Type.Literal('file.deleted')]),
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

export function deliveryView(e: OutboxEvent): Static<typeof DeliverySchema> {
  const { tenantId: _tenantId, ...view } = outboxEventView(e)
  return view
}
