import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { OutboxEvent, OutboxRepo } from '../db/repos/outbox'
import type { TenantsRepo } from '../db/repos/tenants'
import type { Clock } from '../lib/clock'
import type { Delivery, DeliveryResult } from './deliver'
import type { Background } from '../lib/background'

/** 3 attempts in all: the second 1 s after the first fails, the third 2 s after that (contract). */
export const MAX_ATTEMPTS = 3
export const RETRY_DELAYS_MS = [1000, 2000] as const
/**
 * How long a node's claim on an event it is sending lasts (#30): past it, a node that died
 * mid-delivery has its events sent again by another. Well beyond an attempt's own bound
 * (deliver.ts, 10 s), so that a live node's slow attempt is not sent twice.
 */
export const CLAIM_MS = 60_000

export interface SchedulerDeps {
  outbox: OutboxRepo
  tenants: TenantsRepo
  clock: Clock
  log: FastifyBaseLogger
  send: (delivery: Delivery, signal: AbortSignal) => Promise<DeliveryResult>
  /** How often the outbox is polled for events written by other processes (`coffer webhooks retry`). */
  pollMs?: number
  /** Deliveries in flight at once. */
  concurrency?: number
  /** Deliveries of one tenant in flight at once: a tenant whose receiver hangs holds at most these. */
  perTenant?: number
  /** This scheduler's name in the outbox's claims (default: the pid and random bytes). */
  holder?: string
  /** How long a claim lasts (CLAIM_MS). */
  claimMs?: number
}

/**
 * Delivers outbox events, each claimed first (OutboxRepo.claim): several schedulers, one per
 * node, may deliver from one outbox (#30), and each event is sent by the one whose claim took it.
 * A claim lapses after `claimMs`, so a node that dies mid-delivery leaves its events to the
 * others: delivery is at-least-once, and receivers deduplicate on `webhook-id` (README, Webhooks).
 * Fairly: at most `perTenant` deliveries of one tenant run at once, and
 * due events are taken round-robin across tenants, so one tenant pointing a backlog at a receiver
 * that never answers (each attempt bounded by deliver()'s timeout) delays nobody else (#12 item 4).
 * start()/stop() are idempotent; stop() aborts deliveries in flight (they
 * stay pending and are sent again after a restart: at-least-once). runOnce() is the same work
 * without timers, for tests with an injected clock.
 */
export class WebhookScheduler implements Background {
  readonly name = 'webhooks'
  private started = false
  private timer: NodeJS.Timeout | undefined
  private wakeQueued = false
  private readonly inFlight = new Map<string, { controller: AbortController; done: Promise<void> }>()
  private readonly pollMs: number
  private readonly concurrency: number
  private readonly perTenant: number
  /** Deliveries in flight by tenant id; absent when none. */
  private readonly tenantLoad = new Map<string, number>()
  private readonly holder: string
  private readonly claimMs: number

  constructor(private readonly deps: SchedulerDeps) {
    this.pollMs = deps.pollMs ?? 1000
    this.concurrency = deps.concurrency ?? 16
    this.perTenant = Math.min(deps.perTenant ?? 4, this.concurrency)
    this.holder = deps.holder ?? `pid ${process.pid} ${randomBytes(6).toString('hex')}`
    this.claimMs = deps.claimMs ?? CLAIM_MS
  }

  /** Deliveries in flight for a tenant (tests, metrics). */
  inFlightFor(tenantId: string): number {
    return this.tenantLoad.get(tenantId) ?? 0
  }

  start(): void {
    if (this.started) return
    this.started = true
    this.tick()
  }

  async stop(): Promise<void> {
    this.started = false
    clearTimeout(this.timer)
    this.timer = undefined
    const running = [...this.inFlight.values()]
    for (const r of running) r.controller.abort()
    await Promise.all(running.map((r) => r.done))
  }

  /** Something was enqueued: look now rather than at the next poll. */
  notify(): void {
    if (!this.started || this.wakeQueued) return
    this.wakeQueued = true
    setImmediate(() => {
      this.wakeQueued = false
      if (this.started) this.tick()
    })
  }

  /** Starts every due delivery and resolves when they have all been recorded. */
  async runOnce(): Promise<number> {
    const started = this.claim()
    await Promise.all(started)
    return started.length
  }

