import type { DB } from '../database'
import { dialect, engineOf, type Engine, type Statement } from '../engine'

export type FileStatus = 'pending' | 'completed' | 'failed'

/** A file row. Times are epoch milliseconds. */
export interface FileRecord {
  id: string
  tenantId: string
  workspaceId: string | null
  originalName: string
  fileType: string
  status: FileStatus
  /** Declared size while pending, stored size once completed, 0 when failed (contract). */
  sizeBytes: number
  declaredSize: number | null
  sha256: string | null
  context: string
  tags: Record<string, string>
  metadata: Record<string, unknown> | null
  webhookUrl: string | null
  uploadExpiresAt: number
  createdAt: number
  completedAt: number | null
  deletedAt: number | null
  /** The S3 object key (files in a workspace have one; API uploads get `<id>/<originalName>`). */
  objectKey: string | null
}

interface Row {
  id: string
  tenant_id: string
  workspace_id: string | null
  original_name: string
  file_type: string
  status: FileStatus
  size_bytes: number
  declared_size: number | null
  sha256: string | null
  context: string
  tags: string
  metadata: string | null
  webhook_url: string | null
  upload_expires_at: number
  created_at: number
  completed_at: number | null
  deleted_at: number | null
  object_key: string | null
}

const toRecord = (r: Row): FileRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  workspaceId: r.workspace_id,
  originalName: r.original_name,
  fileType: r.file_type,
  status: r.status,
  sizeBytes: r.size_bytes,
  declaredSize: r.declared_size,
  sha256: r.sha256,
  context: r.context,
  tags: JSON.parse(r.tags) as Record<string, string>,
  metadata: r.metadata === null ? null : (JSON.parse(r.metadata) as Record<string, unknown>),
  webhookUrl: r.webhook_url,
  uploadExpiresAt: r.upload_expires_at,
  createdAt: r.created_at,
  completedAt: r.completed_at,
  deletedAt: r.deleted_at,
  objectKey: r.object_key,
})

export interface ListFilter {
  workspaceId?: string
  fileType?: string
  context?: string
}

export interface Cursor {
  createdAt: number
  id: string
}

/**
 * The soft-delete rule, for one row or a workspace's worth: the row stays for retention, a pending
 * upload becomes failed (its reservation released: size 0), and the usage triggers (migration 1)
 * release its bytes.
 */
const SOFT_DELETE_SET = `deleted_at = @now,
  size_bytes = CASE WHEN status = 'pending' THEN 0 ELSE size_bytes END,
  completed_at = CASE WHEN status = 'pending' THEN @now ELSE completed_at END,
  status = CASE WHEN status = 'pending' THEN 'failed' ELSE status END`

type CountParams = { tenantId: string; workspaceId: string | null; fileType: string | null; context: string | null }

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // sum() of a bigint is a numeric in PostgreSQL, which `pg` reads as a string: cast back. An
  // optional filter is a parameter only tested for NULL first, which PostgreSQL cannot type: cast.
  count: {
    sqlite: `SELECT coalesce(sum(n), 0) FROM file_counts
         WHERE tenant_id = @tenantId
           AND (@workspaceId IS NULL OR workspace_id = @workspaceId)
           AND (@fileType IS NULL OR file_type = @fileType)
           AND (@context IS NULL OR context = @context)`,
    postgres: `SELECT coalesce(sum(n), 0)::bigint FROM file_counts
         WHERE tenant_id = @tenantId
           AND (@workspaceId::text IS NULL OR workspace_id = @workspaceId)
           AND (@fileType::text IS NULL OR file_type = @fileType)
           AND (@context::text IS NULL OR context = @context)`,
  },
}

/** SQL for the files table; no rules here. */
export class FilesRepo {
  private readonly listStatements = new Map<string, Statement<[Record<string, unknown>], Row>>()
  private readonly stmts
  private readonly db: Engine

