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
 *
 * Every 2 MiB, not 8: the young chunks' bytes count against the heap's limit until a scavenge
 * frees them, and a server's heap is small (~20 MB), so 8 MiB of them still started a full
 * mark-compact every ~20 MiB streamed. Per 100 MiB PutObject, V8's helper threads spent 110-160 ms
 * of CPU (about the MD5's 150 ms) with 8 MiB and 10-70 ms with 2 MiB, alternating in the same run;
 * the scavenges, ~50 per 100 MiB, cost the main thread no measurable time (#29,
 * scripts/bench/README.md "Where a 100 MiB PutObject's CPU goes").
 */
const EVERY_BYTES = 2 * 1024 * 1024

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
  for (const hook of idleHooks) {
    try {
      hook()
    } catch {
      // Memory given back or not, nothing depends on it.
    }
  }
  gc('major')
}

const idleHooks = new Set<() => void>()

/**
 * Runs `hook` each time a load is over, before the idle collection: for memory held outside V8
 * (SQLite's page cache). Returns a function that removes it.
 */
export function onLoadOver(hook: () => void): () => void {
  idleHooks.add(hook)
  return () => idleHooks.delete(hook)
}

/** Full collections made once a load was over (tests). */
export const idleCollectionCount = () => idleCollections

/**
 * Keeps V8's young generation at its initial size (#29). Under a load of small writes each
 * request's objects live across the group commit's flush wait (15-30 ms at c=16), so most of them
 * survive a scavenge, and V8 answers a high survival rate by growing the young generation, up to
 * 2 × 64 MiB semi-spaces here: after ten seconds of 4 KiB PutObjects the new space was 134 MB of
 * a 260-310 MB RSS, almost all of it empty. `--max-semi-space-size` is read only when the heap
 * is set up (a command-line flag: the bundle and `--workers` would each need it), while the growth
 * factor is read at each resize, so a factor of 1 holds the semi-spaces where they start. Measured
 * against the default in the same runs (put-cpu harness, scripts/bench/README.md): RSS after the
 * load 136 MB against 236 MB, and no more CPU per PutObject (more objects are promoted, but a
 * scavenge of a small space is cheap and the old generation's collections stay rare).
 */
export function boundYoungGeneration(): void {
  v8.setFlagsFromString('--semi-space-growth-factor=1')
}
