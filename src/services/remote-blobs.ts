import { storeUnavailable } from '../errors'
import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { BlobLeasesRepo } from '../db/repos/blob-leases'
import type { BlobsRepo } from '../db/repos/blobs'
import type { BlobStore } from '../blobs/blob-store'
import type { Clock } from '../lib/clock'

/**
 * How long an upload's lease on its hash lasts. Only a crashed upload ever lets one run out: a live
 * upload's store calls are bounded by the store timeout (a 100 MiB body is 13 parts), far below.
 */
export const LEASE_MS = 60 * 60_000

/**
 * Orders uploads and deletions of the same content on a remote blob store (S3), where neither the
 * write nor the delete can run inside the SQLite write transaction that orders them on disk
 * (the disk store links and unlinks synchronously under that lock: see GarbageCollector.collect).
 *
 * Upload U of content H:
 *   1. lease (one transaction): when H has a tombstone, its deletion is under way: U claims it and
 *      finishes the deletion itself, or waits while another process holds the claim (503 after the
 *      store timeout). With no tombstone left, U records a lease (U, H, expiry).
 *   2. the object is written (or found already there) in the store: no lock held.
 *   3. commit (one transaction): U's lease must still be held; the blob and file rows are written
 *      and the lease dropped.
 * Collection of H (a blob row no file references, or an old object with no row at all):
 *   1. one transaction: when no live lease on H exists, the row goes and a tombstone for H is added;
 *      a leased H is left alone.
 *   2. the tombstone is claimed for a bounded time, the object deleted, the tombstone removed.
 * Why nothing acknowledged is lost: a delete of H starts only under a tombstone; a tombstone is
 * added only when no live lease exists; a lease is taken only when no tombstone exists (each
 * check and insert under H's lock, so that two nodes' transactions on PostgreSQL cannot both pass
 * their checks: BlobLeasesRepo.lockHash). So no
 * delete of H can begin between an upload's lease and its commit, and every delete that began has
 * finished (or its claim ran out, which bounds a lost request's window) before an upload writes H
 * again. A crashed deleter leaves a tombstone that the next collection (or the next upload of H)
 * completes; a crashed upload leaves a lease that expires, and an object the orphan sweep removes.
 *
 * The transactions run on the engine (#30) and touch nothing but rows: every call to the store
 * (a deletion) and every wait happens between them, so a run PostgreSQL repeats after a deadlock
 * or a serialization failure repeats no store call.
 */
export class RemoteBlobs {
  private readonly engine: Engine

  constructor(
    private readonly deps: {
      db: DB | Engine
      clock: Clock
      leases: BlobLeasesRepo
      blobs: BlobsRepo
      store: BlobStore
      /** The store's per-call timeout: how long a lease waits on someone else's deletion. */
      timeoutMs: number
    },
  ) {
    this.engine = engineOf(deps.db)
  }

  /** How long a deleter holds a claimed tombstone: its DELETE (with retries) is over by then. */
  private get claimMs(): number {
    return this.deps.timeoutMs * 3 + 5_000
  }

  /** Step 1 of an upload: waits out (or completes) a deletion of `sha256`, then leases it. */
  async lease(uploadId: string, sha256: string): Promise<void> {
    const { clock, leases } = this.deps
    const deadline = Date.now() + this.deps.timeoutMs
    // The name the store keeps it under, when that is not the hash (the encrypted store): the orphan
    // sweep tombstones an orphan by that name (condemnInTx), which this upload waits out too.
    const named = this.deps.store.storedName?.(sha256)
    const name = named !== undefined && named !== sha256 ? named : undefined
    for (;;) {
      const state = this.engine.transaction(() => {
        const now = clock.now()
        leases.lockHash(sha256)
        if (name !== undefined) leases.lockHash(name)
        const doomed = leases.tombstoned(sha256) ? sha256 : name !== undefined && leases.tombstoned(name) ? name : undefined
        if (doomed === undefined) {
          leases.lease(uploadId, sha256, now + LEASE_MS)
          return 'leased'
        }
        return leases.claim(doomed, now, now + this.claimMs) ? { claimed: doomed } : 'busy'
      })
      if (state === 'leased') return
      if (state !== 'busy') await this.deleteClaimed(state.claimed)
      else if (Date.now() > deadline) throw storeUnavailable('lease')
      else await new Promise((r) => setTimeout(r, 25))
    }
  }

