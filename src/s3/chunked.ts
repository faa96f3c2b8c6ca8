import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import { S3Error } from './errors'
import { checksumOf, isChecksumAlgorithm, type ChecksumAlgorithm } from './checksums'
import { chunkStringToSign, trailerStringToSign, type SigningContext } from './sigv4'

/** Longest chunk-header or trailer line accepted: real ones are under 200 bytes. */
const MAX_LINE = 4096
/** Most trailer lines accepted. */
const MAX_TRAILERS = 16

export interface AwsChunkedOptions {
  /** Verify chunk (and trailer) signatures with this context; absent for STREAMING-UNSIGNED-PAYLOAD-TRAILER. */
  signing?: SigningContext
  /** The body ends with trailers (the -TRAILER modes). */
  trailer: boolean
  /** `x-amz-trailer`: the trailer names the client announced (lower case). */
  announcedTrailers: string[]
  /** `x-amz-decoded-content-length`, when sent: the decoded size must equal it. */
  decodedLength?: number
}

const incomplete = (why: string) => new S3Error('IncompleteBody', `The aws-chunked body is malformed: ${why}`)
const badSignature = () => new S3Error('SignatureDoesNotMatch', 'The chunk signature we calculated does not match the signature you provided.')

type State = 'header' | 'data' | 'data-crlf' | 'trailer' | 'done'

/**
 * Decodes an `aws-chunked` body (Content-Encoding: aws-chunked) into its payload as it streams:
 * `<hex size>[;chunk-signature=<sig>]\r\n<data>\r\n … 0[;chunk-signature=<sig>]\r\n[trailers]\r\n`.
 * Chunk data passes straight through (never buffered); only header and trailer lines are
 * collected, each bounded. Chunk signatures chain from the seed signature and are verified at the
 * end of every chunk; checksum trailers are verified against the decoded bytes. Any defect fails
 * the stream with an S3 4xx error, so a consumer stores nothing.
 */
export class AwsChunkedDecoder extends Transform {
  private state: State = 'header'
  private line: Buffer[] = []
  private lineLength = 0
  private remaining = 0
  private chunkSignature = ''
  private previousSignature: string
  private chunkHash: Hash | undefined
  private decoded = 0
  private readonly trailers = new Map<string, string>()
  private readonly trailerChecksum: { algorithm: ChecksumAlgorithm; running: ReturnType<typeof checksumOf> } | undefined

  constructor(private readonly opts: AwsChunkedOptions) {
    super()
    this.previousSignature = opts.signing?.seedSignature ?? ''
    const announced = opts.announcedTrailers.filter((t) => t !== '')
    if (announced.length > 1) throw new S3Error('InvalidRequest', 'At most one checksum trailer is supported')
    if (announced.length === 1) {
      const name = announced[0]!
      const algorithm = name.replace(/^x-amz-checksum-/, '')
      if (!opts.trailer || !name.startsWith('x-amz-checksum-') || !isChecksumAlgorithm(algorithm)) {
        throw new S3Error('InvalidRequest', `The trailer ${JSON.stringify(name)} is not supported`)
      }
      this.trailerChecksum = { algorithm, running: checksumOf(algorithm) }
    }
  }

  /** The checksum trailer the body carried and verified, once the stream has ended. */
  verifiedChecksum(): { algorithm: ChecksumAlgorithm; value: string } | undefined {
    if (!this.trailerChecksum) return undefined
    const value = this.trailers.get(`x-amz-checksum-${this.trailerChecksum.algorithm}`)
    return value === undefined ? undefined : { algorithm: this.trailerChecksum.algorithm, value }
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    try {
      this.consume(chunk)
      cb()
    } catch (err) {
      cb(err as Error)
    }
  }

  override _flush(cb: TransformCallback): void {
    if (this.state !== 'done') return cb(incomplete('the body ended before its final chunk'))
    if (this.opts.decodedLength !== undefined && this.decoded !== this.opts.decodedLength) {
      return cb(new S3Error('IncompleteBody', `The decoded body has ${this.decoded} bytes, not the ${this.opts.decodedLength} of x-amz-decoded-content-length`))
    }
    cb()
  }

