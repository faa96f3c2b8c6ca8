import { createCipheriv, createDecipheriv, createSecretKey, hkdfSync, randomBytes, type KeyObject } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'

/**
 * Chunked AES-256-GCM for stored blobs (#27), the shape of Tink's streaming AEAD
 * (AES-GCM-HKDF streaming) and of RFC 8188's record-based encryption:
 *
 *   header = MAGIC (4) | key id (uint32 BE) | salt (32 random bytes)
 *   chunk i = AES-256-GCM(blob key, nonce(i, final), plaintext[i*CHUNK .. +CHUNK], aad = header) | tag (16)
 *
 * - The blob key is HKDF-SHA256(data key, salt): a fresh random 256-bit salt per blob gives every
 *   blob its own key, so a (key, nonce) pair is never reused even though nonces are counters
 *   (NIST SP 800-38D §8: at most 2^32 random nonces per key is what a single key would allow).
 * - The nonce is the chunk index plus a final-chunk flag: reordered chunks fail, and a blob cut at
 *   a chunk boundary fails because its new last chunk was sealed as not final (RFC 8188 §2 uses a
 *   padding delimiter for the same purpose). Every blob has at least one chunk (the empty blob is
 *   one empty final chunk), so even a blob cut down to its header fails.
 * - The header is the AAD of every chunk and the salt is per blob, so a chunk moved from another
 *   blob (or another key id) fails too.
 * Chunks are fixed-size, so a range is read by decrypting only the chunks it overlaps.
 */
export const MAGIC = Buffer.from('CFE1', 'latin1')
export const HEADER_BYTES = 40
export const CHUNK_BYTES = 64 * 1024
export const TAG_BYTES = 16
const SEALED_CHUNK_BYTES = CHUNK_BYTES + TAG_BYTES
const KEY_INFO = Buffer.from('coffer blob chunk key v1')

/** Content that fails authentication: altered, truncated, reordered, or sealed under another key. */
export class BlobAuthenticationError extends Error {
  override name = 'BlobAuthenticationError'
}

/**
 * A 32-byte key, as bytes or as a KeyObject. Node 24 turns a Buffer key into a KeyObject on every
 * createCipheriv, createHmac and hkdfSync (about 16 µs a call on the bench VM, more than the AES-GCM
 * of a 4 KiB chunk): keys used more than once are made KeyObjects once (lib/encryption-keys.ts).
 */
export type SecretKey = Buffer | KeyObject

/** Looks up the 32-byte data key a header's key id names; undefined when it is not known. */
export type DataKeys = (keyId: number) => SecretKey | undefined

/** Chunks a blob of `plainSize` bytes is sealed in (at least one). */
export function chunkCount(plainSize: number): number {
  return Math.max(1, Math.ceil(plainSize / CHUNK_BYTES))
}

/** Size of the sealed form of `plainSize` bytes. */
export function sealedSize(plainSize: number): number {
  return HEADER_BYTES + plainSize + TAG_BYTES * chunkCount(plainSize)
}

/** Plaintext size of a sealed blob of `size` bytes; undefined when no plaintext seals to that size. */
export function plainSizeOf(size: number): number | undefined {
  const body = size - HEADER_BYTES
  if (body < TAG_BYTES) return undefined
  const n = Math.ceil(body / SEALED_CHUNK_BYTES)
  const plain = body - TAG_BYTES * n
  return sealedSize(plain) === size ? plain : undefined
}

/** Whether `head` starts like a sealed blob (a blob written before encryption was turned on does not, as a rule). */
export function looksSealed(head: Buffer): boolean {
  return head.length >= MAGIC.length && head.subarray(0, MAGIC.length).equals(MAGIC)
}

function nonce(index: number, final: boolean): Buffer {
  const n = Buffer.alloc(12)
  n[3] = final ? 1 : 0
  n.writeBigUInt64BE(BigInt(index), 4)
  return n
}

/** The blob's key, a KeyObject at once: it seals or opens every chunk of the blob (see SecretKey). */
function blobKey(dataKey: SecretKey, salt: Buffer): KeyObject {
  return createSecretKey(new Uint8Array(hkdfSync('sha256', dataKey, salt, KEY_INFO, 32)))
}

function newHeader(keyId: number): Buffer {
  const h = Buffer.alloc(HEADER_BYTES)
  MAGIC.copy(h, 0)
  h.writeUInt32BE(keyId, 4)
  randomBytes(32).copy(h, 8)
  return h
}

