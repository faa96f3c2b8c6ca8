// The checkpointer's thread (checkpoint.ts, #29): a connection of its own to the database that
// copies the WAL's frames into it, so that no COMMIT of the serving connection ever does (each ran
// SQLite's automatic checkpoint, two fsyncs and up to 1000 pages of writes, on the event loop).
// It sleeps on a shared flag between passes; the main thread raises it to stop or to wake it.
import fs from 'node:fs'
import os from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import Database from 'better-sqlite3'
import { COUNTER, WAKE, type CheckpointWorkerData } from './checkpoint-protocol'

const { file, addon, intervalMs, frames, idleMs, walLimitBytes, restartWaitMs, control, counters } = workerData as CheckpointWorkerData
const flags = new Int32Array(control)
const count = new Float64Array(counters)

function dlopen(path: string): object {
  const mod = { exports: {} }
  process.dlopen(mod, path)
  return mod.exports
}

// better-sqlite3 accepts the loaded addon object; its type declarations only know the path form.
const db = new Database(file, addon ? { nativeBinding: dlopen(addon) as unknown as string, fileMustExist: true } : { fileMustExist: true })
// The WAL is synced before frames are copied out of it and the database after (in WAL mode, at
// NORMAL and FULL alike): a checkpoint never makes a frame durable that the WAL flush had not.
db.pragma('synchronous = FULL')
// It writes nothing itself; SQLite's own threshold stays out of its way too.
db.pragma('wal_autocheckpoint = 0')
// A PASSIVE checkpoint never waits. The RESTART waits in SQLite's busy handler, in this thread,
// for the write lock (a batch of the serving connection, at most a few ms) and for readers to
// leave the WAL; past that it gives up, and the next pass tries again.
db.pragma(`busy_timeout = ${restartWaitMs}`)
const wal = `${file}-wal`

function walBytes(): number {
  try {
    return fs.statSync(wal).size
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw err
  }
}

/**
 * The frames waiting to be copied, read from the wal-index (the -shm file SQLite maps, whose layout
 * is documented: https://www.sqlite.org/walformat.html, "The WAL-Index Header"): its header's
 * mxFrame (offset 16) less the checkpoint's nBackfill (offset 96), in the machine's byte order.
 * One pread, where asking SQLite (a PASSIVE checkpoint) costs an fsync of the WAL and one of the
 * database as soon as a single frame waits: run every 50 ms, those fsyncs cost the group commit's
 * WAL flushes more than the checkpoint saved the event loop. A torn read only moves a pass earlier
 * or later. Undefined when the file cannot be read: every look is then a pass.
 */
const shm = `${file}-shm`
const header = Buffer.alloc(100)
const littleEndian = os.endianness() === 'LE'
let shmFd: number | undefined
function walIndex(): { frames: number; waiting: number } | undefined {
  try {
    shmFd ??= fs.openSync(shm, 'r')
    if (fs.readSync(shmFd, header, 0, header.length, 0) < header.length) return undefined
  } catch {
    return undefined
  }
  const mxFrame = littleEndian ? header.readUInt32LE(16) : header.readUInt32BE(16)
  const nBackfill = littleEndian ? header.readUInt32LE(96) : header.readUInt32BE(96)
  return { frames: mxFrame, waiting: mxFrame - nBackfill }
}

/** A frame's size in the WAL: a page and its 24-byte header. */
const frameBytes = (db.pragma('page_size', { simple: true }) as number) + 24

let lastPass = performance.now()

interface CheckpointRow {
  busy: number
  log: number
  checkpointed: number
}

function pass(forced: boolean): void {
  const t0 = performance.now()
  const index = walIndex()
  const waiting = index?.waiting
  // Like SQLite's own threshold (1000 frames), or whatever waits once the writes pause.
  const due = forced || waiting === undefined || waiting >= frames || (waiting > 0 && t0 - lastPass >= idleMs)
  let copied = 0
  let inUse = index?.frames ?? 0
  if (due) {
    lastPass = t0
    const [passive] = db.pragma('wal_checkpoint(PASSIVE)') as CheckpointRow[]
    // `checkpointed` counts every frame of the WAL copied so far, by earlier passes too.
    copied = Math.max(0, passive!.checkpointed - (index ? index.frames - index.waiting : 0))
    inUse = Math.max(0, passive!.log)
    if (copied > 0) {
      count[COUNTER.passes]!++
      count[COUNTER.frames]! += copied
    }
  }
  const size = walBytes()
  count[COUNTER.walMaxBytes] = Math.max(count[COUNTER.walMaxBytes]!, size)
  // Under a steady load the writer may never find the WAL wholly copied when it begins (it then
  // starts over at the WAL's head), and the file would grow without end: once the frames in use
  // pass the limit, the write lock is taken (after a PASSIVE pass, little is left to copy under
  // it) and the next write starts the WAL over. RESTART, not TRUNCATE: the file keeps its blocks,
  // so the writes that follow overwrite them, where appending to an emptied file allocated blocks
  // in every COMMIT, on the event loop, each waiting behind the journal commit of the database's
  // fsync (batches of 137 ms while a pass ran, measured). The file is as large as the most frames
  // the WAL held: the limit and what came while the RESTART waited.
  const over = inUse * frameBytes > walLimitBytes
  if (over) {
    const [restart] = db.pragma('wal_checkpoint(RESTART)') as CheckpointRow[]
    if (restart!.busy) count[COUNTER.restartBusy]!++
    else count[COUNTER.restarts]!++
  }
  const ms = performance.now() - t0
  if (copied > 0 || over) {
    count[COUNTER.ms]! += ms
    count[COUNTER.maxMs] = Math.max(count[COUNTER.maxMs]!, ms)
  }
}

let failing = false
try {
  for (;;) {
    // Sleeps until the interval ends or the main thread changes the flag (a wake-up or the stop).
    const state = Atomics.load(flags, WAKE.state)
    if (state === WAKE.stop) break
    if (state !== WAKE.now) Atomics.wait(flags, WAKE.state, state, intervalMs)
    if (Atomics.load(flags, WAKE.state) === WAKE.stop) break
    const forced = Atomics.compareExchange(flags, WAKE.state, WAKE.now, WAKE.idle) === WAKE.now
    try {
      pass(forced)
      failing = false
    } catch (err) {
      // An I/O error, a full disk: the serving connection's commits are not at risk (only a copy
      // failed); counted, told to the main thread's log once per run of failures, tried again
      // at the next pass.
      count[COUNTER.errors]!++
      count[COUNTER.lastErrorAt] = Date.now()
      if (!failing) parentPort?.postMessage({ error: (err as Error).message, code: (err as { code?: string }).code })
      failing = true
    }
    count[COUNTER.rounds]!++
    Atomics.add(flags, WAKE.rounds, 1)
    Atomics.notify(flags, WAKE.rounds)
  }
} finally {
  if (shmFd !== undefined) fs.closeSync(shmFd)
  db.close()
}
