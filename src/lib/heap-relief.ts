import v8 from 'node:v8'
import vm from 'node:vm'

/**
 * Keeps memory flat while large bodies stream through.
 *
 * Every chunk read from a socket or a file is a fresh off-heap Buffer. V8 frees them only when it
 * collects their small on-heap wrappers, and it notices the off-heap growth only at its external
 * memory soft limit (64 MB above the last collection): a 100 MiB transfer then leaves tens of MB
 * of dead chunks resident and triggers costly full collections. A young-generation collection
 * every few MiB transferred frees them while they are still young, for well under a millisecond.
 * Measured on a 100 MiB upload: peak RSS 128-147 MB without, 104 MB with (see README, Performance).
 */
const EVERY_BYTES = 8 * 1024 * 1024

/**
 * After a load, V8 keeps the heap it grew and the dead Buffers' off-heap memory until its own
 * memory reducer runs, which after the bench's write loads left RSS at 180 MB 15 s later (#29).
 * So once bytes have streamed and then none for a whole IDLE_CHECK_MS interval, one full
 * collection runs: the heap shrinks and the off-heap chunks go. Never during a load, at most once
 * per load, and the check is an unref'd timer that only runs while there was something to note.
 */
const IDLE_CHECK_MS = 5000

let gcFn: ((opts?: { type: 'minor' | 'major' }) => void) | null | undefined
let since = 0
let streamedSinceCheck = false
let idleTimer: NodeJS.Timeout | undefined
let idleCollections = 0

function gc(type: 'minor' | 'major'): void {
  if (gcFn === undefined) {
    try {
      v8.setFlagsFromString('--expose-gc')
      gcFn = (vm.runInNewContext('gc') as typeof gcFn) ?? null
    } catch {
      gcFn = null
    }
  }
  gcFn?.({ type })
}

/** Counts streamed bytes and collects the young generation every EVERY_BYTES. */
export function noteStreamed(bytes: number): void {
  streamedSinceCheck = true
  idleTimer ??= setInterval(checkIdle, IDLE_CHECK_MS).unref()
  since += bytes
  if (since < EVERY_BYTES) return
  since = 0
  gc('minor')
}

function checkIdle(): void {
  if (streamedSinceCheck) {
    streamedSinceCheck = false
    return
  }
  // A whole interval without a byte: the load is over.
  clearInterval(idleTimer)
  idleTimer = undefined
  idleCollections++
  gc('major')
}

/** Full collections made once a load was over (tests). */
export const idleCollectionCount = () => idleCollections
