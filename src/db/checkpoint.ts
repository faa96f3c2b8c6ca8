import { Worker } from 'node:worker_threads'
import type { Background } from '../lib/background'
import type { DB } from './database'
import { sqliteAddonFile } from './sqlite-addon'
import { COUNTER, WAKE, type CheckpointWorkerData } from './checkpoint-protocol'
import { checkpointWorkerSource } from './checkpoint-worker-source'

/** How the checkpointer runs (#29). */
export interface CheckpointOptions {
  /** How often its thread looks for frames to copy. */
  intervalMs: number
  /** How many frames waiting make a PASSIVE checkpoint (SQLite's automatic one: 1000)... */
  frames: number
  /** ...or how long any frame has waited. */
  idleMs: number
  /** The WAL's bound: once its frames in use pass it, a RESTART checkpoint (which takes the write lock) has the next write start it over. */
  walLimitBytes: number
  /** How long a RESTART waits for the write lock and for readers before trying at the next pass. */
  restartWaitMs: number
}

export const DEFAULT_CHECKPOINT: CheckpointOptions = { intervalMs: 10, frames: 1000, idleMs: 1000, walLimitBytes: 16 * 1024 * 1024, restartWaitMs: 250 }

/**
 * The defaults, or COFFER_CHECKPOINT_INTERVAL_MS, COFFER_CHECKPOINT_FRAMES and COFFER_WAL_LIMIT_BYTES
 * (for tests and the bench, not settings: README, Durability).
 */
export function checkpointOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): CheckpointOptions {
  const positive = (value: string | undefined, def: number) => {
    const n = Number(value)
    return value !== undefined && Number.isSafeInteger(n) && n > 0 ? n : def
  }
  return {
    intervalMs: positive(env.COFFER_CHECKPOINT_INTERVAL_MS, DEFAULT_CHECKPOINT.intervalMs),
    frames: positive(env.COFFER_CHECKPOINT_FRAMES, DEFAULT_CHECKPOINT.frames),
    idleMs: DEFAULT_CHECKPOINT.idleMs,
    walLimitBytes: positive(env.COFFER_WAL_LIMIT_BYTES, DEFAULT_CHECKPOINT.walLimitBytes),
    restartWaitMs: DEFAULT_CHECKPOINT.restartWaitMs,
  }
}

/**
 * Stops SQLite's automatic checkpoint on the serving connection: the checkpointer does it instead.
 * It ran inside the COMMIT that took the WAL past 1000 pages: a WAL fsync, up to 1000 page writes
 * and a database fsync on the event loop, 2.4 ms for 3 frames and 18 ms for 3,000 measured on this
 * machine, which made one batch in some hundreds many times longer than the rest (#29). Each
 * process of `--workers N` turns it off; the one holding the checkpointer's lease checkpoints.
 */
export function handOffCheckpoints(db: DB): void {
  db.pragma('wal_autocheckpoint = 0')
}

/** The checkpointer's totals since this process started it. */
export interface CheckpointCounters {
  passes: number
  frames: number
  restarts: number
  restartBusy: number
  ms: number
  maxMs: number
  walMaxBytes: number
  errors: number
  rounds: number
}

/** What it logs through (the server's pino logger). */
export interface CheckpointLog {
  warn(fields: object, message: string): void
  error(fields: object, message: string): void
}

/**
 * Copies the WAL into the database on a connection of its own, in a worker thread (#29): the
 * serving connection never checkpoints (handOffCheckpoints), so no request waits for one. Every
 * `intervalMs` the thread looks at how many frames wait; past `frames` (or when some have waited
 * `idleMs`) it runs a PASSIVE checkpoint, which waits for no lock and leaves every writer and
 * reader alone; once the WAL's frames in use pass `walLimitBytes` (a steady load can keep the
 * writer from ever finding it wholly copied, when SQLite would start it over), a RESTART
 * checkpoint takes the write lock for the few frames left, and the next write starts the WAL
 * over at its head, in the blocks the file already has. The serving
 * connection's group commit meets that lock as it meets another worker's: its batch waits for a
 * later turn of the event loop (group-commit.ts), not in a busy handler.
 *
 * Durability is SQLite's: the checkpoint syncs the WAL before it copies a frame, and the database
 * before the WAL may be started over; a kill at any point leaves the WAL and database SQLite's
 * recovery reads (test/checkpoint.test.ts). A Background: with `--workers N` it runs in the one
 * process that holds its lease (server.ts).
 */
