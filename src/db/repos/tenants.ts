import type { DB } from '../database'
import { nameKey } from '../../lib/text'

/** A tenant as the services see it. Times are epoch milliseconds. */
export interface Tenant {
  id: string
  name: string
  quotaBytes: number
  usedBytes: number
  allowedFileTypes: string[]
  webhookSecret: string
  /** `test` for tenants made by ephemeral mode: their keys read `sk_test_…`. */
  keyKind: 'live' | 'test'
  createdAt: number
}

/**
 * What a request knows about its tenant (`request.tenant`): everything but the usage, which
 * changes with every upload; read that with TenantsService.quota().
 */
export type AuthenticatedTenant = Omit<Tenant, 'usedBytes'>

interface Row {
  id: string
  name: string
  quota_bytes: number
  used_bytes: number
  allowed_types: string
  webhook_secret: string
  key_kind: 'live' | 'test'
  created_at: number
}

const toTenant = (r: Row): Tenant => ({
  id: r.id,
  name: r.name,
  quotaBytes: r.quota_bytes,
  usedBytes: r.used_bytes,
  allowedFileTypes: JSON.parse(r.allowed_types) as string[],
  webhookSecret: r.webhook_secret,
  keyKind: r.key_kind,
  createdAt: r.created_at,
})

const COLUMNS = 'id, name, quota_bytes, used_bytes, allowed_types, webhook_secret, key_kind, created_at'

/** SQL for the tenants table; no rules here. */
export class TenantsRepo {
  private readonly byId
  private readonly byKeyHash
  private readonly byName
  private readonly all
  private readonly insertStmt
  private readonly rotateStmt
  private readonly generationStmt
  private readonly dataVersionStmt

  constructor(db: DB) {
    this.byId = db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM tenants WHERE id = ?`)
    this.byKeyHash = db.prepare<[Buffer], Row & { key_hash: Buffer }>(`SELECT ${COLUMNS}, key_hash FROM tenants WHERE key_hash = ?`)
    this.byName = db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM tenants WHERE name_key = ?`)
    this.all = db.prepare<[], Row>(`SELECT ${COLUMNS} FROM tenants ORDER BY created_at, id`)
    this.insertStmt = db.prepare(
      `INSERT INTO tenants (id, name, name_key, key_hash, key_kind, webhook_secret, quota_bytes, allowed_types, created_at)
       VALUES (@id, @name, @nameKey, @keyHash, @keyKind, @webhookSecret, @quotaBytes, @allowedTypes, @createdAt)`,
    )
    this.rotateStmt = db.prepare('UPDATE tenants SET key_hash = ?, webhook_secret = ?, signing_generation = signing_generation + 1 WHERE id = ?')
    this.generationStmt = db.prepare<[string], number>('SELECT signing_generation FROM tenants WHERE id = ?').pluck()
    this.dataVersionStmt = db.prepare<[], number>('PRAGMA data_version').pluck()
  }

  /**
   * The generation that URL-signing keys of this tenant are derived from (lib/tokens.ts), or
   * undefined when the tenant does not exist: then no token of it verifies.
   */
  signingGeneration(id: string): number | undefined {
    return this.generationStmt.get(id)
  }

  /**
   * SQLite's `data_version`: changes when another connection (the CLI) commits to the database,
   * not on this connection's own commits. The authentication cache keys on it.
   */
  dataVersion(): number {
    return this.dataVersionStmt.get() as number
  }

  get(id: string): Tenant | undefined {
    const r = this.byId.get(id)
    return r && toTenant(r)
  }

  /** The tenant whose key hashes to `keyHash`, with the stored hash for a constant-time re-check. */
  getByKeyHash(keyHash: Buffer): { tenant: Tenant; keyHash: Buffer } | undefined {
    const r = this.byKeyHash.get(keyHash)
    return r && { tenant: toTenant(r), keyHash: r.key_hash }
  }

  /** The tenant whose name is the same as `name` once both are case-folded and NFC-normalised (nameKey). */
  getByName(name: string): Tenant | undefined {
    const r = this.byName.get(nameKey(name))
    return r && toTenant(r)
  }

  list(): Tenant[] {
    return this.all.all().map(toTenant)
  }

  insert(t: {
    id: string
    name: string
    keyHash: Buffer
    keyKind: 'live' | 'test'
    webhookSecret: string
    quotaBytes: number
    allowedFileTypes: string[]
    createdAt: number
  }): void {
    this.insertStmt.run({ ...t, nameKey: nameKey(t.name), allowedTypes: JSON.stringify(t.allowedFileTypes) })
  }

  /**
   * Replaces the key hash and webhook secret and bumps the signing generation (every URL signed
   * before stops verifying); returns false when the tenant does not exist.
   */
  rotate(id: string, keyHash: Buffer, webhookSecret: string): boolean {
    return this.rotateStmt.run(keyHash, webhookSecret, id).changes === 1
  }
}