  constructor(database: DB | Engine) {
    const db = (this.db = engineOf(database))
    this.stmts = {
      insert: db.prepare(
        `INSERT INTO files (id, tenant_id, workspace_id, original_name, file_type, status, size_bytes, declared_size,
           context, tags, webhook_url, upload_expires_at, created_at, object_key)
         VALUES (@id, @tenantId, @workspaceId, @originalName, @fileType, 'pending', @sizeBytes, @declaredSize,
           @context, @tags, @webhookUrl, @uploadExpiresAt, @createdAt, @objectKey)`,
      ),
      get: db.prepare<[string], Row>('SELECT * FROM files WHERE id = ?'),
      getLive: db.prepare<[string, string], Row>('SELECT * FROM files WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL'),
      complete: db.prepare(
        `UPDATE files SET status = 'completed', size_bytes = ?, sha256 = ?, completed_at = ?
         WHERE id = ? AND status = 'pending' AND deleted_at IS NULL`,
      ),
      fail: db.prepare(`UPDATE files SET status = 'failed', size_bytes = 0, completed_at = ? WHERE id = ? AND status = 'pending'`),
      softDelete: db.prepare(`UPDATE files SET ${SOFT_DELETE_SET} WHERE id = @id AND tenant_id = @tenantId AND deleted_at IS NULL`),
      softDeleteInWorkspace: db.prepare(`UPDATE files SET ${SOFT_DELETE_SET} WHERE workspace_id = @workspaceId AND deleted_at IS NULL`),
      pendingInWorkspace: db.pluck<[string], string>(`SELECT id FROM files WHERE workspace_id = ? AND status = 'pending' AND deleted_at IS NULL`),
      softDeleteAllOfTenant: db.prepare(`UPDATE files SET ${SOFT_DELETE_SET} WHERE tenant_id = @tenantId AND deleted_at IS NULL`),
      expiredPending: db.prepare<[number, number], Row>(
        `SELECT * FROM files WHERE status = 'pending' AND deleted_at IS NULL AND upload_expires_at < ?
         ORDER BY upload_expires_at LIMIT ?`,
      ),
      purgeable: db.prepare<[number, number], { id: string; sha256: string | null }>(
        // A noncurrent object version keeps its soft-deleted file (migration 15) until the version goes.
        `SELECT id, sha256 FROM files WHERE deleted_at IS NOT NULL AND deleted_at < ?
           AND NOT EXISTS (SELECT 1 FROM object_versions v WHERE v.file_id = files.id)
         ORDER BY deleted_at LIMIT ?`,
      ),
      hardDelete: db.prepare(
        'DELETE FROM files WHERE id = ? AND deleted_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM object_versions v WHERE v.file_id = files.id)',
      ),
      // A noncurrent version made current again (services/versions.ts): live again, charged again.
      restore: db.prepare(`UPDATE files SET deleted_at = NULL WHERE id = ? AND deleted_at IS NOT NULL AND status = 'completed'`),
      redelete: db.prepare('UPDATE files SET deleted_at = ? WHERE id = ? AND deleted_at IS NOT NULL'),
      count: db.pluck<[CountParams], number>(dialect(db, SQL.count)),
    }
  }

  insertPending(f: {
    id: string
    tenantId: string
    workspaceId: string | null
    originalName: string
    fileType: string
    sizeBytes: number
    declaredSize: number | null
    context: string
    tags: Record<string, string>
    webhookUrl: string | null
    uploadExpiresAt: number
    createdAt: number
    objectKey: string | null
  }): void {
    this.stmts.insert.run({ ...f, tags: JSON.stringify(f.tags) })
  }

  /** Any row by id, whatever its tenant or state (token flows find the tenant this way). */
  get(id: string): FileRecord | undefined {
    const r = this.stmts.get.get(id)
    return r && toRecord(r)
  }

  /** A file of this tenant that is not deleted. */
  getLive(tenantId: string, id: string): FileRecord | undefined {
    const r = this.stmts.getLive.get(id, tenantId)
    return r && toRecord(r)
  }

