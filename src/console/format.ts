const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']

/** 1536 → "1.5 KiB". */
export function formatBytes(n: number): string {
  let i = 0
  let v = n
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024
    i++
  }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 1 : 0).replace(/\.0$/, '')} ${UNITS[i]}`
}

const FACTORS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 }

/** "10 GiB", "500 MB", "1048576" → bytes; null when it is not a size. */
export function parseSize(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?\s*$/i.exec(text)
  if (!m) return null
  const bytes = Math.round(Number(m[1]) * (FACTORS[(m[2] ?? 'b').toLowerCase()] ?? 1))
  return Number.isSafeInteger(bytes) ? bytes : null
}

/** An ISO time or Unix seconds, in the reader's locale. */
export function formatTime(t: string | number): string {
  const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t)
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })
}

export const percent = (used: number, quota: number): string => (quota === 0 ? '–' : `${Math.round((used / quota) * 100)}%`)
