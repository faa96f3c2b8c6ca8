import { randomBytes } from 'node:crypto'

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * UUID version 7 (RFC 9562 §5.7): 48 bits of Unix milliseconds, then random bits.
 * Time-ordered ids keep SQLite's primary-key B-trees append-mostly.
 */
export function uuidv7(nowMs: number = Date.now()): string {
  const b = randomBytes(16)
  b.writeUIntBE(nowMs, 0, 6)
  b[6] = 0x70 | (b[6]! & 0x0f)
  b[8] = 0x80 | (b[8]! & 0x3f)
  const h = b.toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/** True for any RFC 9562 UUID in canonical text form (any version). */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_RE.test(value)
}
