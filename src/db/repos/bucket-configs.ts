import type { DB } from '../database'
import { engineOf, type Engine } from '../engine'
import { noteBucketWrite } from '../bucket-changes'

/** SQL for bucket_configs: one JSON document per bucket (workspace) and configuration family. */
export class BucketConfigsRepo {
  private readonly stmts
  private readonly db: Engine

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.db = db
    this.stmts = {
      get: db.pluck<[string, string], string>('SELECT document FROM bucket_configs WHERE workspace_id = ? AND name = ?'),
      put: db.prepare(
        `INSERT INTO bucket_configs (workspace_id, name, document, updated_at) VALUES (@workspaceId, @name, @document, @now)
         ON CONFLICT (workspace_id, name) DO UPDATE SET document = excluded.document, updated_at = excluded.updated_at`,
      ),
      delete: db.prepare('DELETE FROM bucket_configs WHERE workspace_id = ? AND name = ?'),
      allOf: db.prepare<[string], { name: string; document: string }>('SELECT name, document FROM bucket_configs WHERE workspace_id = ?'),
      ofBucket: db.pluck<[string, string, string], string>(
        `SELECT c.document FROM bucket_configs c JOIN workspaces w ON w.id = c.workspace_id
           WHERE w.tenant_id = ? AND w.slug = ? AND w.deleted_at IS NULL AND c.name = ?`,
      ),
      byBucketName: db.pluck<[string, string], string>(
        `SELECT c.document FROM bucket_configs c JOIN workspaces w ON w.id = c.workspace_id
           WHERE w.slug = ? AND w.deleted_at IS NULL AND c.name = ?`,
      ),
    }
  }

  /** The document's JSON text, or undefined when the bucket has none of that family. */
  get(workspaceId: string, name: string): string | undefined {
    return this.stmts.get.get(workspaceId, name)
  }

  /** Every document of the bucket (JSON text) by family, in one read. */
  allOf(workspaceId: string): Map<string, string> {
    return new Map(this.stmts.allOf.all(workspaceId).map((r) => [r.name, r.document]))
  }

  put(workspaceId: string, name: string, document: string, now: number): void {
    noteBucketWrite(this.db)
    this.stmts.put.run({ workspaceId, name, document, now })
  }

  /** The document of a tenant's live bucket (workspace slug), in one read: no resolve first. */
  ofBucket(tenantId: string, slug: string, name: string): string | undefined {
    return this.stmts.ofBucket.get(tenantId, slug, name)
  }

  /** The documents of every tenant's live bucket of that name (bucket names are per tenant). */
  byBucketName(slug: string, name: string): string[] {
    return this.stmts.byBucketName.all(slug, name)
  }

  /** True when there was one to delete. */
  delete(workspaceId: string, name: string): boolean {
    noteBucketWrite(this.db)
    return this.stmts.delete.run(workspaceId, name).changes > 0
  }
}