export class Checkpointer implements Background {
  readonly name = 'checkpoint'
  private readonly control = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * WAKE.slots)
  private readonly flags = new Int32Array(this.control)
  private readonly countersBuffer = new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT * COUNTER.slots)
  private readonly count = new Float64Array(this.countersBuffer)
  private worker: Worker | undefined
  private exited: Promise<void> | undefined
  private started = false
  private restart: NodeJS.Timeout | undefined
  /** COFFER_WRITE_STATS=<seconds>: a line of what the thread did every that many seconds (write-stats.ts). */
  private report: NodeJS.Timeout | undefined
  private reported: CheckpointCounters | undefined

  constructor(
    private readonly file: string,
    private readonly dataDir: string,
    private readonly options: CheckpointOptions,
    private readonly log: CheckpointLog,
  ) {}

  /** The checkpointer of `db`, the serving connection. */
  static of(db: DB, dataDir: string, options: CheckpointOptions, log: CheckpointLog): Checkpointer {
    return new Checkpointer(db.name, dataDir, options, log)
  }

  /** Whether its thread runs now. */
  get running(): boolean {
    return this.worker !== undefined
  }

  start(): void {
    if (this.started) return
    this.started = true
    this.spawn()
    const seconds = Number(process.env.COFFER_WRITE_STATS)
    if (Number.isFinite(seconds) && seconds > 0) {
      this.reported = this.counters()
      this.report = setInterval(() => process.stderr.write(JSON.stringify({ checkpointStats: process.pid, ...this.snapshot(seconds) }) + '\n'), seconds * 1000)
      this.report.unref()
    }
  }

  /** What the thread did since the last snapshot (the longest pass and the largest WAL: since the last one too). */
  snapshot(seconds: number): Record<string, number> {
    const now = this.counters()
    const last = this.reported ?? now
    this.reported = now
    // Maxima start over (a race with the thread's own update costs one sample of a diagnostic).
    this.count[COUNTER.maxMs] = 0
    this.count[COUNTER.walMaxBytes] = 0
    const passes = now.passes - last.passes
    const r = (n: number) => Math.round(n * 100) / 100
    return {
      seconds,
      passes,
      framesPerPass: passes ? r((now.frames - last.frames) / passes) : 0,
      msPerPass: passes ? r((now.ms - last.ms) / passes) : 0,
      maxMs: r(now.maxMs),
      restarts: now.restarts - last.restarts,
      restartBusy: now.restartBusy - last.restartBusy,
      walMaxBytes: now.walMaxBytes,
      errors: now.errors - last.errors,
    }
  }

  async stop(): Promise<void> {
    this.started = false
    clearInterval(this.report)
    clearTimeout(this.restart)
    this.restart = undefined
    const exited = this.exited
    if (!exited) return
    Atomics.store(this.flags, WAKE.state, WAKE.stop)
    Atomics.notify(this.flags, WAKE.state)
    // Waited for: its connection closes before the serving one does (or the process exits).
    this.worker?.ref()
    await exited
  }

  /** Runs a pass now (instead of at the end of the interval) and resolves once it is done. */
  async wake(): Promise<void> {
    if (!this.worker) throw new Error('the checkpointer is not running')
    const before = Atomics.load(this.flags, WAKE.rounds)
    if (Atomics.compareExchange(this.flags, WAKE.state, WAKE.idle, WAKE.now) === WAKE.idle) Atomics.notify(this.flags, WAKE.state)
    // Done once a pass began after the wake-up was taken (the state back to idle) and ended.
    for (;;) {
      const rounds = Atomics.load(this.flags, WAKE.rounds)
      if (rounds !== before && Atomics.load(this.flags, WAKE.state) !== WAKE.now) return
      if (!this.worker) throw new Error('the checkpointer stopped')
      const waited = Atomics.waitAsync(this.flags, WAKE.rounds, rounds, 1000)
      if (waited.async) await waited.value
    }
  }

  counters(): CheckpointCounters {
    const c = this.count
    return {
      passes: c[COUNTER.passes]!,
      frames: c[COUNTER.frames]!,
      restarts: c[COUNTER.restarts]!,
      restartBusy: c[COUNTER.restartBusy]!,
      ms: c[COUNTER.ms]!,
      maxMs: c[COUNTER.maxMs]!,
      walMaxBytes: c[COUNTER.walMaxBytes]!,
      errors: c[COUNTER.errors]!,
      rounds: c[COUNTER.rounds]!,
    }
  }

  private spawn(): void {
    Atomics.store(this.flags, WAKE.state, WAKE.idle)
    const data: CheckpointWorkerData = {
      file: this.file,
      addon: sqliteAddonFile(this.dataDir),
      intervalMs: this.options.intervalMs,
      frames: this.options.frames,
      idleMs: this.options.idleMs,
      walLimitBytes: this.options.walLimitBytes,
      restartWaitMs: this.options.restartWaitMs,
      control: this.control,
      counters: this.countersBuffer,
    }
    const source = checkpointWorkerSource()
    const opts = { workerData: data, name: 'coffer-checkpoint' }
    // The bundled thread allocates a few objects a pass: small heaps keep its share of the RSS
    // small. (From sources the TypeScript loader runs in it too, and needs far more.)
    const bundled = { ...opts, eval: true, resourceLimits: { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 16 } }
    const worker = 'code' in source ? new Worker(source.code, bundled) : new Worker(source.file, opts)
    // The thread must not keep a process alive that has nothing else to do.
    worker.unref()
    this.worker = worker
    let failure: unknown
    worker.on('error', (err) => {
      failure = err
    })
    worker.on('message', (m: { error: string; code?: string }) => this.log.warn(m, 'a checkpoint failed; the next pass tries again'))
    this.exited = new Promise<void>((resolve) =>
      worker.once('exit', (code) => {
        this.worker = undefined
        this.exited = undefined
        resolve()
        if (!this.started) return
        // The WAL grows while no thread checkpoints it: a new one, after a moment.
        this.log.error({ err: failure, code }, 'the checkpointer thread stopped; starting it again')
        this.restart = setTimeout(() => {
          this.restart = undefined
          if (this.started) this.spawn()
        }, 1000)
        this.restart.unref()
      }),
    )
  }
}
