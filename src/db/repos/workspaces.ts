import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'
import { noteBucketWrite } from '../bucket-changes'

/** A workspace row. Times are epoch milliseconds. */
export interface Workspace {
  id: string
  tenantId: string
  name: string
  slug: string
  quotaBytes: number | null
  usedBytes: number
  metadata: Record<string, unknown> | null
  /** Notified of every upload completed into the workspace and every deletion from it. */
  webhookUrl: string | null
  createdAt: number
  updatedAt: number
}

interface Row {
  id: string
  tenant_id: string
  name: string
  slug: string
  quota_bytes: number | null
  used_bytes: number
  metadata: string | null
  webhook_url: string | null
  created_at: number
  updated_at: number
}

const toWorkspace = (r: Row): Workspace => ({
  id: r.id,
  tenantId: r.tenant_id,
  name: r.name,
  slug: r.slug,
  quotaBytes: r.quota_bytes,
  usedBytes: r.used_bytes,
  metadata: r.metadata === null ? null : (JSON.parse(r.metadata) as Record<string, unknown>),
  webhookUrl: r.webhook_url,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
})

const COLUMNS = 'id, tenant_id, name, slug, quota_bytes, used_bytes, metadata, webhook_url, created_at, updated_at'

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // A quota check's read of the workspace: locked on PostgreSQL until the transaction ends, as
  // the tenant's (TenantsRepo, SQL.forCharge; #30).
  liveForCharge: {
    sqlite: `SELECT ${COLUMNS} FROM workspaces WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL`,
    postgres: `SELECT ${COLUMNS} FROM workspaces WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL FOR NO KEY UPDATE`,
  },
}

/** SQL for the workspaces table; no rules here. Deleted workspaces keep their row (files point at it). */
export class WorkspacesRepo {
  private readonly stmts
  private readonly db: Engine

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.db = db
    this.stmts = {
      getLive: db.prepare<[string, string], Row>(`SELECT ${COLUMNS} FROM workspaces WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL`),
      liveForCharge: db.prepare<[string, string], Row>(dialect(db, SQL.liveForCharge)),
      bySlug: db.prepare<[string, string], Row>(`SELECT ${COLUMNS} FROM workspaces WHERE tenant_id = ? AND slug = ? AND deleted_at IS NULL`),
      bySlugAnyTenant: db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM workspaces WHERE slug = ? AND deleted_at IS NULL LIMIT 2`),
      list: db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM workspaces WHERE tenant_id = ? AND deleted_at IS NULL ORDER BY created_at, id`),
      insert: db.prepare(
        `INSERT INTO workspaces (id, tenant_id, name, slug, quota_bytes, metadata, webhook_url, created_at, updated_at)
         VALUES (@id, @tenantId, @name, @slug, @quotaBytes, @metadata, @webhookUrl, @now, @now)`,
      ),
      update: db.prepare(
        `UPDATE workspaces SET name = @name, quota_bytes = @quotaBytes, metadata = @metadata, webhook_url = @webhookUrl, updated_at = @now
         WHERE id = @id AND tenant_id = @tenantId AND deleted_at IS NULL`,
      ),
      softDeleteAllOfTenant: db.prepare('UPDATE workspaces SET deleted_at = @now WHERE tenant_id = @tenantId AND deleted_at IS NULL'),
      softDelete: db.prepare('UPDATE workspaces SET deleted_at = @now WHERE id = @id AND tenant_id = @tenantId AND deleted_at IS NULL'),
    }
  }

  /** A workspace of this tenant that is not deleted. */
  getLive(tenantId: string, id: string): Workspace | undefined {
    const r = this.stmts.getLive.get(id, tenantId)
    return r && toWorkspace(r)
  }

  /** The workspace as `getLive` reads it, for a quota check that then charges it: locked on PostgreSQL until the transaction ends. */
  getLiveForCharge(tenantId: string, id: string): Workspace | undefined {
    const r = this.stmts.liveForCharge.get(id, tenantId)
    return r && toWorkspace(r)
  }

  getBySlug(tenantId: string, slug: string): Workspace | undefined {
    const r = this.stmts.bySlug.get(tenantId, slug)
    return r && toWorkspace(r)
  }

  /** Up to two live workspaces of any tenant with this slug: one is the only one, two means several. */
  bySlugAnyTenant(slug: string): Workspace[] {
    return this.stmts.bySlugAnyTenant.all(slug).map(toWorkspace)
  }

  list(tenantId: string): Workspace[] {
    return this.stmts.list.all(tenantId).map(toWorkspace)
  }

  insert(w: {
    id: string
    tenantId: string
    name: string
    slug: string
    quotaBytes: number | null
    metadata: Record<string, unknown> | null
    webhookUrl: string | null
    now: number
  }): void {
    noteBucketWrite(this.db)
    this.stmts.insert.run({ ...w, metadata: w.metadata === null ? null : JSON.stringify(w.metadata) })
  }

  update(w: {
    id: string
    tenantId: string
    name: string
    quotaBytes: number | null
    metadata: Record<string, unknown> | null
    webhookUrl: string | null
    now: number
  }): boolean {
    noteBucketWrite(this.db)
    return this.stmts.update.run({ ...w, metadata: w.metadata === null ? null : JSON.stringify(w.metadata) }).changes === 1
  }

  /** Marks the workspace deleted (its slug becomes reusable); its files are the files repo's. */
  softDelete(tenantId: string, id: string, now: number): boolean {
    noteBucketWrite(this.db)
    return this.stmts.softDelete.run({ id, tenantId, now }).changes === 1
  }

  /** Soft-deletes every live workspace of a tenant (its files are deleted apart). */
  softDeleteAllOfTenant(tenantId: string, now: number): number {
    noteBucketWrite(this.db)
    return this.stmts.softDeleteAllOfTenant.run({ tenantId, now }).changes
  }
}
