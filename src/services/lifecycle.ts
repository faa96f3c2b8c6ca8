import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { LifecycleRepo } from '../db/repos/lifecycle'
import type { ObjectInfo } from '../db/repos/objects'
import type { Clock } from '../lib/clock'
import type { DiskReserve } from '../lib/disk-reserve'
import type { BucketConfigsService } from './bucket-configs'
import type { ObjectVersions } from './versions'
import { expiryAt, selectionOf, selects, statedExpiry, type LifecycleConfiguration, type LifecycleRule, type Selection } from './lifecycle-rules'

/** The bucket_configs family of lifecycle configurations. */
export const LIFECYCLE = 'lifecycle'

/** Keys judged per write transaction: a pass never holds the write lock long. */
const KEYS_PER_TRANSACTION = 100
/** Multipart uploads aborted per transaction. */
const UPLOADS_PER_TRANSACTION = 100

/** What one pass did. */
export interface LifecycleOutcome {
  /** Current versions expired (deleted, or hidden by a delete marker in a versioned bucket). */
  expired: number
  /** Noncurrent versions deleted for good. */
  noncurrentDeleted: number
  /** Lone (expired object) delete markers removed. */
  markersRemoved: number
  /** Incomplete multipart uploads aborted. */
  uploadsAborted: number
  /** Keys judged. */
  keys: number
  /** True when the pass reached the end of every bucket (false: its budget ran out; the next one resumes). */
  complete: boolean
}

/** What a batch's transaction removed, counted by the run that commits. */
type Removed = Pick<LifecycleOutcome, 'expired' | 'noncurrentDeleted' | 'markersRemoved'>

interface Compiled {
  rule: LifecycleRule
  selection: Selection
}

/**
 * Lifecycle configurations (#25) for both fronts, and the pass that applies them. The pass walks
 * every bucket with a configuration, key by key in binary order, judging a key's versions against
 * the enabled rules in one write transaction per batch of keys, with the same services as the S3
 * deletes (ObjectVersions): expiring a current version deletes it in an unversioned bucket and adds
 * a delete marker in a versioned one; noncurrent expiry and a lone delete marker's removal delete
 * those versions for good. Their bytes leave the tenant's and bucket's usage in that transaction
 * (the quota triggers), and their blobs are released by the collector once no file references them.
 *
 * Resumable: every batch commits whole, and every decision is made from what is stored and the
 * clock, so a pass cut short (a crash, a shutdown, its budget) leaves nothing half done and the
 * next pass redoes nothing that was done. The cursor between passes is only memory.
 */
export class LifecycleService {
  /** Buckets up to this workspace id are done in this round of passes. */
  private after = ''
  /** A bucket a pass stopped inside (its budget ran out), and the last key it judged. */
  private resume: { workspaceId: string; key: string } | undefined
  private readonly engine: Engine

  constructor(
    private readonly deps: {
      db: DB | Engine
      clock: Clock
      configs: BucketConfigsService
      repo: LifecycleRepo
      versions: ObjectVersions
      reserve: DiskReserve
      /** Aborts a multipart upload (its parts released) inside the caller's write transaction. */
      abortUpload: (uploadId: string) => void
      /** How long a lifecycle day is (COFFER_S3_LIFECYCLE_DAY_SECONDS). */
      dayMs: number
    },
  ) {
    this.engine = engineOf(deps.db)
  }

  get(workspaceId: string): LifecycleConfiguration | undefined {
    return this.deps.configs.get<LifecycleConfiguration>(workspaceId, LIFECYCLE)
  }

  put(workspaceId: string, config: LifecycleConfiguration): void {
    this.deps.configs.put(workspaceId, LIFECYCLE, config)
  }

  delete(workspaceId: string): boolean {
    return this.deps.configs.delete(workspaceId, LIFECYCLE)
  }

