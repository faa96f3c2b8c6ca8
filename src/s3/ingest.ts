import { createHash } from 'node:crypto'
import { Readable, type Transform } from 'node:stream'
import { sealingStage } from './sealed-objects'
import type { BlobStore, StagedBlob } from '../blobs/blob-store'
import { AppError, isDiskFull } from '../errors'
import { AwsChunkedDecoder } from './chunked'
import { DigestStream, isChecksumAlgorithm, type ChecksumAlgorithm, type Digests } from './checksums'
import { S3Error, fromAppError } from './errors'
import type { Payload, SigningContext } from './sigv4'

/** How a request body arrives and what it must prove once it has. */
export interface BodySpec {
  source: Readable
  payload: Payload
  /** What a signed aws-chunked body's chunk signatures chain from; absent for SigV2 requests. */
  signing?: SigningContext | undefined
  /** Request headers (lower-case names). */
  headers: Record<string, string | string[] | undefined>
  /**
   * Called once the request has passed every check that can be made before its body: answers a
   * client waiting on `Expect: 100-continue`, which otherwise never sends a body that would only
   * be refused (an over-size or over-quota object is answered before a byte of it travels).
   */
  proceed?: () => void
}

export interface Ingested {
  staged: StagedBlob
  digests: Digests
  /** The checksum the client asked for and that was verified, for storage and echo. */
  checksum?: { algorithm: ChecksumAlgorithm; value: string }
  /** The plaintext's SHA-256 when the bytes were sealed (the staged blob's sha256 is the sealed form's). */
  plainSha256?: string
}

const header = (h: BodySpec['headers'], name: string): string | undefined => {
  const v = h[name]
  return Array.isArray(v) ? v.join(',') : v
}

/**
 * Streams a request body into the blob store's staging area, decoding aws-chunked framing and
 * computing MD5, SHA-256 and any requested checksum in the same pass; then checks everything the
 * request promised (signed SHA-256, Content-MD5, checksum headers or trailers). Nothing is placed:
 * on any failure the staged file is discarded and the error is S3's.
 */
export async function ingest(
  store: Pick<BlobStore, 'stage' | 'discard' | 'admit'>,
  spec: BodySpec,
  limit: { maxBytes: number; overflow: () => Error },
  /** Counts the bytes in flight against the quotas (Quotas.stream): all announced ones at once, else as they arrive; may throw. */
  onChunk?: (bytes: number) => void,
  /** A checksum to compute whether or not the client sent one (a multipart upload's algorithm); in `digests.checksums`. */
  compute?: ChecksumAlgorithm,
  /**
   * Seals the bytes on their way to the store (SSE-C, SSE-KMS: sealed-objects.ts): the staged blob
   * is the sealed form (its sha256 and size), while every check and digest is of the plaintext.
   */
  seal?: () => Transform,
): Promise<Ingested> {
  const { headers, payload } = spec
  const algorithms: ChecksumAlgorithm[] = []
  let declared: { algorithm: ChecksumAlgorithm; value: string } | undefined
  for (const name of Object.keys(headers)) {
    const m = /^x-amz-checksum-(.+)$/.exec(name)
    if (!m || m[1] === 'mode' || m[1] === 'type' || m[1] === 'algorithm') continue
    if (!isChecksumAlgorithm(m[1]!)) throw new S3Error('InvalidRequest', `The checksum algorithm ${JSON.stringify(m[1])} is not supported`)
    declared = { algorithm: m[1], value: header(headers, name)! }
    algorithms.push(m[1])
  }
  if (compute !== undefined && !algorithms.includes(compute)) algorithms.push(compute)
  const contentMd5 = header(headers, 'content-md5')
  if (contentMd5 !== undefined && !/^[A-Za-z0-9+/]{22}==$/.test(contentMd5)) throw new S3Error('InvalidDigest', 'The Content-MD5 you specified is not valid.')

  let decoder: AwsChunkedDecoder | undefined
  let expectedBytes: number | undefined
  if (payload.kind === 'streaming') {
    const decodedLength = header(headers, 'x-amz-decoded-content-length')
    if (decodedLength !== undefined && !/^\d{1,16}$/.test(decodedLength)) throw new S3Error('InvalidArgument', 'x-amz-decoded-content-length is not a number')
    if (decodedLength !== undefined && Number(decodedLength) > limit.maxBytes) throw limit.overflow()
    if (decodedLength !== undefined) expectedBytes = Number(decodedLength)
    decoder = new AwsChunkedDecoder({
      ...(payload.signed ? { signing: spec.signing } : {}),
      trailer: payload.trailer,
      announcedTrailers: (header(headers, 'x-amz-trailer') ?? '').split(',').map((s) => s.trim().toLowerCase()),
      ...(decodedLength !== undefined ? { decodedLength: Number(decodedLength) } : {}),
    })
  } else {
    const length = header(headers, 'content-length')
    if (length !== undefined && /^\d+$/.test(length) && Number(length) > limit.maxBytes) throw limit.overflow()
    if (length !== undefined && /^\d+$/.test(length)) expectedBytes = Number(length)
  }

  // A body of announced length is charged whole before it is read: one quota check where one per
  // chunk (two SQLite reads each) cost a tenth of a 100 MiB PutObject's main-thread CPU (#14).
  // The length was checked against the room above. Bytes past it cannot arrive (HTTP framing and
  // the aws-chunked decoder hold a body to its length), and would still be charged as they came.
  let charge = onChunk
  if (onChunk && expectedBytes !== undefined) {
    onChunk(expectedBytes)
    let past = -expectedBytes
    charge = (bytes) => {
      past += bytes
      if (past > 0) onChunk(Math.min(bytes, past))
    }
  }
  // A body the store cannot take at all is refused before a client waiting on 100-continue sends it.
  if (expectedBytes !== undefined) store.admit?.(expectedBytes)
  const digest = new DigestStream(algorithms)
  spec.proceed?.()
  const body = connect(spec.source, decoder, digest)
  let staged: StagedBlob
  const sealing = seal ? sealingStage(store, seal) : undefined
  try {
    staged = await (sealing ?? store).stage(body, {
      maxBytes: limit.maxBytes,
      onOverflow: limit.overflow,
      ...(expectedBytes !== undefined ? { expectedBytes } : {}),
      ...(charge ? { onChunk: charge } : {}),
    })
  } catch (err) {
    spec.source.unpipe()
    digest.abandon()
    throw toIngestError(err)
  }
  try {
    const digests = await digest.digests()
    const sha256 = sealing ? sealing.plainSha256() : staged.sha256
    if (algorithms.includes('sha256')) digests.checksums.sha256 = Buffer.from(sha256, 'hex').toString('base64')
    if (payload.kind === 'sha256' && payload.hex !== sha256) {
      throw new S3Error('XAmzContentSHA256Mismatch', 'The provided x-amz-content-sha256 header does not match what was computed.')
    }
    if (contentMd5 !== undefined && Buffer.from(contentMd5, 'base64').toString('hex') !== digests.md5Hex) {
      throw new S3Error('BadDigest', 'The Content-MD5 you specified did not match what we received.')
    }
    if (declared && digests.checksums[declared.algorithm] !== declared.value) {
      throw new S3Error('BadDigest', `The ${declared.algorithm.toUpperCase()} you specified did not match the calculated checksum.`)
    }
    const checksum = declared ?? decoder?.verifiedChecksum()
    return { staged, digests, ...(checksum ? { checksum } : {}), ...(sealing ? { plainSha256: sha256 } : {}) }
  } catch (err) {
    await store.discard(staged)
    throw err
  }
}

