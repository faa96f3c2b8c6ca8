import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'

export type OutboxStatus = 'pending' | 'delivered' | 'dead'
export type FileEventName = 'file.uploaded' | 'file.failed' | 'file.deleted'

/** One webhook event. `id` is the Standard Webhooks `webhook-id`, stable across attempts. */
export interface OutboxEvent {
  id: string
  tenantId: string
  fileId: string
  event: FileEventName
  url: string
  /** The exact JSON body sent on every attempt. */
  payload: string
  status: OutboxStatus
  attempts: number
  nextAttemptAt: number
  lastError: string | null
  createdAt: number
  updatedAt: number
  deliveredAt: number | null
}

interface Row {
  id: string
  tenant_id: string
  file_id: string
  event: FileEventName
  url: string
  payload: string
  status: OutboxStatus
  attempts: number
  next_attempt_at: number
  last_error: string | null
  created_at: number
  updated_at: number
  delivered_at: number | null
}

const toEvent = (r: Row): OutboxEvent => ({
  id: r.id,
  tenantId: r.tenant_id,
  fileId: r.file_id,
  event: r.event,
  url: r.url,
  payload: r.payload,
  status: r.status,
  attempts: r.attempts,
  nextAttemptAt: r.next_attempt_at,
  lastError: r.last_error,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  deliveredAt: r.delivered_at,
})

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // PostgreSQL before 16 wants an alias on a subquery in FROM.
  dueFair: {
    sqlite: `SELECT * FROM (
           SELECT *, row_number() OVER (PARTITION BY tenant_id ORDER BY next_attempt_at, id) AS turn
           FROM outbox WHERE status = 'pending' AND next_attempt_at <= @now
         ) WHERE turn <= @perTenant ORDER BY turn, next_attempt_at, id LIMIT @limit`,
    postgres: `SELECT * FROM (
           SELECT *, row_number() OVER (PARTITION BY tenant_id ORDER BY next_attempt_at, id) AS turn
           FROM outbox WHERE status = 'pending' AND next_attempt_at <= @now
         ) AS due WHERE turn <= @perTenant ORDER BY turn, next_attempt_at, id LIMIT @limit`,
  },
  // A node claims the due events it is about to send (#30): it writes its name and moves
  // next_attempt_at to when the claim lapses, so they are due for no other node meanwhile. The ids
  // come as one JSON array, which both databases expand. PostgreSQL: the rows are locked first,
  // skipping those another node's claim holds locked (FOR UPDATE SKIP LOCKED: no wait), and under
  // READ COMMITTED a row another node claimed and committed since this statement's snapshot is
  // read again and is no longer due. SQLite: the single writer serializes the UPDATEs.
  claim: {
    sqlite: `UPDATE outbox SET claimed_by = @holder, next_attempt_at = @until
         WHERE id IN (SELECT value FROM json_each(@ids)) AND status = 'pending' AND next_attempt_at <= @now
         RETURNING id`,
    postgres: `UPDATE outbox SET claimed_by = @holder, next_attempt_at = @until
         WHERE id IN (
           SELECT id FROM outbox WHERE id IN (SELECT jsonb_array_elements_text(@ids::jsonb)) AND status = 'pending' AND next_attempt_at <= @now
           FOR UPDATE SKIP LOCKED
         )
         RETURNING id`,
  },
  // PostgreSQL cannot type a parameter that is only tested for NULL first: it is cast to text.
  listForTenant: {
    sqlite: `SELECT * FROM outbox WHERE tenant_id = @tenantId AND (@status IS NULL OR status = @status) ORDER BY created_at DESC, id DESC LIMIT @limit`,
    postgres: `SELECT * FROM outbox WHERE tenant_id = @tenantId AND (@status::text IS NULL OR status = @status) ORDER BY created_at DESC, id DESC LIMIT @limit`,
  },
  list: {
    sqlite: `SELECT * FROM outbox WHERE (@status IS NULL OR status = @status) ORDER BY created_at DESC, id DESC LIMIT @limit`,
    postgres: `SELECT * FROM outbox WHERE (@status::text IS NULL OR status = @status) ORDER BY created_at DESC, id DESC LIMIT @limit`,
  },
}