  private consume(buf: Buffer): void {
    let i = 0
    while (i < buf.length) {
      switch (this.state) {
        case 'header':
        case 'trailer':
        case 'data-crlf': {
          const nl = buf.indexOf(0x0a, i)
          const end = nl < 0 ? buf.length : nl + 1
          this.lineLength += end - i
          if (this.lineLength > MAX_LINE) throw incomplete('a chunk header or trailer line is too long')
          this.line.push(buf.subarray(i, end))
          i = end
          if (nl >= 0) this.onLine(this.takeLine())
          break
        }
        case 'data': {
          const n = Math.min(this.remaining, buf.length - i)
          const piece = buf.subarray(i, i + n)
          this.chunkHash?.update(piece)
          this.trailerChecksum?.running.update(piece)
          this.decoded += n
          this.remaining -= n
          i += n
          this.push(piece)
          if (this.remaining === 0) this.state = 'data-crlf'
          break
        }
        case 'done':
          throw incomplete('bytes follow the final chunk')
      }
    }
  }

  private takeLine(): string {
    const text = Buffer.concat(this.line).toString('latin1')
    this.line = []
    this.lineLength = 0
    if (!text.endsWith('\r\n')) throw incomplete('lines must end with CRLF')
    return text.slice(0, -2)
  }

  private onLine(text: string): void {
    if (this.state === 'data-crlf') {
      if (text !== '') throw incomplete('chunk data is longer than its declared size')
      this.verifyChunk()
      this.state = 'header'
      return
    }
    if (this.state === 'header') return this.onHeader(text)
    return this.onTrailerLine(text)
  }

  private onHeader(text: string): void {
    const m = /^([0-9a-fA-F]{1,15})(?:;chunk-signature=([0-9a-f]{64}))?$/.exec(text)
    if (!m) throw incomplete('a chunk header is not "<hex size>[;chunk-signature=<signature>]"')
    if (this.opts.signing && m[2] === undefined) throw incomplete('a chunk has no chunk-signature')
    if (!this.opts.signing && m[2] !== undefined) throw incomplete('an unsigned payload carries a chunk-signature')
    this.remaining = parseInt(m[1]!, 16)
    this.chunkSignature = m[2] ?? ''
    if (this.opts.signing) this.chunkHash = createHash('sha256')
    if (this.remaining > 0) {
      this.state = 'data'
      return
    }
    // The final chunk: its (empty) data's signature is checked now; trailers or the closing CRLF follow.
    this.verifyChunk()
    this.state = 'trailer'
  }

  private verifyChunk(): void {
    const ctx = this.opts.signing
    if (!ctx) return
    if (!ctx.key.matches(chunkStringToSign(ctx, this.previousSignature, this.chunkHash!.digest('hex')), this.chunkSignature)) throw badSignature()
    // It matched: the presented signature is the expected one, digit for digit, and seeds the next.
    this.previousSignature = this.chunkSignature
  }

  private onTrailerLine(text: string): void {
    if (text !== '') {
      if (!this.opts.trailer) throw incomplete('the final chunk must be followed by an empty line')
      if (this.trailers.size >= MAX_TRAILERS) throw incomplete('too many trailers')
      const colon = text.indexOf(':')
      if (colon <= 0) throw incomplete('a trailer is not "name:value"')
      this.trailers.set(text.slice(0, colon).trim().toLowerCase(), text.slice(colon + 1).trim())
      return
    }
    this.finishTrailers()
    this.state = 'done'
  }

  private finishTrailers(): void {
    const ctx = this.opts.signing
    if (this.opts.trailer && ctx) {
      const presented = this.trailers.get('x-amz-trailer-signature')
      if (presented === undefined) throw incomplete('the trailer has no x-amz-trailer-signature')
      const canonical = [...this.trailers]
        .filter(([k]) => k !== 'x-amz-trailer-signature')
        .map(([k, v]) => `${k}:${v}\n`)
        .join('')
      if (!ctx.key.matches(trailerStringToSign(ctx, this.previousSignature, createHash('sha256').update(canonical).digest('hex')), presented))
        throw badSignature()
    }
    for (const name of this.trailers.keys()) {
      if (name === 'x-amz-trailer-signature') continue
      if (!this.trailerChecksum || name !== `x-amz-checksum-${this.trailerChecksum.algorithm}`)
        throw incomplete(`the trailer ${JSON.stringify(name)} was not announced in x-amz-trailer`)
    }
    if (this.trailerChecksum) {
      const name = `x-amz-checksum-${this.trailerChecksum.algorithm}`
      const sent = this.trailers.get(name)
      if (sent === undefined) throw incomplete(`the announced trailer ${name} is missing`)
      if (sent !== this.trailerChecksum.running.base64()) {
        throw new S3Error('BadDigest', `The ${this.trailerChecksum.algorithm.toUpperCase()} you specified did not match the calculated checksum.`)
      }
    }
  }
}
