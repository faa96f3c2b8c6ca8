export type RangeResult = { kind: 'full' } | { kind: 'partial'; start: number; end: number } | { kind: 'unsatisfiable' }

/**
 * Interprets a `Range` header for a representation of `size` bytes (RFC 9110 §14).
 * One byte range is honoured; several ranges, other units or malformed values are ignored
 * (the whole representation is sent), which §14.2 permits.
 *
 * Not the `range-parser` package (#11 asked for it): range-parser 1.3.0 answers "unsatisfiable"
 * for a suffix longer than the content (`bytes=-5000` on 1000 bytes), where RFC 9110 §14.1.3 and
 * S3 both send the whole content as 206, and for an invalid range (`bytes=9-3`), which §14.2 says
 * to ignore. Wrapping it to undo both would take as much code as this parser, which
 * test/lib.test.ts and test/downloads.test.ts pin down case by case.
 */
export function parseRange(header: string | undefined, size: number): RangeResult {
  if (header === undefined) return { kind: 'full' }
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header)
  if (!m || (m[1] === '' && m[2] === '')) return { kind: 'full' }
  if (m[1] === '') {
    // Suffix range: the last N bytes.
    const n = Number(m[2])
    if (n === 0) return { kind: 'unsatisfiable' }
    return size === 0 ? { kind: 'unsatisfiable' } : { kind: 'partial', start: Math.max(0, size - n), end: size - 1 }
  }
  const start = Number(m[1])
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1)
  if (m[2] !== '' && Number(m[2]) < start) return { kind: 'full' } // invalid: ignore
  if (start >= size) return { kind: 'unsatisfiable' }
  return { kind: 'partial', start, end }
}

/**
 * True when an `If-Match` header matches the strong ETag `etag`: `*` (the content exists) or one
 * of the listed tags, compared strongly (RFC 9110 §13.1.1: a weak tag never matches).
 */
export function ifMatch(header: string, etag: string): boolean {
  if (header.trim() === '*') return true
  return header.split(',').some((tag) => tag.trim() === etag)
}

/** An HTTP-date as epoch ms rounded down to the second (the precision of the header), or NaN. */
export function httpDateMs(value: string): number {
  return Math.floor(Date.parse(value) / 1000) * 1000
}
