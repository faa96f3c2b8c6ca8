import type { DB } from './database'
import type { Engine } from './engine'
import { datasyncFile, KeptOpenSync } from '../lib/durable'
import { WriteStats } from './write-stats'
import type { BucketChanges } from './bucket-changes'

/** The connection's busy timeout (database.ts): how long a write waits for another process's lock. */
const BUSY_WAIT_MS = 5000

/** Makes a file's written data durable (fdatasync), off the event loop. */
export type SyncFile = (file: string) => Promise<void>

/**
 * What services use of group commit, on either database: `GroupCommit` on SQLite, `EngineCommits`
 * on PostgreSQL (`commitsFor` picks).
 */
export interface Commits {
  run<T>(fn: () => T): Promise<T>
  runUnflushed<T>(fn: () => T): T
  flush(): Promise<void>
  close(): void
  readonly stats: { batches: number; jobs: number; flushes: number; commitSeconds: number; flushSeconds: number }
  readonly writeStats: WriteStats | undefined
}

/**
 * Group commit for the hot write transactions (an upload's handshake and its settle, PutObject).
 *
 * `run` does not commit at once: the transactions that arrive while the WAL is being flushed wait,
 * and are committed together, as one SQLite transaction with a savepoint each, the moment that
 * flush ends; then one fdatasync of the WAL, in the thread pool, makes the whole batch durable.
 * A commit made during a flush could not be acknowledged before the next flush anyway, so waiting
 * costs it nothing, while one COMMIT per request cost each its own WAL frames (the pages every
 * write touches, the usage counters and the index leaves, written again for each), lock calls and
 * a share of SQLite's automatic checkpoints (now a thread's, checkpoint.ts), all on the event loop: 0.35 ms of a 4 KiB PutObject's ~1 ms of main
 * thread at c=16 (#29, scripts/bench/README.md). With no flush running a batch starts on the next
 * turn of the event loop (setImmediate), gathering what arrived in the same one.
 *
 * The batch commits with `synchronous = NORMAL`: SQLite appends it to the WAL without fsyncing,
 * which keeps the database consistent after a crash but could lose it on a power loss. So `run`
 * resolves only after the fdatasync of the WAL that started after its batch committed. Nothing is
 * acknowledged before the WAL that holds it is on disk. (A checkpoint never gets ahead of this:
 * in WAL mode SQLite syncs the WAL before it copies frames into the database, on the checkpointer's
 * connection as on this one.)
 *
 * A transaction that throws rolls back to its savepoint, rejects with its error, and the rest of
 * the batch goes on. An error that makes SQLite roll back the whole transaction (a full disk, an
 * I/O error) or a failed COMMIT rejects every transaction of that batch: none was acknowledged.
 *
 * Every other write keeps `synchronous = FULL`, the connection's setting; a FULL commit also
 * flushes the frames of the NORMAL ones before it, as a flush covers the whole file.
 *
 * When a flush fails, what it covered may be lost while later frames could still reach the disk,
 * and SQLite's recovery stops at the first missing frame: every later acknowledgement would be a
 * lie too. So a failure is final for this process: every waiting and every later `run` rejects
 * (their transactions may or may not survive; none of them was acknowledged; those still waiting
 * for their batch are never committed) until a restart lets SQLite recover the WAL.
 */
export class GroupCommit implements Commits {
  private readonly normal
  private readonly full
  private readonly noWait
  private readonly wait
  private readonly wal: string
  /** Since when another process (a worker of `--workers N`) has held the write lock the batch needs. */
  private busySince: number | undefined
  private retry: NodeJS.Timeout | undefined
  /** Transactions waiting for their batch. */
  private pending: Job[] = []
  /** The flush in progress, covering every batch committed before it started. */
  private running: Promise<void> | undefined
  /** Resolved by the flush after the running one (callers of `flush` during a flush). */
  private waiters: Waiter[] = []
  /** A batch is scheduled for the next turn of the event loop. */
  private scheduled = false
  /** Something was committed (runUnflushed) that no flush has started to cover yet. */
  private dirty = false
  private failed: Error | undefined
  /** Totals since start, for /metrics (#29): batch sizes, flushes, and the time each took. */
  readonly stats = { batches: 0, jobs: 0, flushes: 0, commitSeconds: 0, flushSeconds: 0 }

