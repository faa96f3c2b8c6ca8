import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { Clock } from '../lib/clock'
import type { LockMode, LockedVersion, ObjectLocksRepo, VersionLock } from '../db/repos/object-locks'
import type { VersionsRepo } from '../db/repos/versions'
import type { BucketConfigsService } from './bucket-configs'
import { AppError } from '../errors'
import { noteBucketWrite } from '../db/bucket-changes'
import { MAX_RETAIN_UNTIL } from '../lib/retain-until'

export const OBJECT_LOCK_FAMILY = 'object-lock'
const DAY_MS = 86_400_000

/** AWS's bounds of a default retention: 100 years, or 36,500 days. */
export const MAX_DEFAULT_RETENTION = { days: 36_500, years: 100 } as const

/** A bucket's object lock configuration (PutObjectLockConfiguration), stored as family 'object-lock'. */
export interface ObjectLockConfig {
  enabled: true
  rule?: { mode: LockMode; days?: number; years?: number }
}

/** Why a lock refuses something: the S3 front maps `code` to its own error. */
export class LockRefusal extends Error {
  constructor(
    readonly code: 'InvalidBucketState' | 'InvalidRequest' | 'AccessDenied' | 'NoSuchVersion',
    message: string,
  ) {
    super(message)
  }
}

/**
 * S3 object lock (#25) for both fronts: a bucket's lock configuration, and each VERSION's retention
 * and legal hold. A version is locked while its retain-until date is ahead of the SERVER clock or
 * its legal hold is ON; a locked version's row never goes (so neither does its file nor its blob:
 * the collector only purges files no version row references).
 */
export class ObjectLock {
  private readonly engine: Engine

  constructor(private readonly deps: { db: DB | Engine; clock: Clock; locks: ObjectLocksRepo; versions: VersionsRepo; configs: BucketConfigsService }) {
    this.engine = engineOf(deps.db)
  }

  config(workspaceId: string): ObjectLockConfig | undefined {
    return this.deps.configs.get<ObjectLockConfig>(workspaceId, OBJECT_LOCK_FAMILY)
  }

  enabled(workspaceId: string): boolean {
    return this.config(workspaceId)?.enabled === true
  }

  /** CreateBucket with x-amz-bucket-object-lock-enabled: versioning Enabled for good, lock on. */
  enableOnNewBucket(workspaceId: string): void {
    const { db, versions, configs } = this.deps
    // The bucket state cache (services/bucket-cache.ts) reads it again (#29).
    noteBucketWrite(db)
    this.engine.transaction(() => {
      versions.setVersioning(workspaceId, 'Enabled')
      configs.put(workspaceId, OBJECT_LOCK_FAMILY, { enabled: true } satisfies ObjectLockConfig)
    })
  }

  /** PutObjectLockConfiguration: only on a bucket created with lock (AWS: InvalidBucketState otherwise). */
  putConfig(workspaceId: string, config: ObjectLockConfig): void {
    // A versioning-Enabled bucket may turn lock on afterwards (AWS since 2023; ceph/s3-tests'
    // put_obj_lock_enable_after_create); any other bucket first needs versioning.
    if (!this.enabled(workspaceId) && this.deps.versions.versioning(workspaceId) !== 'Enabled') {
      throw new LockRefusal('InvalidBucketState', 'Versioning must be Enabled on the bucket to apply an Object Lock configuration')
    }
    this.deps.configs.put(workspaceId, OBJECT_LOCK_FAMILY, config)
  }

  /** The retention a new version gets: the request's, else the bucket's default rule, else none. */
  retentionFor(workspaceId: string, requested: { mode: LockMode; until: number } | undefined, now: number): { mode: LockMode; until: number } | undefined {
    const cfg = this.config(workspaceId)
    if (requested) {
      if (!cfg) throw new LockRefusal('InvalidRequest', 'Bucket is missing Object Lock Configuration')
      return requested
    }
    const rule = cfg?.rule
    if (!rule) return undefined
    // A rule stored before its bounds were checked may overflow the calendar: it locks as long as a date can say.
    const until = rule.days !== undefined ? now + rule.days * DAY_MS : addYears(now, rule.years!)
    return { mode: rule.mode, until: Number.isFinite(until) ? Math.min(until, MAX_RETAIN_UNTIL) : MAX_RETAIN_UNTIL }
  }

