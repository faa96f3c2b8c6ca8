import { randomBytes } from 'node:crypto'
import type { Commits } from '../db/group-commit'
import type { LeasesRepo } from '../db/repos/leases'
import type { Background } from '../lib/background'
import type { Clock } from '../lib/clock'

/** Where a leased job says it was taken, lost or could not be renewed (the server's pino logger). */
export interface LeaseLog {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
  error(fields: object, message: string): void
}

/** How long a background job's lease lasts unrenewed; its holder renews it every third of that. */
export const DEFAULT_LEASE_MS = 15_000

/** A lease held until released: renewed in the background while the work under it runs. */
export interface Claim {
  release(): void
}

/**
 * Leases (migration 15, #29): a name held by one process at a time, until it expires unless its
 * holder renews it. `coffer serve --workers N` runs each background job in the one worker that
 * holds the job's lease, and a worker that dies holding one loses it when it expires. The rows
 * are written without an fsync of their own (GroupCommit.runUnflushed): a lease lost in a power
 * cut is one nobody holds, which the next holder takes.
 */
export class Leases {
  /** This process's name in the holder column: its pid, and random bytes for a pid reused after a restart. */
  readonly holder: string

  constructor(
    private readonly repo: LeasesRepo,
    private readonly commits: Commits,
    private readonly clock: Clock,
    pid: number,
  ) {
    this.holder = `pid ${pid} ${randomBytes(6).toString('hex')}`
  }

  /** Takes or renews `name` for `ttlMs`; true when `holder` has it now. */
  take(name: string, ttlMs: number, holder = this.holder): boolean {
    const now = this.clock.now()
    return this.commits.runUnflushed(() => this.repo.take(name, holder, now, now + ttlMs))
  }

  release(name: string, holder = this.holder): void {
    this.commits.runUnflushed(() => this.repo.release(name, holder))
  }

  /** Who holds `name` now (undefined: nobody, or its lease expired). */
  holderOf(name: string): string | undefined {
    const row = this.repo.get(name)
    return row && row.expiresAt > this.clock.now() ? row.holder : undefined
  }

  /** Who holds a lease now: while any does, a server runs on this database (or died less than a lease ago). */
  liveHolders(): string[] {
    return this.repo.liveHolders(this.clock.now())
  }

  /** Forgets every lease: at a server's start, before any of its workers runs, their holders are all gone. */
  clear(): number {
    return this.commits.runUnflushed(() => this.repo.clear())
  }

  /**
   * Waits until `name` is free and takes it for a holder of its own (so two claims in one process
   * exclude each other too), renewing it every third of `ttlMs` until released. A holder that dies
   * leaves it to expire; `pollMs` is how often a waiter looks.
   */
  async claim(name: string, opts: { ttlMs?: number; pollMs?: number } = {}): Promise<Claim> {
    const ttlMs = opts.ttlMs ?? 30_000
    const holder = `${this.holder} ${randomBytes(6).toString('hex')}`
    while (!this.take(name, ttlMs, holder)) await sleep(opts.pollMs ?? 20)
    const renew = setInterval(() => {
      try {
        this.take(name, ttlMs, holder)
      } catch {
        // Busy past the busy timeout: the next renewal tries again, well before the lease expires.
      }
    }, ttlMs / 3)
    let released = false
    return {
      release: () => {
        if (released) return
        released = true
        clearInterval(renew)
        this.release(name, holder)
      },
    }
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * A background component that runs only while this process holds its lease (named after it):
 * started once taken, renewed every third of the lease, stopped when a renewal finds another
 * holder (this process stalled past the lease) or cannot tell before the lease would run out.
 * A process that does not hold it tries again at every renewal tick, so a job whose holder died
 * resumes within one lease and a third. stop() stops the component, then gives the lease up, so
 * a graceful shutdown of one worker hands its jobs over at once.
 */
export class LeasedBackground implements Background {
  readonly name: string
  private timer: NodeJS.Timeout | undefined
  private started = false
  private heldUntil = 0
  /** The inner component's start or stop in progress: one at a time. */
  private switching: Promise<void> = Promise.resolve()
  private running = false

  constructor(
    private readonly inner: Background,
    private readonly leases: Leases,
    private readonly clock: Clock,
    private readonly log: LeaseLog,
    private readonly ttlMs = DEFAULT_LEASE_MS,
  ) {
    this.name = inner.name
  }

  private get lease(): string {
    return `background:${this.name}`
  }

  /** Whether this process runs the component now. */
  get holding(): boolean {
    return this.running
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
    await this.switching
    if (this.running) {
      this.running = false
      await this.inner.stop()
      try {
        this.leases.release(this.lease)
      } catch (err) {
        // It expires by itself; another worker then takes it.
        this.log.warn({ err, job: this.name }, 'could not give up a background lease')
      }
    }
  }

  private tick(): void {
    if (!this.started) return
    let held: boolean | undefined
    const now = this.clock.now()
    try {
      held = this.leases.take(this.lease, this.ttlMs)
      if (held) this.heldUntil = now + this.ttlMs
    } catch (err) {
      this.log.warn({ err, job: this.name }, 'could not renew a background lease')
      // Unknown: keep running while the lease surely lasts, not past it.
      if (now + this.ttlMs / 3 < this.heldUntil) held = this.running
      else held = false
    }
    if (held && !this.running) {
      this.running = true
      this.log.info({ job: this.name, holder: this.leases.holder }, 'background job taken: this worker runs it')
      // After a stop of an earlier hold has finished.
      this.switching = this.switching.then(() => {
        if (this.started && this.running) this.inner.start()
      })
    } else if (!held && this.running) {
      this.running = false
      this.log.warn({ job: this.name }, 'background lease lost: another worker runs the job now')
      this.switching = this.switching
        .then(() => this.inner.stop())
        .catch((err: unknown) => this.log.error({ err, job: this.name }, 'a background component failed to stop'))
    }
    this.timer = setTimeout(() => this.tick(), this.ttlMs / 3)
  }
}