  /** pending → completed; false when the row is no longer a live pending upload. */
  complete(id: string, sizeBytes: number, sha256: string, now: number): boolean {
    return this.stmts.complete.run(sizeBytes, sha256, now, id).changes === 1
  }

  /** pending → failed (releasing its reservation through the trigger); false when it was not pending. */
  fail(id: string, now: number): boolean {
    return this.stmts.fail.run(now, id).changes === 1
  }

  softDelete(tenantId: string, id: string, now: number): boolean {
    return this.stmts.softDelete.run({ tenantId, id, now }).changes === 1
  }

  /** Soft-deletes every live file of a workspace; call inside the transaction that deletes the workspace. */
  softDeleteInWorkspace(workspaceId: string, now: number): number {
    return this.stmts.softDeleteInWorkspace.run({ workspaceId, now }).changes
  }

  /** Ids of the uploads still pending in a workspace. */
  pendingInWorkspace(workspaceId: string): string[] {
    return this.stmts.pendingInWorkspace.all(workspaceId)
  }

  /** Soft-deletes every live file of a tenant (pending uploads become failed); returns how many. */
  softDeleteAllOfTenant(tenantId: string, now: number): number {
    return this.stmts.softDeleteAllOfTenant.run({ tenantId, now }).changes
  }

  expiredPending(before: number, limit: number): FileRecord[] {
    return this.stmts.expiredPending.all(before, limit).map(toRecord)
  }

  /** Files soft-deleted before `deletedBefore`, oldest first, with the blob each references. */
  purgeable(deletedBefore: number, limit: number): { id: string; sha256: string | null }[] {
    return this.stmts.purgeable.all(deletedBefore, limit)
  }

  hardDelete(id: string): boolean {
    return this.stmts.hardDelete.run(id).changes === 1
  }

  /** A completed, soft-deleted file becomes live again (a noncurrent object version made current); the triggers charge it again. */
  restore(id: string): boolean {
    return this.stmts.restore.run(id).changes === 1
  }

  /** A soft-deleted file's retention starts again at `now` (a noncurrent version deleted for good, services/versions.ts). */
  redelete(id: string, now: number): void {
    this.stmts.redelete.run(now, id)
  }

  /** Live files matching the filter, from the maintained counts (constant time in the file count). */
  count(tenantId: string, f: ListFilter): number {
    return this.stmts.count.get({ tenantId, workspaceId: f.workspaceId ?? null, fileType: f.fileType ?? null, context: f.context ?? null }) as number
  }

  /**
   * One page, newest first, strictly after `cursor`; keyset pagination over an index per filter.
   * Each combination of filters is its own statement, prepared once: the cache key has one letter
   * per condition present (w: workspace, t: file type, c: context, k: keyset cursor), so at most
   * 16 statements exist.
   */
  list(tenantId: string, f: ListFilter, cursor: Cursor | undefined, limit: number): FileRecord[] {
    const key = `${f.workspaceId ? 'w' : ''}${f.fileType ? 't' : ''}${f.context !== undefined ? 'c' : ''}${cursor ? 'k' : ''}`
    let stmt = this.listStatements.get(key)
    if (!stmt) {
      const where = ['tenant_id = @tenantId', 'deleted_at IS NULL']
      if (f.workspaceId) where.push('workspace_id = @workspaceId')
      if (f.fileType) where.push('file_type = @fileType')
      if (f.context !== undefined) where.push('context = @context')
      if (cursor) where.push('(created_at, id) < (@cursorCreatedAt, @cursorId)')
      stmt = this.db.prepare<[Record<string, unknown>], Row>(`SELECT * FROM files WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT @limit`)
      this.listStatements.set(key, stmt)
    }
    const params: Record<string, unknown> = { tenantId, limit }
    if (f.workspaceId) params.workspaceId = f.workspaceId
    if (f.fileType) params.fileType = f.fileType
    if (f.context !== undefined) params.context = f.context
    if (cursor) {
      params.cursorCreatedAt = cursor.createdAt
      params.cursorId = cursor.id
    }
    return stmt.all(params).map(toRecord)
  }
}