  /**
   * What `x-amz-expiration` says of a current object: the earliest expiration of the enabled rules
   * that select it, and that rule's ID; undefined when none does. Days are stated in calendar days
   * rounded up to midnight UTC, as AWS and RGW state them, whatever the lifecycle day's length.
   */
  expirationOf(workspaceId: string, o: { key: string; size: number; createdAt: number; info: ObjectInfo | null }): { at: number; ruleId: string } | undefined {
    const config = this.get(workspaceId)
    if (!config) return undefined
    let best: { at: number; ruleId: string } | undefined
    for (const { rule, selection } of compile(config)) {
      const e = rule.expiration
      if (!e || (e.days === undefined && e.date === undefined)) continue
      if (!selects(selection, o.key, o.size, o.info)) continue
      const at = e.days !== undefined ? statedExpiry(o.createdAt, e.days) : Date.parse(e.date!)
      if (!best || at < best.at) best = { at, ruleId: rule.id }
    }
    return best
  }

  /**
   * One pass over every bucket with a lifecycle configuration, judging at most `budget` keys; it
   * yields to the event loop between transactions. Returns what it did; `complete` false means the
   * budget ran out and the next pass goes on from where this one stopped.
   */
  async pass(budget = 10_000): Promise<LifecycleOutcome> {
    const out: LifecycleOutcome = { expired: 0, noncurrentDeleted: 0, markersRemoved: 0, uploadsAborted: 0, keys: 0, complete: false }
    const { repo } = this.deps
    for (;;) {
      const resume = this.resume
      const bucket = resume ? repo.bucket(resume.workspaceId) : repo.buckets(this.after, 1)[0]
      if (resume && !bucket) {
        // Deleted (or its configuration removed) since: on to the next one.
        this.resume = undefined
        this.after = resume.workspaceId
        continue
      }
      if (!bucket) {
        this.after = ''
        out.complete = true
        return out
      }
      const rules = compile(JSON.parse(bucket.document) as LifecycleConfiguration)
      if (!resume) await this.abortUploads(bucket.workspaceId, rules, out)
      const stoppedAt = await this.walkKeys(bucket.tenantId, bucket.workspaceId, rules, resume?.key ?? '', out, budget)
      if (stoppedAt !== undefined) {
        this.resume = { workspaceId: bucket.workspaceId, key: stoppedAt }
        return out
      }
      this.resume = undefined
      this.after = bucket.workspaceId
    }
  }

  /** Walks the bucket's keys after `after`; the last key judged when the budget ran out first, else undefined. */
  private async walkKeys(
    tenantId: string,
    workspaceId: string,
    rules: Compiled[],
    after: string,
    out: LifecycleOutcome,
    budget: number,
  ): Promise<string | undefined> {
    const { repo, reserve } = this.deps
    const keyed = rules.filter((c) => c.rule.expiration || c.rule.noncurrentExpiration)
    if (keyed.length === 0) return undefined
    // No rule looks below its prefix: the walk starts at the smallest one.
    const from = keyed.map((c) => c.selection.prefix).reduce((a, b) => (a < b ? a : b))
    for (;;) {
      if (out.keys >= budget) return after
      const keys = repo.keys(workspaceId, after, from, Math.min(KEYS_PER_TRANSACTION, budget - out.keys))
      if (keys.length === 0) return undefined
      // Counted from the run that committed: a transaction may run again (PostgreSQL's engine after
      // a serialization failure, #30; the disk reserve after a full disk), each run from scratch.
      const removed = reserve.freeing(() =>
        this.engine.transaction(() => {
          const now = this.deps.clock.now()
          const counts: Removed = { expired: 0, noncurrentDeleted: 0, markersRemoved: 0 }
          for (const key of keys) this.judge(tenantId, workspaceId, key, keyed, now, counts)
          return counts
        }),
      )
      out.expired += removed.expired
      out.noncurrentDeleted += removed.noncurrentDeleted
      out.markersRemoved += removed.markersRemoved
      out.keys += keys.length
      after = keys[keys.length - 1]!
      await new Promise((r) => setImmediate(r))
    }
  }

