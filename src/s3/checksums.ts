import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import { crc32 } from 'node:zlib'
import { crc32c } from '../lib/crc32c'
import { ParallelMd5 } from '../lib/parallel-md5'
import { S3Error } from './errors'

/** The flexible checksums S3 clients send (`x-amz-checksum-<name>`), base64 of the big-endian digest. */
export const CHECKSUM_ALGORITHMS = ['crc32', 'crc32c', 'sha1', 'sha256'] as const
export type ChecksumAlgorithm = (typeof CHECKSUM_ALGORITHMS)[number]

export function isChecksumAlgorithm(name: string): name is ChecksumAlgorithm {
  return (CHECKSUM_ALGORITHMS as readonly string[]).includes(name)
}

/** One incremental checksum with S3's base64 rendering. */
interface Running {
  update(chunk: Buffer): void
  base64(): string
}

function running(algorithm: ChecksumAlgorithm): Running {
  switch (algorithm) {
    case 'crc32': {
      let value = 0
      return {
        update: (chunk) => void (value = crc32(chunk, value)),
        base64: () => u32(value),
      }
    }
    case 'crc32c': {
      let value = 0
      return {
        update: (chunk) => void (value = crc32c(chunk, value)),
        base64: () => u32(value),
      }
    }
    case 'sha1':
    case 'sha256': {
      const h: Hash = createHash(algorithm)
      return { update: (chunk) => void h.update(chunk), base64: () => h.digest('base64') }
    }
  }
}

function u32(value: number): string {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(value >>> 0)
  return b.toString('base64')
}

/**
 * What the pass over a body produced besides the SHA-256, which the blob store computes as the
 * content address in the same pass: MD5 (the ETag) and any requested checksum.
 */
export interface Digests {
  size: number
  md5Hex: string
  /** base64 value per requested algorithm (`sha256` is filled in from the content address). */
  checksums: Partial<Record<ChecksumAlgorithm, string>>
}

/**
 * A pass-through stream that computes the digests the S3 front needs while the bytes flow to
 * the blob store (which hashes SHA-256 itself), so the body is read exactly once and never held
 * whole. SHA-256 is not computed twice: a requested sha256 checksum is the content address. The
 * MD5 of a large body runs on a second thread (lib/parallel-md5.ts), beside the SHA-256.
 */
export class DigestStream extends Transform {
  private readonly md5 = new ParallelMd5()
  private readonly extra: [ChecksumAlgorithm, Running][]
  private size = 0
  private result: Promise<Digests> | undefined

  constructor(algorithms: Iterable<ChecksumAlgorithm> = []) {
    super()
    this.extra = [...new Set(algorithms)].filter((a) => a !== 'sha256').map((a) => [a, running(a)])
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.size += chunk.length
    for (const [, r] of this.extra) r.update(chunk)
    const wait = this.md5.update(chunk)
    if (wait)
      wait.then(
        () => cb(null, chunk),
        (err: Error) => cb(err),
      )
    else cb(null, chunk)
  }

  override _destroy(err: Error | null, cb: (error: Error | null) => void): void {
    if (err) this.md5.drop()
    cb(err)
  }

  /**
   * For a body given up on without its digests (staging failed): the MD5 thread forgets it.
   * Otherwise its job would stay open, and the thread would keep the process alive.
   */
  abandon(): void {
    this.md5.drop()
  }

  /** The digests, once the stream has ended. */
  digests(): Promise<Digests> {
    this.result ??= this.md5.digest().then((md5Hex) => {
      const checksums: Partial<Record<ChecksumAlgorithm, string>> = {}
      for (const [a, r] of this.extra) checksums[a] = r.base64()
      return { size: this.size, md5Hex, checksums }
    })
    return this.result
  }
}

/** A standalone incremental checksum (aws-chunked trailers are checked with it). */
export function checksumOf(algorithm: ChecksumAlgorithm): Running {
  return running(algorithm)
}

/** The XML element of a checksum in S3's responses and CompleteMultipartUpload's body (`ChecksumCRC32`, …). */
export function checksumElement(algorithm: ChecksumAlgorithm): string {
  return `Checksum${algorithm.toUpperCase()}`
}

/**
 * The `x-amz-checksum-algorithm` and `x-amz-checksum-type` of CreateMultipartUpload: `CRC32`,
 * `CRC32C`, `SHA1` or `SHA256`, COMPOSITE (the default) or FULL_OBJECT (CRCs only, as S3). The
 * algorithm comes out as the lower-case name the rest of the front uses. CRC64NVME is a valid S3
 * algorithm that Coffer does not compute: refused as not implemented rather than ignored (#24).
 */
