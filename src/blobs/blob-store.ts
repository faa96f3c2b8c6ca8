import type { Readable } from 'node:stream'

/** Content staged in the store's temp area: hashed, counted, and synced to disk. */
export interface StagedBlob {
  /** Lowercase hex SHA-256 of the content. */
  sha256: string
  size: number
  /** The temp file holding the content until it is placed and committed. */
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

/**
 * Content-addressed storage on local disk. The contract every implementation keeps:
 * - `stage` never buffers the content whole; on any failure nothing of it remains.
 * - `place` makes the blob durable at its final path (fsync of file and directories) before
 *   returning; placing content that is already stored is a no-op.
 * - `ensurePlaced` and `removeIfOrphan` are synchronous so they can run inside a database write
 *   transaction: that lock is what orders a concurrent commit and a garbage collection of one hash.
 */
export interface BlobStore {
  stage(source: Readable, guard: StageGuard): Promise<StagedBlob>
  place(staged: StagedBlob): Promise<void>
  /** Inside the commit transaction: re-links the staged file if a collector removed the blob meanwhile. */
  ensurePlaced(staged: StagedBlob): void
  /** Removes the temp file of a staged blob (after commit, or after a failure). */
  discard(staged: StagedBlob): Promise<void>
  /** Absolute path of a stored blob (path-guarded). */
  pathOf(sha256: string): string
  exists(sha256: string): boolean
  /** Deletes a stored blob; the caller holds the write transaction that proved it unreferenced. */
  removeSync(sha256: string): void
  /** Every sha256 present on disk, with its file's modification time. */
  list(): AsyncIterable<{ sha256: string; mtimeMs: number }>
  /** Re-hashes a stored blob; undefined when it is missing. */
  hash(sha256: string): Promise<string | undefined>
}
