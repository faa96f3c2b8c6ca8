import { sweepTmp, type DataDir, type TmpEntry } from '../lib/data-dir'
import type { Clock } from '../lib/clock'
import type { LeaseLog, Leases } from './leases'

/** A temp file of no node (a CLI command's, an older Coffer's) is left alone until it is this old. */
export const UNOWNED_TMP_MIN_AGE_MS = 60 * 60_000
/** How often a running server looks for what gone servers left in tmp/, besides its start. */
export const TMP_SWEEP_MS = 60_000

/**
 * A server's share of `<data-dir>/tmp` (#30): several servers use one data dir path (nodes on
 * PostgreSQL over a shared disk, `--workers N` on SQLite), each writing its partial uploads and
 * the files it is unlinking there under names that start with its node id (DiskBlobStore's
 * prefix). While it lives it holds the lease `tmp:<id>` (services/leases.ts), renewed every third
 * of the lease; a server removes, at its start and every minute, the files of the nodes whose
 * lease lapsed (gone: killed, or cut off from the database longer than the lease), never those of
 * a live one, so a node starting never fails the uploads another is receiving. Files of no node
 * go when the start is the data dir's only process (SQLite's first start, whose previous run is
 * over), or once they are an hour old.
 */
export class NodeTmp {
  private timer: NodeJS.Timeout | undefined
  private lastSweep = 0

  constructor(
    readonly id: string,
    private readonly deps: { leases: Leases; dataDir: DataDir; clock: Clock; ttlMs: number; log: LeaseLog },
  ) {}

  get lease(): string {
    return `tmp:${this.id}`
  }

  /** Takes the lease; before the server accepts an upload. Throws when the database refuses. */
  hold(): void {
    this.deps.leases.take(this.lease, this.deps.ttlMs)
  }

  /**
   * Removes what servers that are gone left in tmp/. `exclusive`: no other process uses the data
   * dir (SQLite's start, after its leases were cleared), so files of no node go whatever their age.
   */
  sweep(exclusive = false): number {
    const { leases, dataDir, clock } = this.deps
    const now = clock.now()
    this.lastSweep = now
    const live = new Map<string, boolean>()
    const gone = ({ node, mtimeMs }: TmpEntry) => {
      if (node === undefined) return exclusive || now - mtimeMs >= UNOWNED_TMP_MIN_AGE_MS
      if (node === this.id) return false
      let alive = live.get(node)
      if (alive === undefined) live.set(node, (alive = leases.holderOf(`tmp:${node}`) !== undefined))
      return !alive
    }
    return sweepTmp(dataDir, gone)
  }

  /** Renews the lease every third of it, and sweeps every TMP_SWEEP_MS; idempotent. */
  start(): void {
    if (this.timer) return
    const { ttlMs, log, clock } = this.deps
    this.timer = setInterval(() => {
      try {
        this.hold()
        if (clock.now() - this.lastSweep >= TMP_SWEEP_MS) {
          const removed = this.sweep()
          if (removed > 0) log.info({ removed }, 'removed partial uploads left by a server that is gone')
        }
      } catch (err) {
        // Tried again at the next tick, well before the lease runs out.
        log.warn({ err }, "could not renew this server's temp files lease")
      }
    }, ttlMs / 3)
  }

  /** Stops renewing and gives the lease up: once this server's uploads are over (its close). */
  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
    try {
      this.deps.leases.release(this.lease)
    } catch (err) {
      // It lapses by itself.
      this.deps.log.warn({ err }, "could not give up this server's temp files lease")
    }
  }
}
