import { randomUUID } from 'node:crypto'
import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { BlobsRepo } from '../db/repos/blobs'
import type { BlobStore, StagedBlob } from '../blobs/blob-store'
import type { Clock } from '../lib/clock'
import type { RemoteBlobs } from './remote-blobs'

/**
 * The one sequence by which new content enters the store and content leaves it, for both fronts
 * (the API's uploads, and the S3 front's PutObject, UploadPart, UploadPartCopy and
 * CompleteMultipartUpload) and for the garbage collector:
 *   write:   lease the hash (remote store) → place → commit transaction (re-place on disk, settle
 *            the lease, blob row) → or, on any failure, delete the content if nothing needs it.
 *   release: inside a write transaction, an unreferenced blob's row goes and its content is
 *            removed (disk) or tombstoned (remote store, deleted by `drain` after the commit).
 * On disk the transaction's lock orders a write and a deletion of the same hash; on a remote store
 * leases and tombstones do (RemoteBlobs). Nothing else calls place, ensurePlaced or removeSync on
 * the store being served (`coffer migrate-blobs` places into the other store, which nothing collects).
 *
 * Transactions run on the engine (#30): on PostgreSQL a run that meets a deadlock or a
 * serialization failure runs again, so what they do outside the database is idempotent: the disk
 * store's `ensurePlaced` places content that is not there yet; a remote store's deletions wait for
 * `drain`, after the commit. Counters are added up after the commit, never inside a run.
 *
 * The disk store on PostgreSQL (a data dir path several nodes share) unlinks released content
 * after the commit too, in `drain`: a transaction that unlinked inside and then rolled back, for
 * good or to run again after 40001/40P01, would leave a row whose file is gone. The hashes a
 * transaction released are only candidates: each is unlinked in a transaction of its own, under
 * the content's lock (BlobsRepo.lockContent), only if no blob row records it by then; a write
 * settles its content under the same lock, re-placing it if an unlink came first. A crash between
 * the commit and the unlink leaves an orphan file, which `coffer gc`'s orphan sweep removes
 * (GarbageCollector.removeOrphans). On SQLite the unlink stays inside the transaction, whose one
 * write lock orders it against a write of the same content.
 */
export class BlobWrites {
  constructor(
    private readonly deps: {
      db: DB | Engine
      clock: Clock
      blobs: BlobsRepo
      store: BlobStore
      /** Present with a remote store. */
      remote?: RemoteBlobs
    },
  ) {
    this.engine = engineOf(deps.db)
    this.unlinkAfterCommit = !deps.remote && this.engine.dialect === 'postgres'
  }

  private readonly engine: Engine
  /** The disk store on PostgreSQL: released content is unlinked by `drain`, after the commit. */
  private readonly unlinkAfterCommit: boolean
  /**
   * Content released (or found orphaned) by transactions since the last drain: candidates to
   * unlink, each with the orphan sweep's `since` (removeOrphanInTx) when it is a listed orphan.
   */
  private readonly unlinks = new Map<string, number | undefined>()

  /** A writer id for a lease when the write has no row id of its own yet (S3 objects and parts). */
  static writerId(): string {
    return randomUUID()
  }

  /**
   * Places `staged` under a lease held by `writer` (unique to this write), then runs `commit`,
   * which must call `settle()` inside the write transaction that records the content. On any
   * failure the placed content is removed when no row references it, and the error rethrown. The
   * caller still discards the staged temp copy.
   */
  async write<T>(writer: string, staged: StagedBlob, commit: (settle: () => void) => Promise<T> | T): Promise<T> {
    const { store, remote, blobs, clock } = this.deps
    let leased = false
    try {
      if (remote) {
        await remote.lease(writer, staged.sha256)
        leased = true
      }
      await store.place(staged)
      let settled = false
      const result = await commit(() => {
        // Waits for an unlink of the same content on another node, then re-places what it removed.
        // The stored name's lock too, which the unlink of an orphan listed under it takes (the
        // encrypted store's keyed name): always after the hash's, so the two never wait in a cycle.
        if (this.unlinkAfterCommit) {
          blobs.lockContent(staged.sha256)
          const name = store.storedName?.(staged.sha256)
          if (name !== undefined && name !== staged.sha256) blobs.lockContent(name)
        }
        store.ensurePlaced(staged)
        remote?.settleInTx(writer, staged.sha256)
        blobs.insertIfMissing(staged.sha256, staged.size, clock.now())
        settled = true
      })
      // A commit that forgot to settle would leave content no row records: a bug, caught here.
      if (!settled) throw new Error('BlobWrites.write: the commit did not settle the content')
      return result
    } catch (err) {
      await this.discardIfUnused(writer, staged.sha256, leased)
      throw err
    }
  }

