import type { OutboxEvent, OutboxRepo, OutboxStatus } from '../db/repos/outbox'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import { AppError, notFound } from '../errors'
import type { Clock } from '../lib/clock'

/**
 * Webhook deliveries: the operators' view of the whole outbox (`coffer webhooks`), and a tenant's
 * view of its own events (the API, for the web console).
 */
export class WebhooksService {
  constructor(
    private readonly outbox: OutboxRepo,
    private readonly clock: Clock,
    /** Wakes this process's scheduler so a re-driven event goes out now, not at the next poll. */
    private readonly wake: () => void = () => {},
  ) {}

  /** Newest first; `status` null for all. */
  list(status: OutboxStatus | null, limit: number): OutboxEvent[] {
    return this.outbox.list(status, limit)
  }

  /** A fresh set of attempts for one event (same webhook-id); says why when there is nothing to retry. */
  retry(id: string): 'retried' | 'unknown' | 'already-pending' {
    if (!this.outbox.get(id)) return 'unknown'
    return this.outbox.retry(id, this.clock.now()) ? 'retried' : 'already-pending'
  }

  /** Re-queues every dead event; returns how many. */
  retryAllDead(): number {
    return this.outbox.retryAllDead(this.clock.now())
  }

  /** Pending and dead counts, for the metrics. */
  counts(): Record<OutboxStatus, number> {
    return this.outbox.counts()
  }

  /** The tenant's own most recent events, newest first. */
  recentFor(tenant: AuthenticatedTenant, opts: { status?: OutboxStatus | undefined; limit: number }): OutboxEvent[] {
    return this.outbox.listForTenant(tenant.id, opts.status ?? null, opts.limit)
  }

  /** Re-queues one of the tenant's dead events: 404 for an unknown or foreign id, 409 unless it is dead. */
  retryDeadFor(tenant: AuthenticatedTenant, id: string): OutboxEvent {
    if (!this.outbox.retryDead(tenant.id, id, this.clock.now())) {
      const current = this.outbox.getForTenant(tenant.id, id)
      if (!current) throw notFound.delivery()
      throw new AppError('CONFLICT', `Only a dead delivery can be retried; this one is ${current.status}`, { field: 'status', status: current.status })
    }
    this.wake()
    return this.outbox.getForTenant(tenant.id, id)!
  }
}
