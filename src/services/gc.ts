import type { DB } from '../db/database'
import type { FilesRepo } from '../db/repos/files'
import type { BlobsRepo } from '../db/repos/blobs'
import type { BlobStore } from '../blobs/blob-store'
import type { Clock } from '../lib/clock'

/** A blob file with no row is an orphan only once it is this old: younger ones may be mid-commit. */
export const ORPHAN_MIN_AGE_MS = 60 * 60_000
const BATCH = 500

export interface VerifyReport {
  checked: number
  missing: string[]
  corrupt: string[]
  orphans: string[]
}

/** Garbage collection of soft-deleted files and unreferenced blobs, and the integrity check. */
export class GarbageCollector {
  constructor(private readonly deps: { db: DB; clock: Clock; files: FilesRepo; blobs: BlobsRepo; store: BlobStore; retentionMs: number }) {}

  /**
   * Purges files deleted longer than the retention ago, then the blobs they leave unreferenced
   * (`full`: every unreferenced blob, for `coffer gc`). Each blob's row and file go inside one write
   * transaction, so a concurrent upload of the same content either keeps the blob alive or, finding
   * it gone, re-links its own copy (BlobStore.ensurePlaced).
   */
  collect(full = false): { filesPurged: number; blobsRemoved: number; bytesFreed: number } {
    const { db, clock, files, blobs, store, retentionMs } = this.deps
    const result = { filesPurged: 0, blobsRemoved: 0, bytesFreed: 0 }
    const removeIfUnreferenced = (sha256: string) => {
      const size = blobs.sizeIfUnreferenced(sha256)
      if (size === undefined) return
      blobs.delete(sha256)
      store.removeSync(sha256)
      result.blobsRemoved++
      result.bytesFreed += size
    }
    for (;;) {
      const batch = files.purgeable(clock.now() - retentionMs, BATCH)
      db.transaction(() => {
        for (const f of batch) if (files.hardDelete(f.id)) result.filesPurged++
        for (const f of batch) if (f.sha256 !== null) removeIfUnreferenced(f.sha256)
      }).immediate()
      if (batch.length < BATCH) break
    }
    if (full) {
      let after = ''
      for (;;) {
        const shas = blobs.shasAfter(after, BATCH)
        db.transaction(() => shas.forEach(removeIfUnreferenced)).immediate()
        if (shas.length < BATCH) break
        after = shas.at(-1)!
      }
    }
    return result
  }

  /** Removes blob files that have no row (a crash between placing and committing) and are old enough. */
  async removeOrphans(): Promise<number> {
    const { db, clock, blobs, store } = this.deps
    let removed = 0
    for await (const b of store.list()) {
      if (clock.now() - b.mtimeMs < ORPHAN_MIN_AGE_MS || blobs.exists(b.sha256)) continue
      db.transaction(() => {
        if (!blobs.exists(b.sha256)) {
          store.removeSync(b.sha256)
          removed++
        }
      }).immediate()
    }
    return removed
  }

  /** Re-hashes every stored blob; reports rows without content, content that changed, and orphans. */
  async verify(): Promise<VerifyReport> {
    const { blobs, store } = this.deps
    const report: VerifyReport = { checked: 0, missing: [], corrupt: [], orphans: [] }
    for (let after = ''; ;) {
      const shas = blobs.shasAfter(after, BATCH)
      for (const sha of shas) {
        report.checked++
        const actual = await store.hash(sha)
        if (actual === undefined) report.missing.push(sha)
        else if (actual !== sha) report.corrupt.push(sha)
      }
      if (shas.length < BATCH) break
      after = shas.at(-1)!
    }
    for await (const b of store.list()) if (!blobs.exists(b.sha256)) report.orphans.push(b.sha256)
    return report
  }
}
