import { UNLIMITED_QUOTA } from './file-types'

const UNITS: Record<string, number> = { '': 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 }

/**
 * A number of bytes as a person types it: digits, optionally a unit (500MiB, 10GiB, 1TB;
 * KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000), or, for a quota, `unlimited`.
 * Undefined when it is none of these or not a safe integer.
 */
export function parseSize(text: string, opts: { unlimited?: boolean } = {}): number | undefined {
  const trimmed = text.trim()
  if (opts.unlimited && trimmed.toLowerCase() === 'unlimited') return UNLIMITED_QUOTA
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(trimmed)
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined
  const bytes = m && unit !== undefined ? Math.round(Number(m[1]) * unit) : NaN
  return Number.isSafeInteger(bytes) ? bytes : undefined
}

/** A quota as shown to a person: `unlimited`, or its bytes. */
export const quotaText = (bytes: number): string => (bytes >= UNLIMITED_QUOTA ? 'unlimited' : `${bytes}`)
