import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { FilesRepo } from '../db/repos/files'
import type { BlobsRepo } from '../db/repos/blobs'
import type { BlobStore } from '../blobs/blob-store'
import type { Clock } from '../lib/clock'
import type { BlobWrites } from './blob-writes'
import type { TenantsService } from './tenants'
import type { DiskReserve } from '../lib/disk-reserve'
import { createHash } from 'node:crypto'
import { BlobNotFoundError } from '../blobs/blob-store'
import { SealedObjectsRepo } from '../db/repos/sealed-objects'
import { openSealedObject } from '../s3/sealed-objects'
import { segmentsOf, serverKey, type ServerKeys } from '../s3/sse'

/** A blob file with no row is an orphan only once it is this old: younger ones may be mid-commit. */
export const ORPHAN_MIN_AGE_MS = 60 * 60_000
const BATCH = 500

export interface VerifyReport {
  checked: number
  missing: string[]
  corrupt: string[]
  orphans: string[]
  /**
   * Recorded blobs that no file and no multipart part references: released content whose removal
   * was cut short (a crash after a CompleteMultipartUpload committed, #24). Not an integrity
   * failure: the server removes them at start and in its periodic collection, `coffer gc` at once.
   */
  unreferenced: string[]
  /** Whether content was re-hashed (always on disk; with --read-data on a remote store) or only listed. */
  readData: boolean
}

/**
 * Where a listing's re-check for rows created since it began starts (BlobStore.recordedUnder): an
 * hour before, for a clock stepped back (or another node's behind) by up to the hour that the
 * sweep's minimum age already takes as the bound on a clock's error.
 */
function listedSince(clock: Clock): number {
  return clock.now() - ORPHAN_MIN_AGE_MS
}

/** Garbage collection of soft-deleted files and unreferenced blobs, and the integrity check. */
export class GarbageCollector {
  private readonly engine: Engine

  constructor(
    private readonly deps: {
      db: DB | Engine
      clock: Clock
      files: FilesRepo
      blobs: BlobsRepo
      store: BlobStore
      tenants: TenantsService
      retentionMs: number
      /** Removes unreferenced content: under the lock on disk, through tombstones on a remote store. */
      writes: BlobWrites
      /** GC's transactions free space: on a full disk they may use the reserve, which is written again after. */
      reserve: Pick<DiskReserve, 'freeing' | 'ensure'>
      /** The keys of objects sealed under a key the server holds (SSE-KMS, SSE-S3; #27), which verify opens. */
      keys?: ServerKeys
    },
  ) {
    this.engine = engineOf(deps.db)
  }

  /**
   * Purges files deleted longer than the retention ago, then the blobs they leave unreferenced
   * (`full`: every unreferenced blob, for `coffer gc`). Each blob's row and file go inside one write
   * transaction, so a concurrent upload of the same content either keeps the blob alive or, finding
   * it gone, re-links its own copy (BlobStore.ensurePlaced); on PostgreSQL the file goes after the
   * commit, under the content's lock (BlobWrites.drain, #30). On a remote store the transaction
   * only tombstones the blob (skipping one an upload has leased) and the objects are deleted after
   * it (RemoteBlobs); `storeFailures` counts deletions the store refused, retried on the next run.
   */
  async collect(full = false): Promise<{ filesPurged: number; blobsRemoved: number; bytesFreed: number; tenantsPurged: number; storeFailures?: number }> {
    const { clock, files, blobs, tenants, retentionMs, writes, reserve } = this.deps
    const result = { filesPurged: 0, blobsRemoved: 0, bytesFreed: 0, tenantsPurged: 0 }
    const removeIfUnreferenced = (sha256: string) => {
      const size = writes.releaseInTx(sha256)
      if (size === undefined) return
      result.blobsRemoved++
      result.bytesFreed += size
    }
    // A transaction run again counts what its last run did: the disk reserve runs it again after
    // a full disk, PostgreSQL's engine after a serialization failure or a deadlock (#30).
    const freeing = (run: () => void) => {
      const before = { ...result }
      reserve.freeing(() =>
        this.engine.transaction(() => {
          Object.assign(result, before)
          run()
        }),
      )
    }
    // Releases a crash left between a commit and the removal it deferred (#24).
    const deferred = await writes.releaseDeferred()
    result.blobsRemoved += deferred.blobs
    result.bytesFreed += deferred.bytes
    for (;;) {
      const batch = files.purgeable(clock.now() - retentionMs, BATCH)
      freeing(() => {
        for (const f of batch) if (files.hardDelete(f.id)) result.filesPurged++
        for (const f of batch) if (f.sha256 !== null) removeIfUnreferenced(f.sha256)
      })
      if (batch.length < BATCH) break
    }
    // A deleted tenant's row goes once its last file has (#13).
    result.tenantsPurged = tenants.purgeDeleted()
    if (full) {
      let after = ''
      for (;;) {
        const shas = blobs.shasAfter(after, BATCH)
        freeing(() => shas.forEach(removeIfUnreferenced))
        if (shas.length < BATCH) break
        after = shas.at(-1)!
      }
    }
    // Space freed (or found free): the next full disk is covered again. A stat when it is in place.
    reserve.ensure()
    // Tombstoned objects of a remote store, or released files of the disk store on PostgreSQL (BlobWrites).
    const { failed } = await writes.drain()
    return failed > 0 ? { ...result, storeFailures: failed } : result
  }

