import type { DB } from '../database'
import { engineOf, type Engine } from '../engine'

export type LockMode = 'GOVERNANCE' | 'COMPLIANCE'

/** A version's object lock state (migration 18): its retention, if any, and its legal hold. */
export interface VersionLock {
  mode: LockMode | null
  /** Retain-until, epoch ms; null without a retention. */
  until: number | null
  legalHold: boolean
}

/** A version that cannot go now (for refusals that name them). */
export interface LockedVersion {
  workspaceId: string
  key: string
  versionId: string
}

interface LockRow {
  lock_mode: LockMode | null
  lock_until: number | null
  legal_hold: number
}

/** SQL for versions' retention and legal hold; the rules are services/object-lock.ts's. */
export class ObjectLocksRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    // "Locked at now": a legal hold, or a retain-until date still ahead of the server clock.
    const LOCKED = '(legal_hold = 1 OR (lock_until IS NOT NULL AND lock_until > @now))'
    this.stmts = {
      get: db.prepare<[string, string, string], LockRow>(
        'SELECT lock_mode, lock_until, legal_hold FROM object_versions WHERE workspace_id = ? AND object_key = ? AND version_id = ?',
      ),
      ofFile: db.prepare<[string], LockRow>('SELECT lock_mode, lock_until, legal_hold FROM object_versions WHERE file_id = ?'),
      setRetention: db.prepare('UPDATE object_versions SET lock_mode = ?, lock_until = ? WHERE workspace_id = ? AND object_key = ? AND version_id = ?'),
      setLegalHold: db.prepare('UPDATE object_versions SET legal_hold = ? WHERE workspace_id = ? AND object_key = ? AND version_id = ?'),
      inWorkspace: db.prepare<[{ workspaceId: string; now: number; limit: number }], { object_key: string; version_id: string }>(
        `SELECT object_key, version_id FROM object_versions WHERE workspace_id = @workspaceId AND ${LOCKED} ORDER BY object_key LIMIT @limit`,
      ),
      ofTenant: db.prepare<[{ tenantId: string; now: number; limit: number }], { workspace_id: string; object_key: string; version_id: string }>(
        `SELECT workspace_id, object_key, version_id FROM object_versions WHERE tenant_id = @tenantId AND ${LOCKED} ORDER BY workspace_id, object_key LIMIT @limit`,
      ),
      fileLocked: db.pluck<[{ fileId: string; now: number }], number>(`SELECT 1 FROM object_versions WHERE file_id = @fileId AND ${LOCKED}`),
    }
  }

  get(workspaceId: string, key: string, versionId: string): VersionLock | undefined {
    const r = this.stmts.get.get(workspaceId, key, versionId)
    return r && { mode: r.lock_mode, until: r.lock_until, legalHold: r.legal_hold === 1 }
  }

  ofFile(fileId: string): VersionLock | undefined {
    const r = this.stmts.ofFile.get(fileId)
    return r && { mode: r.lock_mode, until: r.lock_until, legalHold: r.legal_hold === 1 }
  }

  setRetention(workspaceId: string, key: string, versionId: string, mode: LockMode | null, until: number | null): void {
    this.stmts.setRetention.run(mode, until, workspaceId, key, versionId)
  }

  setLegalHold(workspaceId: string, key: string, versionId: string, on: boolean): void {
    this.stmts.setLegalHold.run(on ? 1 : 0, workspaceId, key, versionId)
  }

  /** Versions of a workspace locked at `now` (up to `limit`), keys in order. */
  lockedInWorkspace(workspaceId: string, now: number, limit = 10): LockedVersion[] {
    return this.stmts.inWorkspace.all({ workspaceId, now, limit }).map((r) => ({ workspaceId, key: r.object_key, versionId: r.version_id }))
  }

  /** Versions of a tenant locked at `now` (up to `limit`). */
  lockedOfTenant(tenantId: string, now: number, limit = 10): LockedVersion[] {
    return this.stmts.ofTenant.all({ tenantId, now, limit }).map((r) => ({ workspaceId: r.workspace_id, key: r.object_key, versionId: r.version_id }))
  }

  /**
   * The predicate lifecycle expiry and the collector use: true when the file is a version locked
   * at `now` (its file, and so its blob, must stay).
   */
  fileLockedAt(fileId: string, now: number): boolean {
    return this.stmts.fileLocked.get({ fileId, now }) === 1
  }
}
