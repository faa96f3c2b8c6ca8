import v8 from 'node:v8'
import vm from 'node:vm'

/**
 * One full collection once the server has started (#29: idle RSS of a CI fixture ≤ 60 MB).
 *
 * Start-up allocates a lot that is garbage a moment later (module evaluation, route schemas
 * compiled, migrations), and grows the young generation to several MB on the way; an idle server
 * then allocates too little for V8 ever to collect it or shrink that space again. A last-resort
 * collection (what V8 does on a low-memory notification: a full GC that also shrinks the young
 * generation and releases freed pages to the system) measured 48 → 38 MB of anonymous memory on
 * an idle `serve --ephemeral`. It runs once, a moment after start, so it does not delay the first
 * requests; it is a few tens of milliseconds on the main thread.
 */
export function settleHeap(): boolean {
  try {
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc') as ((opts: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void) | undefined
    if (!gc) return false
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
    return true
  } catch {
    return false
  }
}

/** How long after start the collection runs: after a CI job's first requests, before it idles. */
export const SETTLE_AFTER_MS = 1000