/** source → [decoder] → digest, with a failure or a cut-off anywhere failing the digest stream. */
function connect(source: Readable, decoder: AwsChunkedDecoder | undefined, digest: DigestStream): Readable {
  const fail = (err: Error) => digest.destroy(err)
  // The blob store's stage() reports the stream's errors; this keeps one that comes after stage()
  // has already given up (a source cut off later) from being an unhandled 'error' that ends the process.
  digest.on('error', () => undefined)
  source.once('error', fail)
  source.once('close', () => {
    if (!source.readableEnded) fail(Object.assign(new S3Error('IncompleteBody', 'The request body was cut off before its end'), { cutOff: true }))
  })
  if (decoder) {
    decoder.once('error', fail)
    source.pipe(decoder).pipe(digest)
  } else source.pipe(digest)
  return digest
}

function toIngestError(err: unknown): Error {
  if (err instanceof S3Error) return err
  if (err instanceof AppError) return fromAppError(err)
  if (isDiskFull(err)) return new S3Error('InsufficientStorage', 'The server is out of storage space; nothing was stored')
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  if (code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'ECONNRESET' || code === 'ECONNABORTED' || (err as Error | undefined)?.name === 'AbortError') {
    return new S3Error('IncompleteBody', 'The request body was cut off before its end')
  }
  return err as Error
}

/**
 * A stream of the given blobs one after another (multipart completion, copies). Backpressure and
 * errors are Readable.from's: a failed or cut-off read of one blob fails the stream, and a
 * consumer that stops early ends the read of the blob in progress.
 */
export function concatenate(open: (sha256: string) => Promise<Buffer | Readable>, shas: string[]): Readable {
  return Readable.from(
    (async function* () {
      for (const sha of shas) {
        const body = await open(sha)
        if (Buffer.isBuffer(body)) yield body
        else yield* body as AsyncIterable<Buffer>
      }
    })(),
    { objectMode: false, highWaterMark: 1024 * 1024 },
  )
}

/**
 * A small request body (an XML document) read whole, at most `maxBytes` after decoding, with the
 * same checks as an object body (signed SHA-256, Content-MD5, checksums, aws-chunked framing).
 */
export async function readSmallBody(spec: BodySpec, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  // The staging area of this body is memory: it is small and bounded.
  const collector: Pick<BlobStore, 'stage' | 'discard'> = {
    stage: async (source, guard) => {
      const hash = createHash('sha256')
      for await (const chunk of source as AsyncIterable<Buffer>) {
        size += chunk.length
        if (size > guard.maxBytes) throw guard.onOverflow()
        hash.update(chunk)
        chunks.push(chunk)
      }
      return { sha256: hash.digest('hex'), size, tmpPath: '' }
    },
    discard: async () => undefined,
  }
  await ingest(collector, spec, { maxBytes, overflow: () => new S3Error('MaxMessageLengthExceeded', 'Your request was too big.') })
  return Buffer.concat(chunks)
}
