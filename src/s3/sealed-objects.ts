import { createHash } from 'node:crypto'
import { Readable, Transform, pipeline } from 'node:stream'
import type { BlobStore, ByteRange, OpenedBlob } from '../blobs/blob-store'
import { HEADER_BYTES, OpenStream, Opener, SealStream, sealedSize, sealedSpan } from '../lib/chunked-aead'

/**
 * Objects sealed under a key of their own (SSE-C, SSE-KMS; #27): the blob holds the object's bytes
 * sealed with lib/chunked-aead.ts (chunked AES-256-GCM, a random salt per segment so every segment
 * has its own key), one segment for a single write, one per part for a multipart upload (its parts
 * are sealed as they arrive, and CompleteMultipartUpload, which need not carry the customer's key,
 * joins them as they are). The blob store sees only sealed bytes: its SHA-256 is the sealed bytes',
 * which a random salt makes unlike any other, so such content is never deduplicated with another
 * object's and its address says nothing about the plaintext. A range reads only the chunks it covers.
 */
export interface ObjectKey {
  /** The key every segment's key derives from (HKDF with the segment's salt). */
  dataKey: Buffer
  /** Written in each segment's header; a read under another kind of key fails authentication. */
  keyId: number
}

/** A seal stream for one segment. */
export function sealStream(key: ObjectKey): Transform {
  return new SealStream(key.dataKey, key.keyId)
}

/** The first bytes a stage guard's checkHead is given (as the disk store gives them). */
const HEAD_BYTES = 64

/** A stage that seals what it stages, and what it saw of the plaintext. */
export interface SealingStage extends Pick<BlobStore, 'stage'> {
  /** The plaintext's SHA-256 (lowercase hex), once the stage has resolved. */
  plainSha256(): string
  /** The plaintext's size in bytes, once the stage has resolved. */
  plainSize(): number
}

/**
 * A stage that seals what it is given (an S3 write with SSE-C or SSE-KMS, an API upload into a
 * bucket whose default is aws:kms): the guard's limits, counts and head check apply to the
 * plaintext (its onChunk counts plaintext bytes in flight, its checkHead sees the plaintext's first
 * bytes), while the store stages, hashes and keeps only the sealed stream. A failure anywhere
 * fails the stage, which leaves nothing behind (the store's contract).
 */
export function sealingStage(store: Pick<BlobStore, 'stage'>, seal: () => Transform): SealingStage {
  const hash = createHash('sha256')
  let digest: string | undefined
  let size = 0
  return {
    plainSha256: () => (digest ??= hash.digest('hex')),
    plainSize: () => size,
    stage: (source, guard) => {
      let head: Buffer[] | undefined = guard.checkHead ? [] : undefined
      let headLength = 0
      const checkHead = () => {
        const first = Buffer.concat(head!).subarray(0, HEAD_BYTES)
        head = undefined
        guard.checkHead!(first)
      }
      const tap = new Transform({
        transform(chunk: Buffer, _enc, cb) {
          size += chunk.length
          if (size > guard.maxBytes) return cb(guard.onOverflow())
          try {
            guard.onChunk?.(chunk.length)
            if (head) {
              head.push(chunk)
              headLength += chunk.length
              if (headLength >= HEAD_BYTES) checkHead()
            }
          } catch (err) {
            return cb(err as Error)
          }
          hash.update(chunk)
          cb(null, chunk)
        },
        flush(cb) {
          try {
            if (head) checkHead()
            cb()
          } catch (err) {
            cb(err as Error)
          }
        },
      })
      const sealed = seal()
      pipeline(source, tap, sealed, () => undefined)
      return store.stage(sealed, {
        maxBytes: sealedSize(guard.maxBytes),
        onOverflow: guard.onOverflow,
        ...(guard.expectedBytes !== undefined ? { expectedBytes: sealedSize(guard.expectedBytes) } : {}),
      })
    },
  }
}

/** Bytes the blob of segments of these plaintext sizes takes. */
export function sealedObjectSize(segments: readonly number[]): number {
  return segments.reduce((n, s) => n + sealedSize(s), 0)
}

async function readAll(opened: OpenedBlob): Promise<Buffer> {
  if (Buffer.isBuffer(opened.body)) return opened.body
  const parts: Buffer[] = []
  for await (const b of opened.body) parts.push(b as Buffer)
  return Buffer.concat(parts)
}

/**
 * The plaintext of a sealed object, or `range` of it (inclusive, plaintext offsets, checked by the
 * caller against the object's size): only the chunks the range covers are read and opened, each
 * passed on once its tag verified. A chunk that fails fails the stream (the response is cut).
 */
export async function openSealedObject(
  store: Pick<BlobStore, 'open'>,
  sha256: string,
  segments: readonly number[],
  key: ObjectKey,
  range?: ByteRange,
): Promise<OpenedBlob> {
  const total = segments.reduce((n, s) => n + s, 0)
  const start = range?.start ?? 0
  const end = range?.end ?? total - 1
  const length = Math.max(0, end - start + 1)
  if (length === 0) return { length: 0, body: Buffer.alloc(0) }
  const keys = (id: number) => (id === key.keyId ? key.dataKey : undefined)
  async function* bytes(): AsyncGenerator<Buffer> {
    let plainAt = 0
    let sealedAt = 0
    for (const size of segments) {
      const first = Math.max(start, plainAt)
      const last = Math.min(end, plainAt + size - 1)
      if (size > 0 && first <= last) {
        const span = sealedSpan(size, first - plainAt, last - plainAt)
        const opts = { first: span.first, finalIndex: span.finalIndex, skip: span.skip, length: last - first + 1 }
        const header = span.first === 0 ? undefined : await readAll(await store.open(sha256, { start: sealedAt, end: sealedAt + HEADER_BYTES - 1 }))
        const sealed = await store.open(sha256, { start: sealedAt + (header ? span.start : 0), end: sealedAt + span.end })
        const opener = new OpenStream(keys, header ? { ...opts, header } : opts)
        if (Buffer.isBuffer(sealed.body)) opener.end(sealed.body)
        else sealed.body.on('error', (err) => opener.destroy(err)).pipe(opener)
        try {
          for await (const b of opener) yield b as Buffer
        } finally {
          if (!Buffer.isBuffer(sealed.body)) sealed.body.destroy()
        }
      }
      plainAt += size
      sealedAt += sealedSize(size)
      if (plainAt > end) return
    }
  }
  return { length, body: Readable.from(bytes(), { objectMode: false, highWaterMark: 1024 * 1024 }) }
}

/**
 * The sealed bytes of one segment passed on as they are, while they are opened on the side under
 * `key` and the plaintext given to `onPlain`: how CompleteMultipartUpload, which copies the sealed
 * parts into the object, learns the plaintext's SHA-256 in the same pass (SHA-256 cannot be
 * combined from the parts' own). A chunk that fails authentication fails the stream: a damaged
 * part is never assembled into an object.
 */
export async function* openedAlongside(sealed: Buffer | AsyncIterable<Buffer>, key: ObjectKey, onPlain: (plain: Buffer) => void): AsyncGenerator<Buffer> {
  const opener = new Opener((id) => (id === key.keyId ? key.dataKey : undefined), {})
  for await (const chunk of Buffer.isBuffer(sealed) ? [sealed] : sealed) {
    for (const plain of opener.feed(chunk)) onPlain(plain)
    yield chunk
  }
  for (const plain of opener.end()) onPlain(plain)
}