  /** Finishes every release a commit deferred and a crash cut short (BlobWrites.releaseDeferred): at start. */
  releaseDeferred(): Promise<{ blobs: number; bytes: number }> {
    return this.deps.writes.releaseDeferred()
  }

  /**
   * Removes blob files that have no row (a crash between placing and committing) and are old enough.
   * A name the encrypted store lists as an orphan is checked again in the transaction against the
   * rows created since the listing began (BlobStore.recordedUnder): content uploaded again meanwhile
   * kept the file already there, whose removal lost an acknowledged upload.
   */
  async removeOrphans(): Promise<number> {
    const { clock, blobs, store, writes } = this.deps
    const since = listedSince(clock)
    let removed = 0
    for await (const b of store.list()) {
      if (clock.now() - b.mtimeMs < ORPHAN_MIN_AGE_MS || blobs.exists(b.sha256)) continue
      if (this.engine.transaction(() => writes.removeOrphanInTx(b.sha256, since))) removed++
    }
    await writes.drain()
    return removed
  }

  /**
   * Checks every blob the database records; reports rows without content, content that changed,
   * rows nothing references any more, and stored blobs no row records. The disk store re-hashes everything; a remote store, where
   * reading everything back costs transfer, compares one listing's keys and sizes unless
   * `readData` asks for the hashes too.
   */
  async verify(readData = false): Promise<VerifyReport> {
    const { blobs, store } = this.deps
    const rehash = readData || !store.remote
    const report: VerifyReport = { checked: 0, missing: [], corrupt: [], orphans: [], unreferenced: [], readData: rehash }
    const listed = new Map<string, number>()
    const since = listedSince(this.deps.clock)
    for await (const b of store.list()) {
      if (blobs.exists(b.sha256)) listed.set(b.sha256, b.size)
      // Content recorded since the listing began is no orphan (removeOrphans), whatever its name.
      else if (!store.recordedUnder?.(b.sha256, since)) report.orphans.push(b.sha256)
    }
    for (let after = ''; ;) {
      const rows = blobs.sizesAfter(after, BATCH)
      for (const { sha256, size } of rows) {
        report.checked++
        if (blobs.sizeIfUnreferenced(sha256) !== undefined) report.unreferenced.push(sha256)
        if (rehash) {
          const actual = await store.hash(sha256)
          if (actual === undefined) report.missing.push(sha256)
          else if (actual !== sha256) report.corrupt.push(sha256)
        } else if (!listed.has(sha256)) report.missing.push(sha256)
        else if (listed.get(sha256) !== size) report.corrupt.push(sha256)
      }
      if (rows.length < BATCH) break
      after = rows.at(-1)!.sha256
    }
    if (rehash) await this.verifySealed(report)
    return report
  }

  /**
   * Opens every object sealed under a key of its own that the server holds (SSE-KMS, SSE-S3; #27):
   * every chunk's tag is checked, and the plaintext's SHA-256 against the one recorded. A blob
   * that fails is corrupt even where its own hash held (sealed bytes that were never this object's).
   * SSE-C objects (the key is the customer's) and those of a KMS key the ring no longer holds are
   * checked by their blob's hash only.
   */
  private async verifySealed(report: VerifyReport): Promise<void> {
    const { db, store, keys } = this.deps
    if (!keys) return
    const repo = new SealedObjectsRepo(db)
    const skip = new Set([...report.missing, ...report.corrupt])
    for (let after: string | undefined = ''; after !== undefined;) {
      const page = repo.after(after, BATCH)
      after = page.next
      for (const o of page.rows) {
        if (o.sse.type === 'C' || skip.has(o.sha256)) continue
        const key = serverKey(keys, o.sse)
        if (!key) continue
        try {
          const opened = await openSealedObject(store, o.sha256, segmentsOf(o.sse, o.size), key)
          const hash = createHash('sha256')
          if (Buffer.isBuffer(opened.body)) hash.update(opened.body)
          else for await (const b of opened.body) hash.update(b as Buffer)
          if (o.sse.sha256 === undefined || hash.digest('hex') === o.sse.sha256) continue
        } catch (err) {
          if (err instanceof BlobNotFoundError) {
            skip.add(o.sha256)
            report.missing.push(o.sha256)
            continue
          }
        }
        skip.add(o.sha256)
        report.corrupt.push(o.sha256)
      }
    }
  }
}