  /** Drops an upload's lease (it failed; on success the commit drops it). */
  release(uploadId: string): void {
    this.engine.transaction(() => this.deps.leases.release(uploadId))
  }

  /** Inside the commit transaction: the lease must still hold, else a collector may have deleted the object. */
  settleInTx(uploadId: string, sha256: string): void {
    const { leases, clock } = this.deps
    if (!leases.held(uploadId, sha256, clock.now())) throw storeUnavailable('lease')
    leases.release(uploadId)
  }

  /**
   * Inside a collector's write transaction: tombstones `sha256` for deletion unless an upload holds
   * a live lease on it. The caller has checked that no row needs the content. False when leased.
   * `listed`: a name the orphan sweep listed, which may be the store's name for content rather than
   * a hash (the encrypted store's keyed name): an upload leasing any hash stored under that name
   * keeps it too (one HMAC per upload in flight), as its commit would record the content.
   */
  condemnInTx(sha256: string, listed = false): boolean {
    const { leases, clock, store } = this.deps
    const now = clock.now()
    leases.lockHash(sha256)
    if (leases.leased(sha256, now)) return false
    if (listed && store.storedName && leases.leasedHashes(now).some((h) => store.storedName!(h) === sha256)) return false
    leases.tombstone(sha256, now)
    return true
  }

  /** Deletes the content of a failed upload when nothing else needs it (best effort: orphans are swept later). */
  async discardIfUnused(uploadId: string, sha256: string): Promise<void> {
    const { blobs } = this.deps
    const condemned = this.engine.transaction(() => {
      this.deps.leases.release(uploadId)
      return !blobs.exists(sha256) && this.condemnInTx(sha256)
    })
    if (condemned) await this.drain().catch(() => undefined)
  }

  /**
   * Step 2 of collection: deletes every tombstoned object nobody else is deleting, and drops
   * expired leases. Returns how many objects were deleted and how many deletions failed (their
   * tombstones stay for the next run).
   */
  async drain(): Promise<{ deleted: number; failed: number }> {
    const { clock, leases } = this.deps
    const out = { deleted: 0, failed: 0 }
    this.engine.transaction(() => leases.dropExpired(clock.now()))
    const failed = new Set<string>()
    for (;;) {
      const batch = leases.claimable(clock.now(), 100).filter((sha) => !failed.has(sha))
      if (batch.length === 0) return out
      for (const sha256 of batch) {
        const now = clock.now()
        if (!this.engine.transaction(() => leases.claim(sha256, now, now + this.claimMs))) continue
        try {
          await this.deleteClaimed(sha256)
          out.deleted++
        } catch {
          failed.add(sha256)
          out.failed++
        }
      }
    }
  }

  /** Tombstones waiting (a store that refuses deletions shows here). */
  pendingDeletions(): number {
    return this.deps.leases.count()
  }

  /** Deletes a claimed tombstone's object and removes the tombstone; on failure releases the claim for a retry. */
  private async deleteClaimed(sha256: string): Promise<void> {
    const { leases, store } = this.deps
    try {
      await store.remove(sha256)
    } catch (err) {
      // A DELETE that timed out may still land: the claim is released only after it surely has.
      if ((err as { operation?: string }).operation === undefined) this.engine.transaction(() => leases.unclaim(sha256))
      throw err
    }
    this.engine.transaction(() => leases.bury(sha256))
  }
}
