import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import { crc32c } from '../lib/crc32c'
import { Crc64Nvme } from '../lib/crc64nvme'
import { ParallelMd5 } from '../lib/parallel-md5'
import { S3Error } from './errors'

/** The flexible checksums S3 clients send (`x-amz-checksum-<name>`), base64 of the big-endian digest. */
export const CHECKSUM_ALGORITHMS = ['crc32', 'crc32c', 'crc64nvme', 'sha1', 'sha256'] as const
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
      // zlib is loaded by the first CRC32 checksum, not at every start (#28).
      const { crc32 } = process.getBuiltinModule('node:zlib')
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
    case 'crc64nvme': {
      const c = new Crc64Nvme()
      return { update: (chunk) => c.update(chunk), base64: () => c.digest().toString('base64') }
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
 * `CRC32C`, `CRC64NVME`, `SHA1` or `SHA256`, COMPOSITE or FULL_OBJECT (CRCs only; CRC64NVME
 * only that, its default). The algorithm comes out as the lower-case name the rest of the front uses.
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
  if (!isChecksumAlgorithm(name)) throw new S3Error('InvalidRequest', `The checksum algorithm ${JSON.stringify(algorithmHeader)} is not supported`)
  // S3: SHA checksums of multipart uploads are COMPOSITE only, CRC64NVME FULL_OBJECT only.
  if (type === 'FULL_OBJECT' && !isCombinable(name)) {
    throw new S3Error('InvalidRequest', `The FULL_OBJECT checksum type cannot be used with the ${name} checksum algorithm`)
  }
  if (type === 'COMPOSITE' && name === 'crc64nvme') {
    throw new S3Error('InvalidRequest', 'The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm')
  }
  return { algorithm: name, type: type ?? (name === 'crc64nvme' ? 'FULL_OBJECT' : 'COMPOSITE') }
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

/** The reflected polynomials (and widths) of the CRCs S3 combines into a FULL_OBJECT checksum. */
const CRC_POLY = {
  crc32: { poly: 0xedb88320n, bits: 32 },
  crc32c: { poly: 0x82f63b78n, bits: 32 },
  crc64nvme: { poly: 0x9a6c9329ac4bc9b5n, bits: 64 },
} as const
export type CombinableAlgorithm = keyof typeof CRC_POLY

export function isCombinable(algorithm: ChecksumAlgorithm): algorithm is CombinableAlgorithm {
  return algorithm in CRC_POLY
}

/** A GF(2) matrix as its columns: column i is the image of bit i. */
type Matrix = bigint[]

function times(matrix: Matrix, vector: bigint): bigint {
  let sum = 0n
  for (let i = 0; vector !== 0n; i++, vector >>= 1n) if (vector & 1n) sum ^= matrix[i]!
  return sum
}

const compose = (a: Matrix, b: Matrix): Matrix => b.map((column) => times(a, column))

/** "Append n zero bytes" operators per algorithm and n: parts are mostly of one size, so few. */
const zeroBytes = new Map<string, Matrix>()

/**
 * The operator that turns crc(A) into the CRC register after A and n zero bytes: zlib's
 * crc32_combine method (one zero bit is a matrix; squared to a byte, raised to n), as matrices
 * so that one per part size serves every part of that size.
 */
function appendZeros(algorithm: CombinableAlgorithm, n: number): Matrix {
  const key = `${algorithm}:${n}`
  const cached = zeroBytes.get(key)
  if (cached) return cached
  const { poly, bits } = CRC_POLY[algorithm]
  let base: Matrix = [poly, ...Array.from({ length: bits - 1 }, (_, i) => 1n << BigInt(i))]
  for (let k = 0; k < 3; k++) base = compose(base, base) // one zero bit → one zero byte
  let result: Matrix = Array.from({ length: bits }, (_, i) => 1n << BigInt(i))
  for (let left = n; left > 0; left = Math.floor(left / 2)) {
    if (left % 2 === 1) result = compose(base, result)
    base = compose(base, base)
  }
  if (zeroBytes.size > 64) zeroBytes.clear()
  zeroBytes.set(key, result)
  return result
}

/**
 * S3's FULL_OBJECT checksum of a multipart object (CRC32, CRC32C, CRC64NVME): the CRC of the
 * whole object, combined from the parts' CRCs and sizes without reading the bytes again
 * (crc(AB) = zeros(|B|)·crc(A) xor crc(B), the initial and final XORs cancelling out).
 */
export function fullObjectCrc(algorithm: CombinableAlgorithm, parts: { checksum: string; size: number }[]): string {
  const bytes = CRC_POLY[algorithm].bits / 8
  let crc = 0n
  for (const p of parts) {
    const part = BigInt(`0x${Buffer.from(p.checksum, 'base64').toString('hex') || '0'}`)
    crc = p.size === 0 ? crc : times(appendZeros(algorithm, p.size), crc) ^ part
  }
  return Buffer.from(crc.toString(16).padStart(bytes * 2, '0'), 'hex').toString('base64')
}
