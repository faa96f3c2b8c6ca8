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
 * The `x-amz-checksum-algorithm` of CreateMultipartUpload (`CRC32`, `CRC32C`, `SHA1`, `SHA256`),
 * as the lower-case name the rest of the front uses. CRC64NVME is a valid S3 algorithm that Coffer
 * does not compute: refused as not implemented rather than ignored (#24).
 */
export function uploadChecksumAlgorithm(value: string | undefined): ChecksumAlgorithm | undefined {
  if (value === undefined || value === '') return undefined
  const name = value.trim().toLowerCase()
  if (isChecksumAlgorithm(name)) return name
  if (name === 'crc64nvme')
    throw new S3Error('NotImplemented', 'The CRC64NVME checksum algorithm is not implemented by Coffer; use CRC32, CRC32C, SHA1 or SHA256')
  throw new S3Error('InvalidRequest', `The checksum algorithm ${JSON.stringify(value)} is not supported`)
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
