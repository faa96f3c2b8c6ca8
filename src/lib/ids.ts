import { randomBytes } from 'node:crypto'

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

let last: Buffer | undefined
let lastMs = -1

/**
 * UUID version 7 (RFC 9562 §5.7): 48 bits of Unix milliseconds, then random bits. Time-ordered ids
 * keep SQLite's primary-key B-trees append-mostly. Within one millisecond the random part is
 * incremented (RFC 9562 §6.2, method 2), so ids made by one process are strictly increasing.
 */
export function uuidv7(nowMs: number = Date.now()): string {
  let b: Buffer
  if (last !== undefined && nowMs <= lastMs) {
    b = Buffer.from(last)
    // Increment the 62 random bits after the variant; on the (astronomically rare) overflow, step the clock.
    const low = (b.readBigUInt64BE(8) & 0x3fffffffffffffffn) + 1n
    if (low > 0x3fffffffffffffffn) {
      lastMs += 1
      b = randomBytes(16)
      b.writeUIntBE(lastMs, 0, 6)
    } else {
      b.writeBigUInt64BE(low, 8)
    }
  } else {
    lastMs = nowMs
    b = randomBytes(16)
    b.writeUIntBE(nowMs, 0, 6)
    b[8] = b[8]! & 0x3f // start the counter in the lower half of its range: room to count up
  }
  b[6] = 0x70 | (b[6]! & 0x0f)
  b[8] = 0x80 | (b[8]! & 0x3f)
  last = b
  const h = b.toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/** True for any RFC 9562 UUID in canonical text form (any version). */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_RE.test(value)
}
