import type { DB } from '../database'

/** A workspace row. Times are epoch milliseconds. */
export interface Workspace {
  id: string
  tenantId: string
  name: string
  slug: string
  quotaBytes: number | null
  usedBytes: number
  metadata: Record<string, unknown> | null
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
  createdAt: r.created_at,
  updatedAt: r.updated_at,
})

/** SQL for the workspaces table; no rules here. */
export class WorkspacesRepo {
  private readonly stmts

  constructor(db: DB) {
    this.stmts = {
      getLive: db.prepare<[string, string], Row>('SELECT * FROM workspaces WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL'),
    }
  }

  /** A workspace of this tenant that is not deleted. */
  getLive(tenantId: string, id: string): Workspace | undefined {
    const r = this.stmts.getLive.get(id, tenantId)
    return r && toWorkspace(r)
  }
}