export function uploadChecksum(
  algorithmHeader: string | undefined,
  typeHeader: string | undefined,
): { algorithm: ChecksumAlgorithm; type: 'COMPOSITE' | 'FULL_OBJECT' } | undefined {
  const type = typeHeader?.trim().toUpperCase() || undefined
  if (type !== undefined && type !== 'COMPOSITE' && type !== 'FULL_OBJECT') {
    throw new S3Error('InvalidRequest', 'Value for x-amz-checksum-type header is invalid: it must be COMPOSITE or FULL_OBJECT')
  }
  if (algorithmHeader === undefined || algorithmHeader.trim() === '') {
    if (type !== undefined) throw new S3Error('InvalidRequest', 'The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header')
    return undefined
  }
  const name = algorithmHeader.trim().toLowerCase()
  if (name === 'crc64nvme')
    throw new S3Error('NotImplemented', 'The CRC64NVME checksum algorithm is not implemented by Coffer; use CRC32, CRC32C, SHA1 or SHA256')
  if (!isChecksumAlgorithm(name)) throw new S3Error('InvalidRequest', `The checksum algorithm ${JSON.stringify(algorithmHeader)} is not supported`)
  if (type === 'FULL_OBJECT' && !isCombinable(name)) {
    throw new S3Error('InvalidRequest', `The FULL_OBJECT checksum type cannot be used with the ${name} checksum algorithm`)
  }
  return { algorithm: name, type: type ?? 'COMPOSITE' }
}

/**
 * S3's COMPOSITE checksum of a multipart object: the algorithm applied to the concatenation of
 * the parts' binary checksums, in part order, rendered base64 with `-<part count>` appended.
 */
export function compositeChecksum(algorithm: ChecksumAlgorithm, partChecksums: string[]): string {
  const r = running(algorithm)
  for (const c of partChecksums) r.update(Buffer.from(c, 'base64'))
  return `${r.base64()}-${partChecksums.length}`
}

/** The reflected polynomials of the two CRCs S3 can combine into a FULL_OBJECT checksum. */
const CRC_POLY = { crc32: 0xedb88320, crc32c: 0x82f63b78 } as const
export type CombinableAlgorithm = keyof typeof CRC_POLY

export function isCombinable(algorithm: ChecksumAlgorithm): algorithm is CombinableAlgorithm {
  return algorithm in CRC_POLY
}

function gf2Times(matrix: Uint32Array, vector: number): number {
  let sum = 0
  for (let i = 0; vector !== 0; i++, vector >>>= 1) if (vector & 1) sum ^= matrix[i]!
  return sum >>> 0
}

function gf2Square(square: Uint32Array, matrix: Uint32Array): void {
  for (let n = 0; n < 32; n++) square[n] = gf2Times(matrix, matrix[n]!)
}

/**
 * The CRC of A followed by B from crc(A), crc(B) and B's length: zlib's crc32_combine (a GF(2)
 * matrix for "append one zero bit", squared per bit of the length), for either polynomial.
 */
function crcCombine(poly: number, crc1: number, crc2: number, length2: number): number {
  if (length2 === 0) return crc1
  const even = new Uint32Array(32)
  const odd = new Uint32Array(32)
  odd[0] = poly
  for (let n = 1, row = 1; n < 32; n++, row <<= 1) odd[n] = row
  gf2Square(even, odd) // two zero bits
  gf2Square(odd, even) // four zero bits
  let len = length2
  let crc = crc1 >>> 0
  for (;;) {
    gf2Square(even, odd) // one zero byte, then 4, 16, … (lengths above 2^32 too: no bit shifts on len)
    if (len % 2 === 1) crc = gf2Times(even, crc)
    len = Math.floor(len / 2)
    if (len === 0) break
    gf2Square(odd, even)
    if (len % 2 === 1) crc = gf2Times(odd, crc)
    len = Math.floor(len / 2)
    if (len === 0) break
  }
  return (crc ^ crc2) >>> 0
}

/**
 * S3's FULL_OBJECT checksum of a multipart object (CRC32 and CRC32C): the CRC of the whole object,
 * combined from the parts' CRCs and sizes without reading the bytes again.
 */
export function fullObjectCrc(algorithm: CombinableAlgorithm, parts: { checksum: string; size: number }[]): string {
  let crc = 0
  for (const p of parts) crc = crcCombine(CRC_POLY[algorithm], crc, Buffer.from(p.checksum, 'base64').readUInt32BE(0), p.size)
  return u32(crc)
}