  /** The WAL, kept open between flushes (unless a `sync` of the caller's is given). */
  private readonly walFile: KeptOpenSync | undefined
  /** COFFER_WRITE_STATS: per-stage counters (write-stats.ts); undefined when unset. */
  readonly writeStats: WriteStats | undefined

  constructor(
    private readonly db: DB,
    private readonly sync?: SyncFile,
    /** The bucket state cache's view of other connections' commits: read once per batch (#29). */
    private readonly changes?: BucketChanges,
  ) {
    this.normal = db.prepare('PRAGMA synchronous = NORMAL')
    this.full = db.prepare('PRAGMA synchronous = FULL')
    this.noWait = db.prepare('PRAGMA busy_timeout = 0')
    this.wait = db.prepare(`PRAGMA busy_timeout = ${BUSY_WAIT_MS}`)
    // SQLite applies a PRAGMA when it compiles it: at prepare, and at each later step, which
    // compiles it again (it expires after running), but not at the first step after prepare. Each
    // is stepped once here, in an order that leaves the connection as it was (FULL, the busy
    // timeout), so that every later call takes effect (the first NORMAL commit was FULL, and the
    // first wait for another worker's lock slept in SQLite's busy handler: test/group-commit.test.ts).
    this.normal.run()
    this.full.run()
    this.noWait.run()
    this.wait.run()
    // run(), not get(): a PRAGMA is compiled again at each step, and get() then built its one-row
    // answer with a new row factory, which better-sqlite3 compiles with Function(): ~1% of a 4 KiB
    // PutObject's CPU, twice per batch (#29).
    this.wal = `${db.name}-wal`
    if (!sync) this.walFile = new KeptOpenSync(this.wal)
    this.writeStats = WriteStats.fromEnv(this.wal)
  }

  /** Closes the WAL's descriptor (once a flush in flight ends); before the database closes. */
  close(): void {
    if (this.retry) clearTimeout(this.retry)
    this.writeStats?.close()
    this.walFile?.close()
  }