function parseHeader(header: Buffer, keys: DataKeys): { key: KeyObject; header: Buffer } {
  if (header.length < HEADER_BYTES || !looksSealed(header)) throw new BlobAuthenticationError('not a sealed blob (no header)')
  const keyId = header.readUInt32BE(4)
  const dataKey = keys(keyId)
  if (!dataKey) throw new BlobAuthenticationError(`sealed under key id ${keyId.toString(16)}, which is not configured`)
  const h = Buffer.from(header.subarray(0, HEADER_BYTES))
  return { key: blobKey(dataKey, h.subarray(8)), header: h }
}

function seal(key: KeyObject, header: Buffer, index: number, final: boolean, plain: Buffer): Buffer[] {
  const c = createCipheriv('aes-256-gcm', key, nonce(index, final))
  c.setAAD(header)
  const body = c.update(plain)
  c.final()
  return [body, c.getAuthTag()]
}

function open(key: KeyObject, header: Buffer, index: number, final: boolean, sealed: Buffer): Buffer {
  if (sealed.length < TAG_BYTES) throw new BlobAuthenticationError(`chunk ${index} is cut short`)
  const d = createDecipheriv('aes-256-gcm', key, nonce(index, final))
  d.setAAD(header)
  d.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
  const plain = d.update(sealed.subarray(0, sealed.length - TAG_BYTES))
  try {
    d.final()
  } catch {
    throw new BlobAuthenticationError(`chunk ${index} failed authentication`)
  }
  return plain
}

/** Bytes collected until a whole chunk is there; keeps memory at about one chunk whatever the stream's size. */
class Pending {
  private bufs: Buffer[] = []
  length = 0

  push(b: Buffer): void {
    if (b.length === 0) return
    this.bufs.push(b)
    this.length += b.length
  }

  take(n: number): Buffer {
    const all = this.bufs.length === 1 ? this.bufs[0]! : Buffer.concat(this.bufs, this.length)
    const out = all.subarray(0, n)
    const rest = all.subarray(n)
    this.bufs = rest.length > 0 ? [rest] : []
    this.length = rest.length
    return out
  }
}

/**
 * Seals a stream: the header, then one sealed chunk per CHUNK_BYTES of input. A full chunk is held
 * until the next byte arrives, because only the end of the input tells that it is the last.
 */
export class SealStream extends Transform {
  private readonly header: Buffer
  private readonly key: KeyObject
  private readonly pending = new Pending()
  private index = 0

  constructor(dataKey: SecretKey, keyId: number) {
    super()
    this.header = newHeader(keyId)
    this.key = blobKey(dataKey, this.header.subarray(8))
    this.push(this.header)
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.pending.push(chunk)
    while (this.pending.length > CHUNK_BYTES) for (const b of seal(this.key, this.header, this.index++, false, this.pending.take(CHUNK_BYTES))) this.push(b)
    cb()
  }

  override _flush(cb: TransformCallback): void {
    for (const b of seal(this.key, this.header, this.index++, true, this.pending.take(this.pending.length))) this.push(b)
    cb()
  }
}

/** Seals a whole buffer at once (small content). */
export function sealBuffer(plain: Buffer, dataKey: SecretKey, keyId: number): Buffer {
  const header = newHeader(keyId)
  const key = blobKey(dataKey, header.subarray(8))
  const out = [header]
  const n = chunkCount(plain.length)
  for (let i = 0; i < n; i++) out.push(...seal(key, header, i, i === n - 1, plain.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES)))
  return Buffer.concat(out)
}

/** Which sealed bytes a plaintext range needs: the header, then chunks `first`..`last`. */
export interface SealedSpan {
  first: number
  last: number
  /** Offsets in the sealed blob, inclusive, of chunks first..last. */
  start: number
  end: number
  /** Plaintext bytes to drop from the first chunk, and to keep in all. */
  skip: number
  length: number
  /** Index of the blob's final chunk. */
  finalIndex: number
}

/** The chunks that hold plaintext bytes `start..end` (inclusive) of a blob of `plainSize` bytes. */
export function sealedSpan(plainSize: number, start: number, end: number): SealedSpan {
  const finalIndex = chunkCount(plainSize) - 1
  const length = Math.max(0, end - start + 1)
  const first = Math.min(Math.floor(start / CHUNK_BYTES), finalIndex)
  const last = length === 0 ? first : Math.floor(end / CHUNK_BYTES)
  const sealedStart = HEADER_BYTES + first * SEALED_CHUNK_BYTES
  const sealedEnd = Math.min(HEADER_BYTES + (last + 1) * SEALED_CHUNK_BYTES, sealedSize(plainSize)) - 1
  return { first, last, start: sealedStart, end: sealedEnd, skip: start - first * CHUNK_BYTES, length, finalIndex }
}

