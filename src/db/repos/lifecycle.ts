import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'
import type { ObjectInfo } from './objects'

/** A bucket with a lifecycle configuration, as the lifecycle pass walks them. */
export interface LifecycleBucket {
  workspaceId: string
  tenantId: string
  /** The configuration's JSON (services/lifecycle-rules.ts LifecycleConfiguration). */
  document: string
}

/** One version of a key as the lifecycle pass judges it. */
export interface LifecycleVersion {
  versionId: string
  seq: number
  fileId: string | null
  size: number
  createdAt: number
  noncurrentAt: number | null
  info: ObjectInfo | null
  /** False when something forbids expiring it (see EXPIRABLE). */
  expirable: boolean
}

/**
 * An SQL predicate on a version row `v` that is true when lifecycle may remove it: a version under
 * retention (its retain-until date ahead of the server clock, `@now`) or a legal hold is never
 * expired ("A locked version cannot be deleted … by lifecycle rules", #25; migration 20's columns).
 */
export const EXPIRABLE = 'v.legal_hold = 0 AND (v.lock_until IS NULL OR v.lock_until <= @now)'

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // A comparison is a boolean in PostgreSQL, which `pg` reads as true or false: cast to the 0 or 1 SQLite gives.
  versions: {
    sqlite: `SELECT v.version_id, v.seq, v.file_id, v.size_bytes, v.created_at, v.noncurrent_at, f.object_info, (${EXPIRABLE}) AS expirable
         FROM object_versions v LEFT JOIN files f ON f.id = v.file_id
         WHERE v.workspace_id = @workspaceId AND v.object_key = @key ORDER BY v.seq DESC`,
    postgres: `SELECT v.version_id, v.seq, v.file_id, v.size_bytes, v.created_at, v.noncurrent_at, f.object_info, (${EXPIRABLE})::integer AS expirable
         FROM object_versions v LEFT JOIN files f ON f.id = v.file_id
         WHERE v.workspace_id = @workspaceId AND v.object_key = @key ORDER BY v.seq DESC`,
  },
}

/** SQL the lifecycle pass (services/lifecycle.ts) reads; its writes go through the versions and multipart services. */
export class LifecycleRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      buckets: db.prepare<[string, number], { workspace_id: string; tenant_id: string; document: string }>(
        `SELECT c.workspace_id, w.tenant_id, c.document FROM bucket_configs c JOIN workspaces w ON w.id = c.workspace_id
         WHERE c.name = 'lifecycle' AND w.deleted_at IS NULL AND c.workspace_id > ? ORDER BY c.workspace_id LIMIT ?`,
      ),
      bucket: db.prepare<[string], { workspace_id: string; tenant_id: string; document: string }>(
        `SELECT c.workspace_id, w.tenant_id, c.document FROM bucket_configs c JOIN workspaces w ON w.id = c.workspace_id
         WHERE c.name = 'lifecycle' AND w.deleted_at IS NULL AND c.workspace_id = ?`,
      ),
      // Keys in binary order from the keyset cursor, at or after the smallest prefix of the rules.
      keys: db.pluck<[{ workspaceId: string; after: string; from: string; limit: number }], string>(
        `SELECT DISTINCT object_key FROM object_versions
           WHERE workspace_id = @workspaceId AND object_key > @after AND object_key >= @from ORDER BY object_key LIMIT @limit`,
      ),
      versions: db.prepare<
        [{ workspaceId: string; key: string; now: number }],
        {
          version_id: string
          seq: number
          file_id: string | null
          size_bytes: number
          created_at: number
          noncurrent_at: number | null
          object_info: string | null
          expirable: number
        }
      >(dialect(db, SQL.versions)),
      uploads: db.prepare<[{ workspaceId: string; prefix: string; before: number; limit: number }], { id: string; object_key: string }>(
        `SELECT id, object_key FROM s3_uploads WHERE workspace_id = @workspaceId AND created_at <= @before
           AND substr(object_key, 1, length(@prefix)) = @prefix ORDER BY created_at LIMIT @limit`,
      ),
    }
  }

  /** Up to `limit` buckets with a lifecycle configuration, after the workspace id `after`. */
  buckets(after: string, limit: number): LifecycleBucket[] {
    return this.stmts.buckets.all(after, limit).map((r) => ({ workspaceId: r.workspace_id, tenantId: r.tenant_id, document: r.document }))
  }

  /** The bucket, while it exists and has a lifecycle configuration. */
  bucket(workspaceId: string): LifecycleBucket | undefined {
    const r = this.stmts.bucket.get(workspaceId)
    return r && { workspaceId: r.workspace_id, tenantId: r.tenant_id, document: r.document }
  }

  /** Up to `limit` keys of the bucket after `after` (and at or after `from`). */
  keys(workspaceId: string, after: string, from: string, limit: number): string[] {
    return this.stmts.keys.all({ workspaceId, after, from, limit })
  }

  /** Every version of the key, newest first, and whether each may be expired at `now`. */
  versions(workspaceId: string, key: string, now: number): LifecycleVersion[] {
    return this.stmts.versions.all({ workspaceId, key, now }).map((r) => ({
      versionId: r.version_id,
      seq: r.seq,
      fileId: r.file_id,
      size: r.size_bytes,
      createdAt: r.created_at,
      noncurrentAt: r.noncurrent_at,
      info: r.object_info === null ? null : (JSON.parse(r.object_info) as ObjectInfo),
      expirable: r.expirable === 1,
    }))
  }

  /** Multipart uploads of the bucket under `prefix` initiated at or before `before`, oldest first. */
  uploadsInitiatedBefore(workspaceId: string, prefix: string, before: number, limit: number): { id: string; key: string }[] {
    return this.stmts.uploads.all({ workspaceId, prefix, before, limit }).map((r) => ({ id: r.id, key: r.object_key }))
  }
}