  /** In the write transaction that made the version: its initial lock (headers or bucket default). */
  applyToNew(
    workspaceId: string,
    key: string,
    versionId: string,
    retention: { mode: LockMode; until: number } | undefined,
    legalHold: boolean | undefined,
  ): void {
    if (retention) this.deps.locks.setRetention(workspaceId, key, versionId, retention.mode, retention.until)
    if (legalHold) this.deps.locks.setLegalHold(workspaceId, key, versionId, true)
  }

  get(workspaceId: string, key: string, versionId: string): VersionLock | undefined {
    return this.deps.locks.get(workspaceId, key, versionId)
  }

  /**
   * PutObjectRetention. COMPLIANCE can only be extended (never shortened, never removed, never
   * turned into GOVERNANCE) until it expires; shortening or removing GOVERNANCE needs the bypass.
   */
  putRetention(workspaceId: string, key: string, versionId: string, next: { mode: LockMode; until: number } | null, bypass: boolean): void {
    const { locks, clock } = this.deps
    if (!this.enabled(workspaceId)) throw new LockRefusal('InvalidRequest', 'Bucket is missing Object Lock Configuration')
    this.engine.transaction(() => {
      const cur = locks.get(workspaceId, key, versionId)
      if (!cur) throw new LockRefusal('NoSuchVersion', 'The specified version does not exist.')
      const now = clock.now()
      const active = cur.mode !== null && cur.until !== null && cur.until > now
      if (active) {
        // Any change of mode counts as weakening (ceph/s3-tests' changing_mode_from_governance_without_bypass).
        const weaker = next === null || next.until < cur.until! || next.mode !== cur.mode
        if (weaker && (cur.mode === 'COMPLIANCE' || !bypass)) throw new LockRefusal('AccessDenied', 'Access Denied because object protected by object lock.')
      }
      locks.setRetention(workspaceId, key, versionId, next?.mode ?? null, next?.until ?? null)
    })
  }

  putLegalHold(workspaceId: string, key: string, versionId: string, on: boolean): void {
    const { locks } = this.deps
    if (!this.enabled(workspaceId)) throw new LockRefusal('InvalidRequest', 'Bucket is missing Object Lock Configuration')
    this.engine.transaction(() => {
      if (!locks.get(workspaceId, key, versionId)) throw new LockRefusal('NoSuchVersion', 'The specified version does not exist.')
      locks.setLegalHold(workspaceId, key, versionId, on)
    })
  }

  /**
   * Inside the delete's transaction: refuses deleting a version for good while it is locked. A
   * GOVERNANCE retention yields to the bypass header (the owner tenant holds
   * s3:BypassGovernanceRetention); a COMPLIANCE one and a legal hold never do.
   */
  checkDeletable(workspaceId: string, key: string, versionId: string, bypass: boolean): void {
    const lock = this.deps.locks.get(workspaceId, key, versionId)
    if (!lock) return
    const now = this.deps.clock.now()
    if (lock.legalHold) throw new LockRefusal('AccessDenied', 'Access Denied because object protected by object lock.')
    if (lock.until !== null && lock.until > now && !(lock.mode === 'GOVERNANCE' && bypass)) {
      throw new LockRefusal('AccessDenied', 'Access Denied because object protected by object lock.')
    }
  }

  /** Inside a workspace's (bucket's) delete: refuses while any of its versions is locked, naming them. */
  checkWorkspaceDeletable(workspaceId: string): void {
    const locked = this.deps.locks.lockedInWorkspace(workspaceId, this.deps.clock.now())
    if (locked.length > 0) throw lockedError('The workspace holds object versions under retention or legal hold', locked)
  }

  /** Inside a tenant's delete: refuses while any of its versions is locked, naming them. */
  checkTenantDeletable(tenantId: string): void {
    const locked = this.deps.locks.lockedOfTenant(tenantId, this.deps.clock.now())
    if (locked.length > 0) throw lockedError('The tenant holds object versions under retention or legal hold', locked)
  }

  /** For lifecycle expiry: true when the file is a version locked now (it must not expire). */
  fileLocked(fileId: string): boolean {
    return this.deps.locks.fileLockedAt(fileId, this.deps.clock.now())
  }
}

function lockedError(what: string, locked: LockedVersion[]): AppError {
  const names = locked.map((v) => `${v.key} (version ${v.versionId})`)
  return new AppError('OBJECT_LOCKED', `${what}: ${names.join(', ')}${locked.length >= 10 ? ', …' : ''}`, { locked })
}

function addYears(ms: number, years: number): number {
  const d = new Date(ms)
  d.setUTCFullYear(d.getUTCFullYear() + years)
  return d.getTime()
}