/** Options of an OpenStream: where in the blob the stream starts, and what to keep. */
export interface OpenOptions {
  /** The header, when the stream does not start with it (a range that skips chunk 0). */
  header?: Buffer
  /** Index of the stream's first chunk (0 when it starts with the header). */
  first?: number
  /** Index of the blob's final chunk, when known; otherwise the stream's last chunk is taken as final. */
  finalIndex?: number
  /** Plaintext bytes to drop at the start, and to keep in all (the rest is dropped). */
  skip?: number
  length?: number
}

/**
 * Opens sealed bytes chunk by chunk as they are fed; fails with BlobAuthenticationError as soon as
 * a chunk does not authenticate, before any of its bytes are returned. Input that ends early (cut
 * short) fails too: its last chunk was not sealed as final, or chunks the range needs are absent.
 */
export class Opener {
  private header: Buffer | undefined
  private key: KeyObject | undefined
  private readonly pending = new Pending()
  private index: number
  private skip: number
  private left: number

  constructor(
    private readonly keys: DataKeys,
    private readonly opts: OpenOptions,
  ) {
    this.index = opts.first ?? 0
    this.skip = opts.skip ?? 0
    this.left = opts.length ?? Number.POSITIVE_INFINITY
    if (opts.header) ({ key: this.key, header: this.header } = parseHeader(opts.header, keys))
  }

  feed(chunk: Buffer): Buffer[] {
    const out: Buffer[] = []
    this.pending.push(chunk)
    if (!this.key) {
      if (this.pending.length < HEADER_BYTES) return out
      ;({ key: this.key, header: this.header } = parseHeader(this.pending.take(HEADER_BYTES), this.keys))
    }
    // A full sealed chunk is held until more arrives, unless the blob's final index says whether it is the last.
    while (this.pending.length > SEALED_CHUNK_BYTES || (this.pending.length === SEALED_CHUNK_BYTES && this.opts.finalIndex !== undefined)) {
      const final = this.opts.finalIndex === this.index
      this.keep(out, open(this.key, this.header!, this.index, final, this.pending.take(SEALED_CHUNK_BYTES)))
      this.index++
    }
    return out
  }

  end(): Buffer[] {
    const out: Buffer[] = []
    if (!this.key) throw new BlobAuthenticationError('the sealed blob is cut short (no header)')
    if (this.pending.length > 0 || this.index === (this.opts.first ?? 0)) {
      const final = this.opts.finalIndex === undefined || this.opts.finalIndex === this.index
      this.keep(out, open(this.key, this.header!, this.index, final, this.pending.take(this.pending.length)))
      this.index++
    }
    if (this.left > 0 && this.left !== Number.POSITIVE_INFINITY) throw new BlobAuthenticationError('the sealed blob is shorter than its record')
    return out
  }

  private keep(out: Buffer[], plain: Buffer): void {
    let b = plain
    if (this.skip > 0) {
      const n = Math.min(this.skip, b.length)
      b = b.subarray(n)
      this.skip -= n
    }
    if (b.length > this.left) b = b.subarray(0, this.left)
    this.left -= b.length
    if (b.length > 0) out.push(b)
  }
}

/** Opens a sealed stream (see Opener): a Transform from sealed bytes to the plaintext asked for. */
export class OpenStream extends Transform {
  private readonly opener: Opener

  constructor(keys: DataKeys, opts: OpenOptions = {}) {
    super()
    this.opener = new Opener(keys, opts)
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.run(() => this.opener.feed(chunk), cb)
  }

  override _flush(cb: TransformCallback): void {
    this.run(() => this.opener.end(), cb)
  }

  private run(step: () => Buffer[], cb: TransformCallback): void {
    let out: Buffer[]
    try {
      out = step()
    } catch (err) {
      return cb(err as Error)
    }
    for (const b of out) this.push(b)
    cb()
  }
}

/** Opens a whole sealed buffer (or a span of one, with the same options as OpenStream) at once. */
export function openBuffer(sealed: Buffer, keys: DataKeys, opts: OpenOptions = {}): Buffer {
  const o = new Opener(keys, opts)
  return Buffer.concat([...o.feed(sealed), ...o.end()])
}
