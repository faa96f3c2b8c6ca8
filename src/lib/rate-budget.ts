/** One fixed window of a key: requests counted since `startMs`. */
interface Window {
  count: number
  startMs: number
}

/**
 * Per-key request counters in fixed windows, one instance per process, shared by every front: a
 * tenant has one budget whether its requests come through the API or S3 (#14 item 3). Bounded:
 * past `maxKeys` the least recently counted key is forgotten (as @fastify/rate-limit's own store).
 */
export class RateBudget {
  private readonly windows = new Map<string, Window>()

  constructor(private readonly maxKeys = 5000) {}

  /** Counts one request of `key`; returns the count in the current window and the ms it has left. */
  count(key: string, windowMs: number, now = Date.now()): { current: number; ttl: number } {
    let w = this.windows.get(key)
    if (w === undefined || w.startMs + windowMs <= now) w = { count: 0, startMs: now }
    else this.windows.delete(key) // re-inserted below: Map order is recency order
    w.count++
    this.windows.set(key, w)
    if (this.windows.size > this.maxKeys) this.windows.delete(this.windows.keys().next().value!)
    return { current: w.count, ttl: w.startMs + windowMs - now }
  }

  /** The current window of `key`, not counting anything. */
  peek(key: string, windowMs: number, now = Date.now()): { current: number; ttl: number } {
    const w = this.windows.get(key)
    if (w === undefined || w.startMs + windowMs <= now) return { current: 0, ttl: 0 }
    return { current: w.count, ttl: w.startMs + windowMs - now }
  }
}
