import type { DB } from './database'
import { datasyncFile } from '../lib/durable'

/** The connection's busy timeout (database.ts): how long a write waits for another process's lock. */
const BUSY_WAIT_MS = 5000

/** Makes a file's written data durable (fdatasync), off the event loop. */
export type SyncFile = (file: string) => Promise<void>

/**
 * Group commit for the hot write transactions (an upload's handshake and its settle).
 *
 * Such a transaction commits with `synchronous = NORMAL`: SQLite appends it to the WAL without
 * fsyncing, which keeps the database consistent after a crash but could lose the transaction on
 * a power loss. So `run` resolves only after one fdatasync of the WAL, done in the thread pool
 * and shared by every transaction committed before it started: under concurrency one flush
 * acknowledges many commits, where `synchronous = FULL` costs one fsync each, on the event loop.
 * Nothing is acknowledged before the WAL that holds it is on disk. (A checkpoint never gets
 * ahead of this: in WAL mode SQLite syncs the WAL before it copies frames into the database.)
 *
 * Every other write keeps `synchronous = FULL`, the connection's setting; a FULL commit also
 * flushes the frames of the NORMAL ones before it, as a flush covers the whole file.
 *
 * When a flush fails, what it covered may be lost while later frames could still reach the disk,
 * and SQLite's recovery stops at the first missing frame: every later acknowledgement would be a
 * lie too. So a failure is final for this process: every waiting and every later `run` rejects
 * (their transactions may or may not survive; none of them was acknowledged) until a restart
 * lets SQLite recover the WAL.
 */
export class GroupCommit {
  private readonly normal
  private readonly full
  private readonly noWait
  private readonly wait
  private readonly wal: string
  /** The flush in progress, covering every commit made before it started. */
  private running: Promise<void> | undefined
  /** The flush that starts when `running` ends, for commits made while it runs. */
  private queued: Promise<void> | undefined
  private failed: Error | undefined

  constructor(
    private readonly db: DB,
    private readonly sync: SyncFile = datasyncFile,
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
    this.noWait.get()
    this.wait.get()
    this.wal = `${db.name}-wal`
  }

  /**
   * Runs `fn` in an immediate write transaction and resolves with its result once the commit is
   * durable; rejects, with the transaction possibly committed, when it could not be made so.
   */
  async run<T>(fn: () => T): Promise<T> {
    const result = await this.commitYielding(fn)
    await this.flush()
    return result
  }

  /**
   * commitNormal without blocking the event loop on another process's write lock (#29: with
   * `coffer serve --workers N` the workers' hot commits meet at SQLite's one writer). SQLite's
   * busy handler sleeps in the calling thread, 1, 2, 5, 10 ms…, and this thread serves every other
   * request of the worker; so BEGIN IMMEDIATE is tried with no busy timeout, and while another
   * process holds the lock it is tried again on a later turn of the event loop, for as long as the
   * connection's own busy timeout. Only a BEGIN that failed is tried again: `fn` has not run then.
   */
  private async commitYielding<T>(fn: () => T): Promise<T> {
    const deadline = Date.now() + BUSY_WAIT_MS
    for (let attempt = 0; ; attempt++) {
      let entered = false
      this.noWait.get()
      try {
        return this.commitNormal(() => {
          entered = true
          return fn()
        })
      } catch (err) {
        if (entered || (err as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() > deadline) throw err
      } finally {
        this.wait.get()
      }
      await new Promise<void>((resolve) => (attempt < 4 ? setImmediate(resolve) : setTimeout(resolve, 1)))
    }
  }

  /**
   * Runs `fn` in an immediate write transaction like `run`, and starts (or joins) the WAL flush
   * that covers it without waiting for it: for a commit whose loss in a power cut costs nothing
   * acknowledged (an upload's handshake: README, Durability). A process crash (kill -9) loses
   * nothing either way: the WAL is written before this returns, only its flush is pending. Any
   * later acknowledged commit's flush covers this one too, as the WAL is flushed as a whole.
   */
  runUnflushed<T>(fn: () => T): T {
    const result = this.commitNormal(fn)
    // A failure is kept (`failed`) and refuses every later write; nobody waits for this one.
    this.flush().catch(() => undefined)
    return result
  }

  /** Commits `fn` in an immediate transaction with `synchronous = NORMAL` (no fsync of its own). */
  private commitNormal<T>(fn: () => T): T {
    if (this.failed) throw this.failed
    // SQLite refuses to change the safety level inside a transaction; callers own their transactions.
    if (this.db.inTransaction) throw new Error('GroupCommit cannot be nested in a transaction')
    this.normal.run()
    try {
      return this.db.transaction(fn).immediate()
    } finally {
      this.full.run()
    }
  }

  /** Resolves once everything committed so far is on disk. */
  flush(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed)
    if (!this.running) return this.start()
    // The running flush may have begun before our commit: wait for the next one.
    this.queued ??= this.running
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined
        return this.start()
      })
    return this.queued
  }

  private start(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed)
    const flush = this.syncWal().then(
      () => {
        if (this.running === flush) this.running = undefined
      },
      (err: unknown) => {
        if (this.running === flush) this.running = undefined
        this.failed = new Error(`could not flush the database's write-ahead log; writes are refused until a restart: ${(err as Error)?.message ?? err}`, {
          cause: err,
        })
        throw this.failed
      },
    )
    this.running = flush
    return flush
  }

  private async syncWal(): Promise<void> {
    try {
      await this.sync(this.wal)
    } catch (err) {
      // No WAL: the last connection checkpointed it into the database and removed it (a second
      // process closing); the database file then holds everything.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
      await this.sync(this.db.name)
    }
  }
}