  /**
   * Runs `fn` in a write transaction of the next batch and resolves with its result once the
   * commit is durable; rejects, with the transaction possibly committed, when it could not be made
   * so. `fn` runs later than the call (inside the batch), never before it returns.
   */
  run<T>(fn: () => T): Promise<T> {
    if (this.failed) return Promise.reject(this.failed)
    // SQLite refuses to change the safety level inside a transaction; callers own their transactions.
    if (this.db.inTransaction) return Promise.reject(new Error('GroupCommit cannot be nested in a transaction'))
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ fn, resolve: resolve as (value: unknown) => void, reject })
      this.schedule()
    })
  }

  /**
   * Runs `fn` in an immediate write transaction of its own, now, and starts (or joins) the WAL
   * flush that covers it without waiting for it: for a commit whose loss in a power cut costs
   * nothing acknowledged (an upload's handshake: README, Durability). A process crash (kill -9)
   * loses nothing either way: the WAL is written before this returns, only its flush is pending.
   * Any later acknowledged commit's flush covers this one too, as the WAL is flushed as a whole.
   */
  runUnflushed<T>(fn: () => T): T {
    if (this.failed) throw this.failed
    if (this.db.inTransaction) throw new Error('GroupCommit cannot be nested in a transaction')
    this.normal.run()
    let result: T
    try {
      result = this.db.transaction(fn).immediate()
    } finally {
      this.full.run()
    }
    this.dirty = true
    // A failure is kept (`failed`) and refuses every later write; nobody waits for this one.
    if (!this.running) this.cycle()
    return result
  }

  /** Resolves once everything committed so far is on disk. */
  flush(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed)
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ resolve, reject })
      this.dirty = true
      this.schedule()
    })
  }

  private schedule(): void {
    // A running flush starts the next batch when it ends.
    if (this.running || this.scheduled) return
    this.scheduled = true
    setImmediate(() => {
      this.scheduled = false
      this.cycle()
    })
  }

  /** Commits the waiting transactions as one batch, then flushes the WAL for them. */
  private cycle(): void {
    if (this.running) return
    if (this.failed) return this.refuseWaiting(this.failed)
    const jobs = this.pending
    this.pending = []
    const began = performance.now()
    const { committed, busy } = jobs.length > 0 ? this.commitBatch(jobs) : { committed: [], busy: [] }
    if (jobs.length > 0) this.stats.commitSeconds += (performance.now() - began) / 1000
    if (busy.length > 0) {
      // Another worker holds SQLite's one write lock: these wait for a later turn of the event
      // loop rather than in SQLite's busy handler, which sleeps in this thread (#29).
      this.pending = busy.concat(this.pending)
      this.retry ??= setTimeout(() => {
        this.retry = undefined
        this.cycle()
      }, 1)
    }
    const waiters = this.waiters
    this.waiters = []
    if (committed.length === 0 && waiters.length === 0 && !this.dirty) return
    this.dirty = false
    const flushing = performance.now()
    this.running = this.syncWal().then(
      () => {
        this.running = undefined
        this.stats.flushes++
        this.stats.flushSeconds += (performance.now() - flushing) / 1000
        for (const job of committed) job.resolve(job.value)
        for (const w of waiters) w.resolve()
        if (this.pending.length > 0 || this.waiters.length > 0 || this.dirty) this.cycle()
      },
      (err: unknown) => {
        this.running = undefined
        this.failed = new Error(`could not flush the database's write-ahead log; writes are refused until a restart: ${(err as Error)?.message ?? err}`, {
          cause: err,
        })
        for (const job of committed) job.reject(this.failed)
        for (const w of waiters) w.reject(this.failed)
        this.refuseWaiting(this.failed)
      },
    )
  }

  private refuseWaiting(err: Error): void {
    const jobs = this.pending
    const waiters = this.waiters
    this.pending = []
    this.waiters = []
    for (const job of jobs) job.reject(err)
    for (const w of waiters) w.reject(err)
  }

  /**
   * Runs `jobs` in one immediate transaction (with `synchronous = NORMAL`), each in a savepoint of
   * its own; rejects those that failed and returns those committed, with their results, and those
   * not begun because another process holds the write lock (`busy`, for up to the busy timeout;
   * after that the BEGIN waits in SQLite's busy handler as any other write does).
   */
  private commitBatch(jobs: Job[]): { committed: Job[]; busy: Job[] } {
    const committed: Job[] = []
    let next = 0
    while (next < jobs.length) {
      const batch: Job[] = []
      let entered = false
      const yielding = this.busySince === undefined || Date.now() - this.busySince < BUSY_WAIT_MS
      const t0 = this.writeStats ? performance.now() : 0
      try {
        // Throws when the connection was closed meanwhile (a shutdown): every job then fails.
        this.normal.run()
        if (yielding) this.noWait.run()
        const runJobs = () => {
          entered = true
          for (; next < jobs.length; next++) {
            const job = jobs[next]!
            try {
              // Nested: better-sqlite3 makes it a savepoint, rolled back alone when fn throws.
              job.value = this.db.transaction(job.fn)()
              batch.push(job)
            } catch (err) {
              job.reject(err)
              // SQLite rolled the whole transaction back (SQLITE_FULL, SQLITE_IOERR…): the
              // batch so far is gone too; the rest goes in a new transaction.
              if (!this.db.inTransaction) {
                next++
                throw new BatchLost(err)
              }
            }
          }
        }
        // Holding the write lock, no other connection commits until this one does: one read of
        // the data version serves every job's bucket state (services/bucket-cache.ts).
        this.db.transaction(() => (this.changes ? this.changes.within(runJobs) : runJobs())).immediate()
        committed.push(...batch)
        this.stats.batches++
        this.stats.jobs += batch.length
        if (this.writeStats) {
          this.writeStats.batches++
          this.writeStats.jobs += batch.length
          this.writeStats.jobsMax = Math.max(this.writeStats.jobsMax, batch.length)
          const ms = performance.now() - t0
          this.writeStats.commitMs += ms
          this.writeStats.commitMsMax = Math.max(this.writeStats.commitMsMax, ms)
          if (this.busySince !== undefined) {
            this.writeStats.busyWaits++
            this.writeStats.busyWaitMs += Date.now() - this.busySince
          }
        }
        this.busySince = undefined
      } catch (err) {
        if (!entered && yielding && (err as { code?: string }).code === 'SQLITE_BUSY') {
          if (this.writeStats) this.writeStats.busy++
          this.busySince ??= Date.now()
          return { committed, busy: jobs.slice(next) }
        }
        const cause = err instanceof BatchLost ? err.cause : err
        for (const job of batch) job.reject(cause)
        // BEGIN or COMMIT failed: nothing of what is left was run, or all of it was rolled back.
        if (!(err instanceof BatchLost)) for (; next < jobs.length; next++) jobs[next]!.reject(cause)
      } finally {
        if (this.db.open) {
          if (yielding) this.wait.run()
          this.full.run()
        }
      }
    }
    return { committed, busy: [] }
  }

  private async syncWal(): Promise<void> {
    const t0 = this.writeStats ? performance.now() : 0
    try {
      await (this.walFile ? this.walFile.datasync() : this.sync!(this.wal))
      if (this.writeStats) {
        this.writeStats.flushes++
        this.writeStats.flushMs += performance.now() - t0
      }
    } catch (err) {
      // No WAL: the last connection checkpointed it into the database and removed it (a second
      // process closing); the database file then holds everything.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
      await (this.sync ?? datasyncFile)(this.db.name)
    }
  }
}