  /**
   * Inside a write transaction: when no file and no multipart part references `sha256`, its row
   * goes and its content is removed (disk) or tombstoned (remote; kept, with its row, while an
   * upload holds a lease on it). Returns the bytes freed, undefined when nothing was released.
   * Call `drain` after the commit.
   */
  releaseInTx(sha256: string): number | undefined {
    const { blobs, store, remote } = this.deps
    const size = blobs.sizeIfUnreferenced(sha256)
    if (size === undefined) return undefined
    if (remote) {
      if (!remote.condemnInTx(sha256)) return undefined
    } else if (this.unlinkAfterCommit) {
      this.unlinks.set(sha256, undefined)
    } else {
      store.removeSync(sha256)
    }
    blobs.delete(sha256)
    return size
  }

  /**
   * Inside a write transaction: a stored blob with no row (an orphan) is removed or tombstoned.
   * `since`: the orphan sweep's, from which rows created since its listing began are checked for
   * content stored under the listed name (BlobStore.recordedUnder: the encrypted store's keyed names).
   */
  removeOrphanInTx(sha256: string, since?: number): boolean {
    const { store, remote } = this.deps
    if (this.recorded(sha256, since)) return false
    if (remote) return remote.condemnInTx(sha256, since !== undefined)
    if (this.unlinkAfterCommit) this.unlinks.set(sha256, since)
    else store.removeSync(sha256)
    return true
  }

  /** Whether a blob row records `name`: as its hash, or (a listed orphan's `since` given) under the store's name for it. */
  private recorded(name: string, since: number | undefined): boolean {
    if (this.deps.blobs.exists(name)) return true
    return since !== undefined && (this.deps.store.recordedUnder?.(name, since) ?? false)
  }

  /**
   * Finishes the releases a commit deferred (BlobsRepo.deferRelease): those of `shas`, or every
   * one waiting (at start and in the periodic collection, after a crash between that commit and
   * this, #24). A blob nothing references any more is removed (tombstoned, then deleted, on a
   * remote store); its record goes either way. Drains quietly: a refused deletion waits for the GC.
   */
  async releaseDeferred(shas?: string[]): Promise<{ blobs: number; bytes: number }> {
    const { db, blobs } = this.deps
    const result = { blobs: 0, bytes: 0 }
    const finish = (batch: string[]) => {
      // Freed sizes are kept by the run that commits: a run PostgreSQL repeats starts over.
      const freed = engineOf(db).transaction(() => {
        const sizes: number[] = []
        for (const sha of batch) {
          const size = this.releaseInTx(sha)
          blobs.undefer(sha)
          if (size !== undefined) sizes.push(size)
        }
        return sizes
      })
      result.blobs += freed.length
      for (const size of freed) result.bytes += size
    }
    if (shas) finish(shas)
    else {
      for (;;) {
        const batch = blobs.deferred(500)
        finish(batch)
        if (batch.length < 500) break
      }
    }
    await this.drainQuietly()
    return result
  }

  /**
   * After a transaction that released content: deletes the tombstoned objects of a remote store,
   * or unlinks the released files of the disk store on PostgreSQL (nothing to do on SQLite, whose
   * transaction unlinked them). Failed deletions wait for the next run.
   */
  async drain(): Promise<{ deleted: number; failed: number }> {
    if (this.deps.remote) return this.deps.remote.drain()
    return this.unlinkReleased()
  }

  /**
   * Unlinks each candidate no blob row records, each in a transaction of its own holding the
   * content's lock: a write of the same content committed meanwhile (on any node) is seen and its
   * file kept; one still to commit waits for the unlink, then re-places the content (`write`).
   * A candidate whose transaction rolled back finds its row there and is kept.
   */
  private unlinkReleased(): { deleted: number; failed: number } {
    const { blobs, store } = this.deps
    const result = { deleted: 0, failed: 0 }
    for (const [sha256, since] of [...this.unlinks]) {
      this.unlinks.delete(sha256)
      try {
        const unlinked = this.engine.transaction(() => {
          blobs.lockContent(sha256)
          if (this.recorded(sha256, since)) return false
          store.removeSync(sha256)
          return true
        })
        if (unlinked) result.deleted++
      } catch {
        // The database or the disk refused: tried again at the next drain (the periodic collection's).
        this.unlinks.set(sha256, since)
        result.failed++
      }
    }
    return result
  }

  /** Like drain, for callers that must not fail once their own work is committed: errors wait for the next GC. */
  async drainQuietly(): Promise<void> {
    await this.drain().catch(() => undefined)
  }

  /** Content of a failed write: removed when no row needs it (best effort: the orphan sweep finds what is left). */
  private async discardIfUnused(writer: string, sha256: string, leased: boolean): Promise<void> {
    const { db, remote } = this.deps
    try {
      if (remote) {
        // Without a lease, this write may not have placed anything, and must not delete what a
        // concurrent writer of the same content placed under its own lease: condemnInTx checks that.
        if (leased) await remote.discardIfUnused(writer, sha256)
        return
      }
      engineOf(db).transaction(() => this.removeOrphanInTx(sha256))
      await this.drain()
    } catch {
      // Best effort: `coffer gc` removes orphans it finds later.
    }
  }
}
