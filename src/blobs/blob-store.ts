import type { Readable } from 'node:stream'

/** Content staged in the store's temp area: hashed, counted, and durable. */
export interface StagedBlob {
  /** Lowercase hex SHA-256 of the content. */
  sha256: string
  size: number
  /** Where the store keeps the content until it is placed and committed (opaque to callers). */
  tmpPath: string
  /**
   * The content itself, when the store keeps content this small in its database (the disk store,
   * INLINE_MAX_BYTES): nothing is at `tmpPath` then, and `ensurePlaced` is what stores it.
   */
  inline?: Buffer
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
  /**
   * The length the sender announced (Content-Length), when it did. A store that keeps small
   * content in memory until it is committed (the disk store's inline blobs) does so only when this
   * says it is small: content of unknown length streams to a staging file from the first byte.
   */
  expectedBytes?: number
  /** Called once with the first bytes (up to 64, fewer if the content is shorter); may throw. */
  checkHead?: (head: Buffer) => void
  /**
   * The caller hashes the content itself, so the store does not, and the `sha256` it answers is
   * '': the encrypted store stages sealed bytes and keeps the plaintext's SHA-256, and the sealed
   * bytes' was a second SHA-256 pass over every upload, thrown away (#27).
   */
  unhashed?: boolean
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

/** One stored blob as a listing sees it. */
export interface ListedBlob {
  sha256: string
  /** When it was written (epoch ms): the orphan sweep spares young ones. */
  mtimeMs: number
  size: number
}

/**
 * Content-addressed blob storage. The contract every implementation keeps (the disk store, and
 * S3BlobStore for S3-compatible object storage, issue #16):
 * - `stage` streams the content somewhere temporary while hashing it, never buffering it whole;
 *   on any failure nothing of it remains.
 * - `place` makes the blob durable under its hash before returning; placing content that is
 *   already stored is a no-op. Async, before the commit transaction: the slow part of a write.
 * - `ensurePlaced` and `removeSync` are SYNCHRONOUS because they run inside a SQLite write
 *   transaction (better-sqlite3 transactions cannot await): that lock is what orders a commit
 *   and a garbage collection of the same hash (GarbageCollector.collect). For the disk store both
 *   are a few syscalls, or a row of the same database for content it keeps inline: such content is
 *   written by `ensurePlaced` (its `place` has nothing to do), so every caller that places content
 *   also calls `ensurePlaced` in the transaction that records it, which makes it durable. A remote store cannot do network I/O there (`remote: true`): its uploads
 *   lease their hash before `place` and its deletions go through tombstones, both recorded in the
 *   database (services/remote-blobs.ts), so its `ensurePlaced` has nothing to do and it has no
 *   `removeSync`. Keep new synchronous methods out of this interface for that reason.
 * - `open` is async and returns a stream (or a small Buffer) plus its length, so a remote store
 *   can answer with a ranged GET.
 */
export interface BlobStore {
  /**
   * False for the disk store. True for a remote store (S3): `removeSync` is unavailable, since no
   * network call can run inside a SQLite transaction; uploads and deletions of the same content are
   * ordered by leases and tombstones instead (services/remote-blobs.ts), and `ensurePlaced` is a
   * no-op because a lease, not a re-link, keeps the placed object alive until the commit.
   */
  readonly remote: boolean
  /** Where the content lives, for /ready, logs and `coffer backup`: `disk <dir>` or `s3 <endpoint>/<bucket>/<prefix>`. */
  readonly description: string
  stage(source: Readable, guard: StageGuard): Promise<StagedBlob>
  /**
   * Throws when a body of this announced length cannot be staged at all (the in-memory budget,
   * memory-budget.ts): checked before a client waiting on `Expect: 100-continue` is told to send it.
   */
  admit?(expectedBytes: number): void
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
  /** Deletes a stored blob; the caller holds the write transaction that proved it unreferenced (disk only). */
  removeSync(sha256: string): void
  /** Deletes a stored blob, if present; outside any transaction (remote stores: see `remote`). */
  remove(sha256: string): Promise<void>
  /** Every stored blob. */
  list(): AsyncIterable<ListedBlob>
  /**
   * Inside the orphan sweep's transaction, for a name `list` yielded that no blob row has: whether
   * a row created at or after `since` records content stored under that name after all. Only the
   * encrypted store lists a name that is not a recorded hash (its keyed name, for content its
   * listing's snapshot of the rows did not map); elsewhere a name is a hash, which the caller's
   * row check covers. Wrappers forward it.
   */
  recordedUnder?(name: string, since: number): boolean
  /** The name the store keeps `sha256`'s content under, when it is not the hash (the encrypted store). Wrappers forward it. */
  storedName?(sha256: string): string
  /** Re-hashes a stored blob; undefined when it is missing. */
  hash(sha256: string): Promise<string | undefined>
  /** Throws when the store cannot serve (readiness); resolves quickly when it can. */
  probe(): Promise<void>
  /**
   * Remote stores only: a URL of the store itself that serves the blob for `expiresInSeconds`,
   * answering with the given Content-Type and Content-Disposition (redirected downloads).
   */
  presign?(sha256: string, expiresInSeconds: number, contentType: string, disposition: string): Promise<string>
}