interface Job {
  fn: () => unknown
  value?: unknown
  resolve: (value: unknown) => void
  reject: (err: unknown) => void
}

interface Waiter {
  resolve: () => void
  reject: (err: unknown) => void
}

/** A transaction's error that made SQLite roll back the whole batch. */
class BatchLost extends Error {
  constructor(override readonly cause: unknown) {
    super('the batch was rolled back', { cause })
  }
}

/**
 * Group commit's interface on PostgreSQL (#30): each unit is an engine transaction of its own,
 * retried there after a serialization failure or a deadlock, and durable when its COMMIT returns
 * (`synchronous_commit = on`, PostgreSQL's default: the server flushes its WAL before it answers).
 * There is no WAL of ours to flush, so `flush` has nothing to wait for and `runUnflushed` is
 * `run` without the wait. Sharing one flush among a node's concurrent writes, as GroupCommit does
 * on SQLite, is left to the server (README, "Metadata in PostgreSQL"): the bridge's one connection
 * runs one transaction at a time, and PostgreSQL already groups the flushes of its connections'
 * commits (`commit_delay`, `commit_siblings`).
 */
export class EngineCommits implements Commits {
  readonly stats = { batches: 0, jobs: 0, flushes: 0, commitSeconds: 0, flushSeconds: 0 }
  readonly writeStats = undefined

  constructor(private readonly engine: Engine) {}

  /**
   * Runs `fn` in a transaction of its own once the caller's turn of the event loop is over (as
   * GroupCommit's batch: never before `run` returns); counted in `stats` as a batch of one.
   */
  async run<T>(fn: () => T): Promise<T> {
    await new Promise<void>((resolve) => setImmediate(resolve))
    const began = performance.now()
    try {
      const value = this.engine.transaction(fn)
      this.stats.batches++
      this.stats.jobs++
      return value
    } finally {
      this.stats.commitSeconds += (performance.now() - began) / 1000
    }
  }

  runUnflushed<T>(fn: () => T): T {
    return this.engine.transaction(fn)
  }

  flush(): Promise<void> {
    return Promise.resolve()
  }

  close(): void {}
}

/** Group commit for a database: GroupCommit on SQLite (its WAL flushed once per batch), EngineCommits on PostgreSQL. */
export function commitsFor(db: DB | Engine, sync?: SyncFile, changes?: BucketChanges): Commits {
  if (!('dialect' in db)) return new GroupCommit(db, sync, changes)
  if (db.dialect === 'postgres') return new EngineCommits(db)
  return new GroupCommit((db as Engine & { db: DB }).db, sync, changes)
}
