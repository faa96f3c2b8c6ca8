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

const PAD2 = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'))
const PAD3 = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'))
/** 10000-01-01: from here on toISOString writes six-digit years; those (and negatives) take the slow path. */
const FOUR_DIGIT_YEARS_END = 253_402_300_800_000

/** `YYYY-MM-DDTHH:MM:SS.` of a second since the epoch (0 ≤ second < 10000-01-01), by civil-from-days arithmetic. */
function secondPrefix(second: number): string {
  const days = Math.floor(second / 86_400)
  let rest = second - days * 86_400
  const hour = Math.floor(rest / 3600)
  rest -= hour * 3600
  const minute = Math.floor(rest / 60)
  // Howard Hinnant's days → (year, month, day) for the proleptic Gregorian calendar.
  const z = days + 719_468
  const era = Math.floor(z / 146_097)
  const doe = z - era * 146_097
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365)
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100))
  const mp = Math.floor((5 * doy + 2) / 153)
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1
  const month = mp < 10 ? mp + 3 : mp - 9
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0)
  return `${year}-${PAD2[month]}-${PAD2[day]}T${PAD2[hour]}:${PAD2[minute]}:${PAD2[rest - minute * 60]}.`
}

/**
 * An `isoTime` with a cache of the last second it formatted. `new Date(ms).toISOString()` costs
 * ~8k instructions in V8 (a C++ runtime call that goes through a printf); this costs a few
 * hundred, and a string concatenation when the second is the one formatted last (a log line's
 * timestamp nearly always is). Same output as toISOString for every millisecond (test/lib.test.ts).
 */
export function isoFormatter(): (ms: number) => string {
  let cachedSecond = -1
  let cachedPrefix = ''
  return (ms) => {
    if (!(ms >= 0 && ms < FOUR_DIGIT_YEARS_END) || !Number.isInteger(ms)) return new Date(ms).toISOString()
    const second = Math.floor(ms / 1000)
    if (second !== cachedSecond) {
      cachedPrefix = secondPrefix(second)
      cachedSecond = second
    }
    return `${cachedPrefix}${PAD3[ms - second * 1000]}Z`
  }
}

/** `new Date(ms).toISOString()`, cheaper (isoFormatter). */
export const isoTime = isoFormatter()
export const unixSeconds = (ms: number): number => Math.floor(ms / 1000)