  private tick(): void {
    let delay = this.pollMs
    try {
      // Each claimed delivery records its own outcome; tick only schedules.
      void this.claim()
      const next = this.deps.outbox.nextDueAt()
      const now = this.deps.clock.now()
      if (next !== null && next > now) delay = Math.min(next - now, this.pollMs)
    } catch (err) {
      // The database busy or unreachable (PostgreSQL's connection lost): the next poll tries again.
      this.deps.log.warn({ err }, 'webhook outbox unavailable')
    }
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.tick(), delay)
  }

  private claim(): Promise<void>[] {
    const room = this.concurrency - this.inFlight.size
    if (room <= 0) return []
    // Each tenant contributes at most perTenant rows, its in-flight ones among them: this many
    // rows always hold `room` startable events when that many exist.
    const limit = (this.inFlight.size + room) * this.perTenant
    const now = this.deps.clock.now()
    const picked: OutboxEvent[] = []
    const load = new Map<string, number>()
    for (const e of this.deps.outbox.dueFair(now, this.perTenant, limit)) {
      if (picked.length >= room) break
      const tenantLoad = this.inFlightFor(e.tenantId) + (load.get(e.tenantId) ?? 0)
      if (this.inFlight.has(e.id) || tenantLoad >= this.perTenant) continue
      picked.push(e)
      load.set(e.tenantId, (load.get(e.tenantId) ?? 0) + 1)
    }
    // Only what this node starts now is claimed: another node's claim may have taken some of them.
    const claimed = new Set(
      this.deps.outbox.claim(
        picked.map((e) => e.id),
        this.holder,
        now,
        now + this.claimMs,
      ),
    )
    return picked.filter((e) => claimed.has(e.id)).map((e) => this.attempt(e))
  }

  private attempt(e: OutboxEvent): Promise<void> {
    const controller = new AbortController()
    const done = (async () => {
      const { outbox, tenants, clock, log, send } = this.deps
      const secret = tenants.get(e.tenantId)?.webhookSecret
      const now = clock.now()
      const result: DeliveryResult = secret
        ? await send({ id: e.id, url: e.url, body: e.payload, secret, timestampSeconds: Math.floor(now / 1000) }, controller.signal)
        : { ok: false, error: 'tenant not found' }
      if (controller.signal.aborted) {
        // Shutting down: the event stays pending, its claim given up so that another node (or
        // the next start) sends it at once rather than when the claim would lapse.
        outbox.unclaim(e.id, this.holder, clock.now())
        return
      }
      const attempt = e.attempts + 1
      const target = safeHost(e.url)
      if (result.ok) {
        outbox.markDelivered(e.id, clock.now())
        log.info({ eventId: e.id, fileId: e.fileId, event: e.event, host: target, attempt, status: result.status }, 'webhook delivered')
      } else {
        const delay = RETRY_DELAYS_MS[attempt - 1] ?? 0
        // Another node claimed it since (this one's claim lapsed): its attempt is the one that counts.
        if (!outbox.markFailed(e.id, this.holder, result.error, clock.now(), clock.now() + delay, MAX_ATTEMPTS)) return
        const dead = attempt >= MAX_ATTEMPTS
        log.warn(
          { eventId: e.id, fileId: e.fileId, event: e.event, host: target, attempt, status: result.status, error: result.error, dead },
          dead ? 'webhook dead after the last attempt' : 'webhook attempt failed',
        )
      }
    })()
      .catch((err: unknown) => this.deps.log.error({ err, eventId: e.id }, 'webhook attempt crashed'))
      .finally(() => {
        this.inFlight.delete(e.id)
        const load = this.inFlightFor(e.tenantId) - 1
        if (load > 0) this.tenantLoad.set(e.tenantId, load)
        else this.tenantLoad.delete(e.tenantId)
        this.notify()
      })
    this.inFlight.set(e.id, { controller, done })
    this.tenantLoad.set(e.tenantId, this.inFlightFor(e.tenantId) + 1)
    return done
  }
}

/** The host of a webhook URL, for logs: the path and query may carry the receiver's secrets. */
function safeHost(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return 'invalid'
  }
}