/** SQL for the outbox table; no rules here. */
export class OutboxRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      insert: db.prepare(
        `INSERT INTO outbox (id, tenant_id, file_id, event, url, payload, status, next_attempt_at, created_at, updated_at)
         VALUES (@id, @tenantId, @fileId, @event, @url, @payload, 'pending', @now, @now, @now)`,
      ),
      get: db.prepare<[string], Row>('SELECT * FROM outbox WHERE id = ?'),
      dueFair: db.prepare<[{ now: number; perTenant: number; limit: number }], Row>(dialect(db, SQL.dueFair)),
      nextDueAt: db.pluck<[], number | null>(`SELECT min(next_attempt_at) FROM outbox WHERE status = 'pending'`),
      claim: db.pluck<[{ ids: string; holder: string; now: number; until: number }], string>(dialect(db, SQL.claim)),
      // Delivered is delivered, whoever sent it: a node whose claim lapsed mid-send records it too.
      delivered: db.prepare(
        `UPDATE outbox SET status = 'delivered', attempts = attempts + 1, last_error = NULL, delivered_at = @now, updated_at = @now, claimed_by = NULL
         WHERE id = @id AND status = 'pending'`,
      ),
      // A failure counts only while the claim is the sender's: once another node has claimed the
      // event, that node's attempt is the one that counts (an attempt is never counted twice).
      failed: db.prepare(
        `UPDATE outbox SET attempts = attempts + 1, last_error = @error, updated_at = @now, claimed_by = NULL,
           status = CASE WHEN attempts + 1 >= @maxAttempts THEN 'dead' ELSE 'pending' END,
           next_attempt_at = @nextAttemptAt
         WHERE id = @id AND status = 'pending' AND claimed_by = @holder`,
      ),
      releaseClaims: db.prepare(`UPDATE outbox SET claimed_by = NULL, next_attempt_at = @now WHERE status = 'pending' AND claimed_by IS NOT NULL`),
      unclaim: db.prepare(`UPDATE outbox SET claimed_by = NULL, next_attempt_at = @now WHERE id = @id AND status = 'pending' AND claimed_by = @holder`),
      listForTenant: db.prepare<[{ tenantId: string; status: string | null; limit: number }], Row>(dialect(db, SQL.listForTenant)),
      getForTenant: db.prepare<[string, string], Row>('SELECT * FROM outbox WHERE id = ? AND tenant_id = ?'),
      retryDead: db.prepare(
        `UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = @now, updated_at = @now, claimed_by = NULL WHERE id = @id AND tenant_id = @tenantId AND status = 'dead'`,
      ),
      list: db.prepare<[{ status: string | null; limit: number }], Row>(dialect(db, SQL.list)),
      retry: db.prepare(
        `UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = @now, updated_at = @now, claimed_by = NULL WHERE id = @id AND status != 'pending'`,
      ),
      retryAllDead: db.prepare(
        `UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = @now, updated_at = @now, claimed_by = NULL WHERE status = 'dead'`,
      ),
      dropPending: db.prepare(`DELETE FROM outbox WHERE tenant_id = ? AND status = 'pending'`),
      // The admin overview (#31): ranges of outbox_by_status (status, created_at), so their cost is
      // the backlog's size, never the delivered history's (kept for the API's listings).
      countOf: db.pluck<[string], number>('SELECT count(*) FROM outbox WHERE status = ?'),
      oldestOf: db.pluck<[string], number | null>('SELECT min(created_at) FROM outbox WHERE status = ?'),
      countByStatus: db.prepare<[], { status: OutboxStatus; n: number }>('SELECT status, count(*) AS n FROM outbox GROUP BY status'),
    }
  }

  insert(e: { id: string; tenantId: string; fileId: string; event: FileEventName; url: string; payload: string; now: number }): void {
    this.stmts.insert.run(e)
  }

  get(id: string): OutboxEvent | undefined {
    const r = this.stmts.get.get(id)
    return r && toEvent(r)
  }

  /**
   * Due events, at most `perTenant` of each tenant (its earliest), interleaved: every tenant's
   * first, then every tenant's second, and so on. A tenant with a large backlog cannot fill the
   * page (fair webhook delivery, #12 item 4).
   */
  dueFair(now: number, perTenant: number, limit: number): OutboxEvent[] {
    return this.stmts.dueFair.all({ now, perTenant, limit }).map(toEvent)
  }

  /** When the earliest pending event is due, or null when none is pending. */
  nextDueAt(): number | null {
    return this.stmts.nextDueAt.get() as number | null
  }

  /**
   * Claims for `holder` those of `ids` still pending and due at `now`, until `until`: they are due
   * for nobody else until then (one node per delivery, #30). Returns the ids it claimed.
   */
  claim(ids: readonly string[], holder: string, now: number, until: number): string[] {
    if (ids.length === 0) return []
    return this.stmts.claim.all({ ids: JSON.stringify(ids), holder, now, until })
  }

  /** Gives up `holder`'s claim on a pending event, due again at `now` (a delivery aborted by a shutdown). */
  unclaim(id: string, holder: string, now: number): boolean {
    return this.stmts.unclaim.run({ id, holder, now }).changes === 1
  }

  /**
   * Every claim, due again at `now`: at a server's start, when their senders are gone with the
   * previous run. Not while another node may be sending (several nodes on PostgreSQL).
   */
  releaseClaims(now: number): number {
    return this.stmts.releaseClaims.run({ now }).changes
  }

  markDelivered(id: string, now: number): void {
    this.stmts.delivered.run({ id, now })
  }

  /**
   * Records `holder`'s failed attempt: the event waits until `nextAttemptAt`, or is dead after
   * `maxAttempts`. Not recorded once another node has claimed the event (false).
   */
  markFailed(id: string, holder: string, error: string, now: number, nextAttemptAt: number, maxAttempts: number): boolean {
    return this.stmts.failed.run({ id, holder, error: error.slice(0, 500), now, nextAttemptAt, maxAttempts }).changes === 1
  }

  list(status: OutboxStatus | null, limit: number): OutboxEvent[] {
    return this.stmts.list.all({ status, limit }).map(toEvent)
  }

  /** One tenant's most recent events, newest first. */
  listForTenant(tenantId: string, status: OutboxStatus | null, limit: number): OutboxEvent[] {
    return this.stmts.listForTenant.all({ tenantId, status, limit }).map(toEvent)
  }

  getForTenant(tenantId: string, id: string): OutboxEvent | undefined {
    const r = this.stmts.getForTenant.get(id, tenantId)
    return r && toEvent(r)
  }

  /** Re-drives one of the tenant's dead events with a fresh set of attempts; false unless it was dead. */
  retryDead(tenantId: string, id: string, now: number): boolean {
    return this.stmts.retryDead.run({ id, tenantId, now }).changes === 1
  }

  /** Re-drives a delivered or dead event with a fresh set of attempts; false when unknown or already pending. */
  retry(id: string, now: number): boolean {
    return this.stmts.retry.run({ id, now }).changes === 1
  }

  retryAllDead(now: number): number {
    return this.stmts.retryAllDead.run({ now }).changes
  }

  counts(): Record<OutboxStatus, number> {
    const out: Record<OutboxStatus, number> = { pending: 0, delivered: 0, dead: 0 }
    for (const r of this.stmts.countByStatus.all()) out[r.status] = r.n
    return out
  }

  /** Events still to deliver and dead ones, and when the oldest pending one was made (null when none is). */
  backlog(): { pending: number; dead: number; oldestPendingAt: number | null } {
    const oldest = this.stmts.oldestOf.get('pending')
    return {
      pending: Number(this.stmts.countOf.get('pending')),
      dead: Number(this.stmts.countOf.get('dead')),
      oldestPendingAt: oldest === null || oldest === undefined ? null : Number(oldest),
    }
  }

  /** Drops a tenant's undelivered events (the tenant is being deleted); returns how many. */
  dropPending(tenantId: string): number {
    return this.stmts.dropPending.run(tenantId).changes
  }
}
