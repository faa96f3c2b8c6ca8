/**
 * CRC-64/NVME (reflected polynomial 0x9A6C9329AC4BC9B5, initial value and final XOR all ones), as
 * S3's `x-amz-checksum-crc64nvme` (#24). The 64-bit state is kept as two 32-bit halves, a byte
 * at a time from one 256-entry table per half: no BigInt on the hot path.
 */
const POLY = 0x9a6c9329ac4bc9b5n

let tables: { hi: Uint32Array; lo: Uint32Array } | undefined

function makeTables(): { hi: Uint32Array; lo: Uint32Array } {
  const hi = new Uint32Array(256)
  const lo = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = BigInt(n)
    for (let k = 0; k < 8; k++) c = c & 1n ? (c >> 1n) ^ POLY : c >> 1n
    hi[n] = Number(c >> 32n)
    lo[n] = Number(c & 0xffffffffn)
  }
  return { hi, lo }
}

/** A running CRC-64/NVME. */
export class Crc64Nvme {
  // The register, complemented (the initial all-ones value), as two halves.
  private hi = 0xffffffff
  private lo = 0xffffffff

  update(data: Uint8Array): void {
    const t = (tables ??= makeTables())
    let { hi, lo } = this
    for (let i = 0; i < data.length; i++) {
      const index = (lo ^ data[i]!) & 0xff
      lo = ((lo >>> 8) | (hi << 24)) ^ t.lo[index]!
      hi = (hi >>> 8) ^ t.hi[index]!
    }
    this.hi = hi >>> 0
    this.lo = lo >>> 0
  }

  /** The CRC so far, big-endian: what S3 sends base64-encoded. */
  digest(): Buffer {
    const out = Buffer.alloc(8)
    out.writeUInt32BE(~this.hi >>> 0, 0)
    out.writeUInt32BE(~this.lo >>> 0, 4)
    return out
  }
}
