import type { DB } from '../database'
import { engineOf, type Engine } from '../engine'

export interface S3CredentialRow {
  accessKeyId: string
  tenantId: string
  /** AES-256-GCM: 12-byte IV, 16-byte tag, ciphertext. */
  secretSealed: Buffer
  createdAt: number
}

interface Row {
  access_key_id: string
  tenant_id: string
  secret_sealed: Buffer
  created_at: number
}

const toRow = (r: Row): S3CredentialRow => ({ accessKeyId: r.access_key_id, tenantId: r.tenant_id, secretSealed: r.secret_sealed, createdAt: r.created_at })

/** SQL for the s3_credentials table; no rules here. */
export class S3CredentialsRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      get: db.prepare<[string], Row>('SELECT * FROM s3_credentials WHERE access_key_id = ?'),
      byTenant: db.prepare<[string], Row>('SELECT * FROM s3_credentials WHERE tenant_id = ? ORDER BY created_at, access_key_id'),
      insert: db.prepare('INSERT INTO s3_credentials (access_key_id, tenant_id, secret_sealed, created_at) VALUES (?, ?, ?, ?)'),
      delete: db.prepare('DELETE FROM s3_credentials WHERE access_key_id = ? AND tenant_id = ?'),
    }
  }

  get(accessKeyId: string): S3CredentialRow | undefined {
    const r = this.stmts.get.get(accessKeyId)
    return r && toRow(r)
  }

  listByTenant(tenantId: string): S3CredentialRow[] {
    return this.stmts.byTenant.all(tenantId).map(toRow)
  }

  insert(c: S3CredentialRow): void {
    this.stmts.insert.run(c.accessKeyId, c.tenantId, c.secretSealed, c.createdAt)
  }

  delete(tenantId: string, accessKeyId: string): boolean {
    return this.stmts.delete.run(accessKeyId, tenantId).changes === 1
  }
}
