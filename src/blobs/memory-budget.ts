import fs from 'node:fs'
import type { Readable } from 'node:stream'
import { AppError } from '../errors'
import type { BlobStore, StagedBlob, StageGuard } from './blob-store'

/**
 * `serve --ephemeral --in-memory` (#28): the data dir is on a tmpfs, so every byte stored is RAM,
 * charged to the process's memory cgroup. Past the machine's (or the container's) memory the OOM
 * killer ends the server, and with it every acknowledged object of the CI job; so writes past
 * COFFER_IN_MEMORY_MAX_BYTES are refused instead, with 507 INSUFFICIENT_STORAGE on the API and
 * S3's InsufficientStorage, as a full disk is answered, and nothing of them is kept.
 *
 * What counts: the content recorded in the database (blob_totals, inline content included), the
 * database and its WAL as they are on the tmpfs, and the content being staged now (from its first
 * byte until it is committed or discarded). Inline content is thereby counted twice (in the totals
 * and in the database file), which errs on the side of the limit. A write whose announced length
 * does not fit is refused before its first byte is read.
 */
export class MemoryBudget implements BlobStore {
  readonly remote: boolean
  readonly description: string
  /** Bytes staged and not yet discarded, by every write in flight. */
  private staging = 0
  private readonly held = new WeakMap<StagedBlob, number>()

  constructor(
    private readonly inner: BlobStore,
    readonly maxBytes: number,
    /** Content recorded in the database (blob_totals). */
    private readonly storedBytes: () => number,
    /** The database's files on the tmpfs (coffer.db and its WAL). */
    private readonly dbFiles: readonly string[],
  ) {
    this.remote = inner.remote
    this.description = `${inner.description} (in memory, at most ${maxBytes} bytes)`
  }

  /** Bytes held in memory now, as the limit counts them. */
  used(): number {
    let files = 0
    for (const f of this.dbFiles) {
      try {
        files += fs.statSync(f).size
      } catch {
        // no WAL yet
      }
    }
    return this.storedBytes() + files + this.staging
  }

  private refusal(): AppError {
    return new AppError(
      'INSUFFICIENT_STORAGE',
      `In-memory mode holds at most ${this.maxBytes} bytes (COFFER_IN_MEMORY_MAX_BYTES, --in-memory-max-bytes) and this write does not fit; nothing was stored`,
    )
  }

  admit(expectedBytes: number): void {
    if (this.used() + expectedBytes > this.maxBytes) throw this.refusal()
  }

  async stage(source: Readable, guard: StageGuard): Promise<StagedBlob> {
    if (guard.expectedBytes !== undefined) this.admit(guard.expectedBytes)
    let mine = 0
    const onChunk = (bytes: number) => {
      mine += bytes
      this.staging += bytes
      // Every chunk (64 KiB): what other writes committed meanwhile counts too.
      if (this.used() > this.maxBytes) throw this.refusal()
      guard.onChunk?.(bytes)
    }
    try {
      const staged = await this.inner.stage(source, { ...guard, onChunk })
      this.held.set(staged, mine)
      return staged
    } catch (err) {
      this.staging -= mine
      throw err
    }
  }

  async discard(staged: StagedBlob): Promise<void> {
    try {
      await this.inner.discard(staged)
    } finally {
      this.staging -= this.held.get(staged) ?? 0
      this.held.delete(staged)
    }
  }

  place(staged: StagedBlob): Promise<void> {
    return this.inner.place(staged)
  }
  ensurePlaced(staged: StagedBlob): void {
    this.inner.ensurePlaced(staged)
  }
  open(...args: Parameters<BlobStore['open']>): ReturnType<BlobStore['open']> {
    return this.inner.open(...args)
  }
  removeSync(sha256: string): void {
    this.inner.removeSync(sha256)
  }
  remove(sha256: string): Promise<void> {
    return this.inner.remove(sha256)
  }
  list(): ReturnType<BlobStore['list']> {
    return this.inner.list()
  }
  hash(sha256: string): Promise<string | undefined> {
    return this.inner.hash(sha256)
  }
  recordedUnder(name: string, since: number): boolean {
    return this.inner.recordedUnder?.(name, since) ?? false
  }
  storedName(sha256: string): string {
    return this.inner.storedName?.(sha256) ?? sha256
  }
  probe(): Promise<void> {
    return this.inner.probe()
  }
}