  /** Inside the batch's transaction: applies the rules to one key's versions. */
  private judge(tenantId: string, workspaceId: string, key: string, rules: Compiled[], now: number, out: Removed): void {
    const { repo, versions, dayMs } = this.deps
    const applicable = rules.filter((c) => key.startsWith(c.selection.prefix))
    if (applicable.length === 0) return
    let all = repo.versions(workspaceId, key, now)

    // Noncurrent versions first: a delete marker they leave alone may then go in the same pass.
    const noncurrent = all.filter((v) => v.noncurrentAt !== null)
    const doomed = new Set<string>()
    for (const { rule, selection } of applicable) {
      const n = rule.noncurrentExpiration
      if (!n) continue
      // The newest `newerNoncurrentVersions` noncurrent versions are kept whatever their age (AWS).
      noncurrent.forEach((v, i) => {
        if (i < (n.newerNoncurrentVersions ?? 0) || !v.expirable) return
        if (!selects(selection, key, v.fileId === null ? undefined : v.size, v.info)) return
        if (expiryAt(v.noncurrentAt!, n.noncurrentDays, dayMs) <= now) doomed.add(v.versionId)
      })
    }
    for (const versionId of doomed) {
      versions.deleteVersion(workspaceId, key, versionId)
      out.noncurrentDeleted++
    }
    if (doomed.size > 0) all = all.filter((v) => !doomed.has(v.versionId))

    const current = all[0]
    if (!current || current.noncurrentAt !== null || !current.expirable) return
    if (current.fileId === null) {
      // An expired object delete marker: the key's only version left. ExpiredObjectDeleteMarker
      // removes it at once; an Expiration in Days once it is that old (AWS, and RGW's
      // test_lifecycle_deletemarker_expiration_with_days_tag).
      if (all.length !== 1) return
      const removes = applicable.some(({ rule, selection }) => {
        const e = rule.expiration
        if (!e || !selects(selection, key, undefined, null)) return false
        return e.expiredObjectDeleteMarker === true || (e.days !== undefined && expiryAt(current.createdAt, e.days, dayMs) <= now)
      })
      if (removes) {
        versions.deleteVersion(workspaceId, key, current.versionId)
        out.markersRemoved++
      }
      return
    }
    const expires = applicable.some(({ rule, selection }) => {
      const e = rule.expiration
      if (!e || !selects(selection, key, current.size, current.info)) return false
      if (e.days !== undefined) return expiryAt(current.createdAt, e.days, dayMs) <= now
      return e.date !== undefined && Date.parse(e.date) <= now
    })
    if (expires) {
      versions.deleteCurrent(tenantId, workspaceId, key, now)
      out.expired++
    }
  }

  /** AbortIncompleteMultipartUpload: uploads under a rule's prefix initiated more than its days ago. */
  private async abortUploads(workspaceId: string, rules: Compiled[], out: LifecycleOutcome): Promise<void> {
    const { repo, reserve, clock, dayMs } = this.deps
    for (const { rule, selection } of rules) {
      const a = rule.abortIncompleteMultipartUpload
      if (!a) continue
      for (;;) {
        const uploads = repo.uploadsInitiatedBefore(workspaceId, selection.prefix, clock.now() - a.daysAfterInitiation * dayMs, UPLOADS_PER_TRANSACTION)
        if (uploads.length === 0) break
        reserve.freeing(() => this.engine.transaction(() => uploads.forEach((u) => this.deps.abortUpload(u.id))))
        out.uploadsAborted += uploads.length
        await new Promise((r) => setImmediate(r))
      }
    }
  }
}

/** The enabled rules, with what each selects. */
function compile(config: LifecycleConfiguration): Compiled[] {
  return config.rules.filter((r) => r.status === 'Enabled').map((rule) => ({ rule, selection: selectionOf(rule) }))
}
