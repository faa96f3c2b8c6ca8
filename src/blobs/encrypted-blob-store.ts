import { createHash } from 'node:crypto'
import { pipeline as pipe, Readable, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import {
  BlobAuthenticationError,
  HEADER_BYTES,
  OpenStream,
  SealStream,
  openBuffer,
  plainSizeOf,
  sealedSize,
  sealedSpan,
  type OpenOptions,
} from '../lib/chunked-aead'
import type { BlobKeys } from '../lib/encryption-keys'
import { BlobNotFoundError, type BlobStore, type ByteRange, type ListedBlob, type OpenedBlob, type StagedBlob, type StageGuard } from './blob-store'
import { Inspector } from './disk-blob-store'

/** What the encrypted store needs to know of the database (services/encryption.ts gives it). */
export interface EncryptedStoreRecords {
  /** The recorded plaintext size of a blob, for ranged reads (which chunk is the final one). */
  sizeOf(sha256: string): number | undefined
  /** Every recorded hash, in any order: listings map stored names back to them. */
  hashes(): Iterable<string>
  /** True while blobs written before encryption was turned on may still be stored in the clear. */
  plainRemaining(): boolean
  /** The hashes recorded at or after `since` (epoch ms), for the orphan sweep's re-check (`recordedUnder`). */
  createdSince?(since: number): Iterable<string>
}

/** A SHA-256 that no content has: what `hash` answers for content that fails authentication. */
export const UNAUTHENTIC = 'unauthenticated'

/**
 * Encryption at rest for any blob store (#27): content is sealed (lib/chunked-aead.ts) on its way
 * into the inner store and opened on its way out, and is stored under a name that is an HMAC of
 * its SHA-256 (BlobKeys.nameOf) rather than the SHA-256 itself. Callers keep seeing plaintext
 * hashes and sizes: to them it is the same content-addressed store. What the store's files or
 * objects reveal to whoever reads them: which blobs are equal (they share a name: dedup), their
 * sizes (within one tag per 64 KiB), and their times; not their content nor their SHA-256.
 *
 * Content read from the inner store is authenticated chunk by chunk before any of it is passed
 * on: a stream fails with BlobAuthenticationError at the first chunk that does not authenticate,
 * and the HTTP layer destroys the connection (a response cut short, never a clean end).
 *
 * While `plainRemaining`, content found under its plain SHA-256 instead (written before encryption
 * was turned on) is read as it is, until `coffer encrypt-blobs` (services/encrypt-blobs.ts) has
 * sealed it; after that nothing in the clear is ever served.
 */
export class EncryptedBlobStore implements BlobStore {
  readonly remote: boolean
  readonly description: string
  /** Names listed that no record maps back to (orphans): removing one removes that name itself. */
  private readonly orphanNames = new Set<string>()

  constructor(
    readonly inner: BlobStore,
    private readonly keys: BlobKeys,
    private readonly records: EncryptedStoreRecords,
  ) {
    this.remote = inner.remote
    this.description = `${inner.description} (encrypted)`
  }

  /** The inner store's view of a staged blob: under its name, at its sealed size. */
  private innerOf(staged: StagedBlob): StagedBlob {
    return { ...staged, sha256: this.keys.nameOf(staged.sha256), size: sealedSize(staged.size) }
  }

  async stage(source: Readable, guard: StageGuard): Promise<StagedBlob> {
    const inspector = new Inspector(guard)
    const seal = new SealStream(this.keys.dataKey, this.keys.keyId)
    // As DiskBlobStore.stage: the source is piped, not handed to pipeline(), so that a refusal
    // leaves it open for the answer; its errors and premature close reach the inner store's stage.
    const onSourceError = (err: Error) => inspector.destroy(err)
    const onSourceClose = () => {
      if (!source.readableEnded) inspector.destroy(Object.assign(new Error('the request body was cut off'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }))
    }
    source.once('error', onSourceError)
    source.once('close', onSourceClose)
    inspector.once('error', (err) => seal.destroy(err))
    source.pipe(inspector).pipe(seal)
    let inner: StagedBlob
    try {
      inner = await this.inner.stage(seal, {
        maxBytes: sealedSize(guard.maxBytes),
        onOverflow: guard.onOverflow,
        // The plaintext's SHA-256 is the one kept (inspector): the sealed bytes' would be thrown away.
        unhashed: true,
        ...(guard.expectedBytes !== undefined ? { expectedBytes: sealedSize(guard.expectedBytes) } : {}),
      })
    } catch (err) {
      source.unpipe(inspector)
      inspector.destroy()
      throw err
    } finally {
      source.off('error', onSourceError)
      source.off('close', onSourceClose)
    }
    return { ...inner, sha256: inspector.hash.digest('hex'), size: inspector.size }
  }

  place(staged: StagedBlob): Promise<void> {
    return this.inner.place(this.innerOf(staged))
  }

  ensurePlaced(staged: StagedBlob): void {
    this.inner.ensurePlaced(this.innerOf(staged))
  }

  discard(staged: StagedBlob): Promise<void> {
    return this.inner.discard(this.innerOf(staged))
  }

  async open(sha256: string, range?: ByteRange): Promise<OpenedBlob> {
    const name = this.keys.nameOf(sha256)
    try {
      return await this.openSealed(name, sha256, range)
    } catch (err) {
      if (err instanceof BlobNotFoundError && this.records.plainRemaining()) return this.inner.open(sha256, range)
      if (err instanceof BlobNotFoundError) throw new BlobNotFoundError(sha256)
      throw err
    }
  }

  /** The name the inner store keeps `sha256`'s sealed content under (`coffer backup` copies it). */
  storedName(sha256: string): string {
    return this.keys.nameOf(sha256)
  }

  /**
   * Whether a row created since `since` records the content stored under `name`, a name the
   * listing yielded as an orphan. The listing maps names from a snapshot of the rows taken when it
   * began: the same content uploaded again after that keeps the file already there (its name
   * exists) and records a row the snapshot lacks, and the name no hash is checked by. Called inside
   * the sweep's transaction, so a row committed before it is seen, and a write committing after it
   * finds the file gone and places its own (ensurePlaced). The caller's `since` allows for clocks
   * (the rows' created_at) stepped back since the listing began.
   */
  recordedUnder(name: string, since: number): boolean {
    if (!this.orphanNames.has(name)) return false
    // Records that cannot say which rows are new: nothing listed under a keyed name is taken for an orphan.
    if (!this.records.createdSince) return true
    for (const sha of this.records.createdSince(since)) if (this.keys.nameOf(sha) === name) return true
    return false
  }

  /** Whether the sealed form of `sha256` is stored (its header is there). */
  async sealedExists(sha256: string): Promise<boolean> {
    try {
      destroy(await this.inner.open(this.keys.nameOf(sha256), { start: 0, end: HEADER_BYTES - 1 }))
      return true
    } catch (err) {
      if (err instanceof BlobNotFoundError) return false
      throw err
    }
  }

  /** The same sealing over another store (`coffer migrate-blobs` seals the target as the source). */
  over(inner: BlobStore): EncryptedBlobStore {
    return new EncryptedBlobStore(inner, this.keys, this.records)
  }

  private async openSealed(name: string, sha256: string, range: ByteRange | undefined): Promise<OpenedBlob> {
    const keys = this.keys.dataKeys
    if (!range) {
      const opened = await this.inner.open(name)
      const length = plainSizeOf(opened.length)
      if (length === undefined) {
        destroy(opened)
        throw new BlobAuthenticationError(`blob ${sha256}: its stored size is no sealed size`)
      }
      return { length, body: this.opened(opened, keys, {}) }
    }
    const length = range.end - range.start + 1
    const plainSize = this.records.sizeOf(sha256)
    if (plainSize === undefined) {
      // Not recorded (a read racing a collection): read from the start, keep the range.
      const opened = await this.inner.open(name)
      return { length, body: this.opened(opened, keys, { skip: range.start, length }) }
    }
    const span = sealedSpan(plainSize, range.start, range.end)
    if (length <= 0) {
      // No bytes (HEAD): the header proves the blob is there.
      const head = await this.inner.open(name, { start: 0, end: HEADER_BYTES - 1 })
      destroy(head)
      return { length: 0, body: Buffer.alloc(0) }
    }
    const opts: OpenOptions = { first: span.first, finalIndex: span.finalIndex, skip: span.skip, length }
    if (span.first === 0) return { length, body: this.opened(await this.inner.open(name, { start: 0, end: span.end }), keys, opts) }
    const header = await readAll(await this.inner.open(name, { start: 0, end: HEADER_BYTES - 1 }))
    return { length, body: this.opened(await this.inner.open(name, { start: span.start, end: span.end }), keys, { ...opts, header }) }
  }

  private opened(opened: OpenedBlob, keys: BlobKeys['dataKeys'], opts: OpenOptions): Buffer | Readable {
    if (Buffer.isBuffer(opened.body)) return openBuffer(opened.body, keys, opts)
    // pipeline: a failing read destroys the opener with its error, and the opener's destroys the read.
    return pipe(opened.body, new OpenStream(keys, opts), () => undefined)
  }

  removeSync(sha256: string): void {
    if (this.orphanNames.delete(sha256)) return this.inner.removeSync(sha256)
    this.inner.removeSync(this.keys.nameOf(sha256))
    if (this.records.plainRemaining()) this.inner.removeSync(sha256)
  }

  async remove(sha256: string): Promise<void> {
    if (this.orphanNames.delete(sha256)) return this.inner.remove(sha256)
    await this.inner.remove(this.keys.nameOf(sha256))
    if (this.records.plainRemaining()) await this.inner.remove(sha256)
  }

  /**
   * The inner listing with names mapped back to the hashes recorded (one HMAC per record, held in
   * memory for the walk). A stored name no record maps to is an orphan: it is listed under that
   * name, which `remove` then takes as it is. Content in the clear (before `encrypt-blobs`) is
   * listed as the inner store lists it.
   */
  async *list(): AsyncIterable<ListedBlob> {
    const byName = new Map<string, string>()
    for (const sha of this.records.hashes()) byName.set(this.keys.nameOf(sha), sha)
    const plain = this.records.plainRemaining()
    for await (const b of this.inner.list()) {
      const sha = byName.get(b.sha256)
      if (sha !== undefined) yield { sha256: sha, mtimeMs: b.mtimeMs, size: plainSizeOf(b.size) ?? -1 }
      else if (plain && this.records.sizeOf(b.sha256) !== undefined) yield b
      else {
        this.orphanNames.add(b.sha256)
        yield b
      }
    }
  }

  /** The SHA-256 of the content once every chunk authenticated; UNAUTHENTIC when one does not. */
  async hash(sha256: string): Promise<string | undefined> {
    let opened: OpenedBlob
    try {
      opened = await this.open(sha256)
    } catch (err) {
      if (err instanceof BlobNotFoundError) return undefined
      if (err instanceof BlobAuthenticationError) return UNAUTHENTIC
      throw err
    }
    const h = createHash('sha256')
    try {
      if (Buffer.isBuffer(opened.body)) h.update(opened.body)
      else
        await pipeline(
          opened.body,
          new Writable({
            write(chunk: Buffer, _e, cb) {
              h.update(chunk)
              cb()
            },
          }),
        )
    } catch (err) {
      if (err instanceof BlobAuthenticationError) return UNAUTHENTIC
      throw err
    }
    return h.digest('hex')
  }

  probe(): Promise<void> {
    return this.inner.probe()
  }
  // No presign: a URL of the store itself would serve the sealed bytes.
}

function destroy(opened: OpenedBlob): void {
  if (!Buffer.isBuffer(opened.body)) opened.body.destroy()
}

async function readAll(opened: OpenedBlob): Promise<Buffer> {
  if (Buffer.isBuffer(opened.body)) return opened.body
  const parts: Buffer[] = []
  for await (const b of opened.body) parts.push(b as Buffer)
  return Buffer.concat(parts)
}
