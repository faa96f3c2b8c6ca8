import type { Readable } from 'node:stream'

/** Content staged in the store's temp area: hashed, counted, and durable. */
export interface StagedBlob {
  /** Lowercase hex SHA-256 of the content. */
  sha256: string
  size: number
  /** Where the store keeps the content until it is placed and committed (opaque to callers). */
  tmpPath: string
}

/** Checks applied while content streams in; throwing aborts the stage and removes the temp file. */
export interface StageGuard {
  /** Largest size accepted; `onOverflow` is thrown as soon as the stream passes it. */
  maxBytes: number
  onOverflow: () => Error
  /**
   * Called with the size of every chunk within `maxBytes` as it arrives (metrics, bytes-in-flight
   * accounting); may throw, which aborts the stage with that error.
   */
  onChunk?: (bytes: number) => void
  /** Called once with the first bytes (up to 64, fewer if the content is shorter); may throw. */
  checkHead?: (head: Buffer) => void
}

/** Inclusive byte offsets, as in `Content-Range`; `end = start - 1` asks for no bytes (HEAD). */
export interface ByteRange {
  start: number
  end: number
}

/** Stored content opened for reading. */
export interface OpenedBlob {
  /** Bytes `body` yields: the range's length, or the whole blob's size. */
  length: number
  /**
   * The bytes. Small reads may come back as one Buffer (read at once, see DiskBlobStore.open),
   * larger ones as a stream the caller must consume or destroy.
   */
  body: Buffer | Readable
}

/** Thrown by `open` when the content is not in the store (a row without its blob: `coffer verify`). */
export class BlobNotFoundError extends Error {
  override name = 'BlobNotFoundError'
  constructor(readonly sha256: string) {
    super(`blob ${sha256} is not in the store`)
  }
}

/**
 * Content-addressed blob storage. The contract every implementation keeps (the disk store today;
 * an S3-compatible remote store is planned, issue #16):
 * - `stage` streams the content somewhere temporary while hashing it, never buffering it whole;
 *   on any failure nothing of it remains.
 * - `place` makes the blob durable under its hash before returning; placing content that is
 *   already stored is a no-op. Async, before the commit transaction: the slow part of a write.
 * - `ensurePlaced` and `removeSync` are SYNCHRONOUS because they run inside a SQLite write
 *   transaction (better-sqlite3 transactions cannot await): that lock is what orders a commit
 *   and a garbage collection of the same hash (GarbageCollector.collect). For the disk store both
 *   are a few syscalls. A remote store cannot do network I/O there: it would implement
 *   `ensurePlaced` as a check against what `place` recorded, and `removeSync` by recording the
 *   hash for deletion after the transaction commits (a tombstone the collector retries). Keep new
 *   synchronous methods out of this interface for that reason.
 * - `open` is async and returns a stream (or a small Buffer) plus its length, so a remote store
 *   can answer with a ranged GET.
 */
export interface BlobStore {
  stage(source: Readable, guard: StageGuard): Promise<StagedBlob>
  place(staged: StagedBlob): Promise<void>
  /** Inside the commit transaction: re-places the staged content if a collector removed the blob meanwhile. */
  ensurePlaced(staged: StagedBlob): void
  /** Removes the temp copy of a staged blob (after commit, or after a failure). */
  discard(staged: StagedBlob): Promise<void>
  /**
   * Reads a stored blob, or `range` of it (the caller has checked the range against the size it
   * recorded). Throws BlobNotFoundError when the content is missing.
   */
  open(sha256: string, range?: ByteRange): Promise<OpenedBlob>
  /** Deletes a stored blob; the caller holds the write transaction that proved it unreferenced. */
  removeSync(sha256: string): void
  /** Every stored sha256, with its modification time (the orphan sweep spares young ones). */
  list(): AsyncIterable<{ sha256: string; mtimeMs: number }>
  /** Re-hashes a stored blob; undefined when it is missing. */
  hash(sha256: string): Promise<string | undefined>
}
