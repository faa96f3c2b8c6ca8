/** What the checkpointer's thread (checkpoint-worker.ts) is started with (checkpoint.ts). */
export interface CheckpointWorkerData {
  /** The database file. */
  file: string
  /** The SQLite addon to load (sqlite-addon.ts); undefined from sources, where better-sqlite3 finds its own. */
  addon: string | undefined
  /** How long the thread sleeps between looks at the WAL unless woken. */
  intervalMs: number
  /** A PASSIVE checkpoint runs once this many frames wait to be copied (or some have waited `idleMs`). */
  frames: number
  idleMs: number
  /** Once the frames in use pass this size the WAL is checkpointed with RESTART. */
  walLimitBytes: number
  /** How long a RESTART waits for the write lock and for readers before it gives up until the next pass. */
  restartWaitMs: number
  /** Int32Array over it, indexed by WAKE: the state the main thread sets, the passes the thread ran. */
  control: SharedArrayBuffer
  /** Float64Array over it, indexed by COUNTER: totals the thread keeps and the main thread reads. */
  counters: SharedArrayBuffer
}

/** The control array's slots and the values of its `state` slot. */
export const WAKE = { state: 0, rounds: 1, slots: 2, idle: 0, now: 1, stop: 2 } as const

/** The counters array's slots: totals since the thread started. */
export const COUNTER = {
  /** Passes that copied frames, and the frames they copied. */
  passes: 0,
  frames: 1,
  /** RESTART checkpoints done, and those that found the lock or a reader held past their wait. */
  restarts: 2,
  restartBusy: 3,
  /** Time in passes that did something (ms), and the longest. */
  ms: 4,
  maxMs: 5,
  /** The largest WAL the thread saw (bytes). */
  walMaxBytes: 6,
  errors: 7,
  lastErrorAt: 8,
  /** Every pass, including those with nothing to do. */
  rounds: 9,
  slots: 10,
} as const
