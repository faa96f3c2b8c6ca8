import fs from 'node:fs'

/**
 * Per-stage counters of the group commit (#29), behind COFFER_WRITE_STATS=<seconds>: every that
 * many seconds each process (each worker of `--workers N`) writes one JSON line to stderr with
 * what its group commit did since the last line. Off (no timer, no clock reads) when unset. For
 * measuring the cross-worker write path (scripts/bench/README.md, "--workers 2 beside --workers 1").
 */
export class WriteStats {
  /** Batches committed, and the transactions they carried. */
  batches = 0
  jobs = 0
  /** Time spent committing batches on the event loop (BEGIN to COMMIT), ms, and the longest batch's. */
  commitMs = 0
  commitMsMax = 0
  /** The most transactions one batch carried. */
  jobsMax = 0
  /** WAL flushes (fdatasync) and the time they took, ms. */
  flushes = 0
  flushMs = 0
  /** BEGINs that found the write lock held by another process, and the ms from the first to the take-over. */
  busy = 0
  busyWaits = 0
  busyWaitMs = 0

  private readonly timer: NodeJS.Timeout

  private constructor(
    seconds: number,
    private readonly wal: string,
  ) {
    this.timer = setInterval(() => this.report(seconds), seconds * 1000)
    this.timer.unref()
  }

  /** The stats of a group commit on `wal`, or undefined when COFFER_WRITE_STATS is unset. */
  static fromEnv(wal: string, env: NodeJS.ProcessEnv = process.env): WriteStats | undefined {
    const seconds = Number(env.COFFER_WRITE_STATS)
    return Number.isFinite(seconds) && seconds > 0 ? new WriteStats(seconds, wal) : undefined
  }

  close(): void {
    clearInterval(this.timer)
  }

  /** The counters since the last snapshot, per batch, flush and second of `seconds`; resets them. */
  snapshot(seconds: number): Record<string, number | undefined> {
    let walBytes: number | undefined
    try {
      walBytes = fs.statSync(this.wal).size
    } catch {
      walBytes = undefined
    }
    const r = (n: number) => Math.round(n * 100) / 100
    const out = {
      seconds,
      batches: this.batches,
      jobsPerBatch: this.batches ? r(this.jobs / this.batches) : 0,
      commitMsPerBatch: this.batches ? r(this.commitMs / this.batches) : 0,
      commitMsMax: r(this.commitMsMax),
      jobsMax: this.jobsMax,
      flushes: this.flushes,
      flushesPerSecond: r(this.flushes / seconds),
      jobsPerFlush: this.flushes ? r(this.jobs / this.flushes) : 0,
      flushMsAvg: this.flushes ? r(this.flushMs / this.flushes) : 0,
      busy: this.busy,
      busyWaits: this.busyWaits,
      busyWaitMsAvg: this.busyWaits ? r(this.busyWaitMs / this.busyWaits) : 0,
      walBytes,
    }
    this.batches = this.jobs = this.commitMs = this.commitMsMax = this.jobsMax = this.flushes = this.flushMs = this.busy = this.busyWaits = this.busyWaitMs = 0
    return out
  }

  private report(seconds: number): void {
    process.stderr.write(JSON.stringify({ writeStats: process.pid, ...this.snapshot(seconds) }) + '\n')
  }
}
