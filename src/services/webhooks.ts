import type { OutboxEvent, OutboxRepo, OutboxStatus } from '../db/repos/outbox'
import type { Clock } from '../lib/clock'

/** Operators' view of webhook deliveries: inspect the outbox and re-drive events. */
export class WebhooksService {
  constructor(
    private readonly outbox: OutboxRepo,
    private readonly clock: Clock,
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
}
