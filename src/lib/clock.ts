/** A source of wall-clock time in epoch milliseconds. Injected everywhere so tests never sleep. */
export interface Clock {
  now(): number
}

export const systemClock: Clock = { now: () => Date.now() }

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  constructor(private current = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.current
  }
  advance(ms: number): void {
    this.current += ms
  }
  set(ms: number): void {
    this.current = ms
  }
}

export const isoTime = (ms: number): string => new Date(ms).toISOString()
export const unixSeconds = (ms: number): number => Math.floor(ms / 1000)
