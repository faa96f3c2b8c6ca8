import { notFound, AppError } from '../errors'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { OutboxEvent, OutboxRepo, OutboxStatus } from '../db/repos/outbox'
import { isoTime, type Clock } from '../lib/clock'

/** A webhook delivery as the API shows it: the outbox row without its payload or tenant. */
export function deliveryView(e: OutboxEvent) {
  return {
    id: e.id,
    event: e.event,
    fileId: e.fileId,
    url: e.url,
    status: e.status,
    attempts: e.attempts,
    lastError: e.lastError,
    createdAt: isoTime(e.createdAt),
    nextAttemptAt: e.status === 'pending' ? isoTime(e.nextAttemptAt) : null,
    deliveredAt: e.deliveredAt === null ? null : isoTime(e.deliveredAt),
  }
}

/**
 * A tenant's own view of its webhook deliveries: the recent ones, and a re-drive of a dead one
 * (the same fresh set of attempts `coffer webhooks retry` gives, for the tenant's events only).
 */
export class WebhookDeliveriesService {
  constructor(
    private readonly outbox: OutboxRepo,
    private readonly clock: Clock,
    /** Wakes the scheduler so a re-driven event goes out now rather than at the next poll. */
    private readonly wake: () => void,
  ) {}

  recent(tenant: AuthenticatedTenant, opts: { status?: OutboxStatus | undefined; limit: number }): OutboxEvent[] {
    return this.outbox.listForTenant(tenant.id, opts.status ?? null, opts.limit)
  }

  /** Re-queues a dead delivery; 404 for an unknown or foreign id, 409 unless it is dead. */
  retry(tenant: AuthenticatedTenant, id: string): OutboxEvent {
    const now = this.clock.now()
    if (!this.outbox.retryDead(tenant.id, id, now)) {
      const current = this.outbox.getForTenant(tenant.id, id)
      if (!current) throw notFound.delivery()
      throw new AppError('CONFLICT', `Only a dead delivery can be retried; this one is ${current.status}`, { field: 'status', status: current.status })
    }
    this.wake()
    return this.outbox.getForTenant(tenant.id, id)!
  }
}
