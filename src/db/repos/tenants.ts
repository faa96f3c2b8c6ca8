import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'
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
  /** Whether the tenant may create, list and revoke its own S3 credentials (#31; migration 22). */
  selfServiceS3Credentials: boolean
  createdAt: number
}

/**
 * What a request knows about its tenant (`request.tenant`): everything but the usage, which
 * changes with every upload (read that with TenantsService.quota()), and the self-service
 * setting, which the routes it governs read from the row itself (authenticationView).
 */
export type AuthenticatedTenant = Omit<Tenant, 'usedBytes' | 'selfServiceS3Credentials'>

/** A tenant as authentication caches it: without its usage and the settings read afresh. */
export function authenticationView(t: Tenant): AuthenticatedTenant {
  const { usedBytes: _used, selfServiceS3Credentials: _selfService, ...authenticated } = t
  return authenticated
}

interface Row {
  id: string
  name: string
  quota_bytes: number
  used_bytes: number
  allowed_types: string
  webhook_secret: string
  key_kind: 'live' | 'test'
  self_service_s3: number
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
  selfServiceS3Credentials: r.self_service_s3 === 1,
  createdAt: r.created_at,
})

const COLUMNS = 'id, name, quota_bytes, used_bytes, allowed_types, webhook_secret, key_kind, self_service_s3, created_at'

/** Where a page of tenants starts: strictly after this one, in listing order. */
export interface TenantCursor {
  createdAt: number
  id: string
}

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // sum() of a bigint is a numeric in PostgreSQL, which `pg` reads as a string: cast back.
  fileCount: {
    sqlite: 'SELECT coalesce(sum(n), 0) FROM file_counts WHERE tenant_id = ?',
    postgres: 'SELECT coalesce(sum(n), 0)::bigint FROM file_counts WHERE tenant_id = ?',
  },
  // A quota check's read of the tenant (forCharge): on PostgreSQL it locks the row until the
  // transaction ends, so that another node's check waits for this one's charge (#30). NO KEY
  // UPDATE is the lock the usage triggers' UPDATE takes anyway; it leaves foreign-key checks
  // (FOR KEY SHARE) of other writers free. SQLite's write transaction already excludes them all.
  forCharge: {
    sqlite: `SELECT ${COLUMNS} FROM tenants WHERE id = ? AND deleted_at IS NULL`,
    postgres: `SELECT ${COLUMNS} FROM tenants WHERE id = ? AND deleted_at IS NULL FOR NO KEY UPDATE`,
  },
  // What tells the authentication caches that another connection changed a key (dataVersion).
  dataVersion: { sqlite: 'PRAGMA data_version', postgres: 'SELECT version FROM auth_version WHERE id = 1' },
}

/** SQL for the tenants table; no rules here. Only live tenants are ever returned. */
export class TenantsRepo {
  private readonly stmts
  private readonly dialect: Engine['dialect']

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.dialect = db.dialect
    const live = 'deleted_at IS NULL'
    this.stmts = {
      byId: db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM tenants WHERE id = ? AND ${live}`),
      forCharge: db.prepare<[string], Row>(dialect(db, SQL.forCharge)),
      byKeyHash: db.prepare<[Buffer], Row & { key_hash: Buffer }>(`SELECT ${COLUMNS}, key_hash FROM tenants WHERE key_hash = ? AND ${live}`),
      // Deleted tenants give up their name (markDeleted), so a name is taken only by a live one.
      byName: db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM tenants WHERE name_key = ?`),
      all: db.prepare<[], Row>(`SELECT ${COLUMNS} FROM tenants WHERE ${live} ORDER BY created_at, id`),
      firstPage: db.prepare<[number], Row>(`SELECT ${COLUMNS} FROM tenants WHERE ${live} ORDER BY created_at DESC, id DESC LIMIT ?`),
      pageAfter: db.prepare<[number, string, number], Row>(
        `SELECT ${COLUMNS} FROM tenants WHERE ${live} AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`,
      ),
      // The admin overview's usage table (#31): a pass over the tenants rows keeping the top
      // `limit` (SQLite's sorter holds only those), never over files; no index on used_bytes,
      // which every upload's commit changes.
      topByUsage: db.prepare<[number], Row>(`SELECT ${COLUMNS} FROM tenants WHERE ${live} ORDER BY used_bytes DESC, id LIMIT ?`),
      liveCount: db.pluck<[], number>(`SELECT count(*) FROM tenants WHERE ${live}`),
      // file_counts is keyed by tenant first: an index range, whatever the number of files.
      fileCount: db.pluck<[string], number>(dialect(db, SQL.fileCount)),
      insert: db.prepare(
        `INSERT INTO tenants (id, name, name_key, key_hash, key_kind, webhook_secret, quota_bytes, allowed_types, self_service_s3, created_at)
         VALUES (@id, @name, @nameKey, @keyHash, @keyKind, @webhookSecret, @quotaBytes, @allowedTypes, @selfService, @createdAt)`,
      ),
      rotate: db.prepare(`UPDATE tenants SET key_hash = ?, webhook_secret = ?, signing_generation = signing_generation + 1 WHERE id = ? AND ${live}`),
      // A deleted tenant has no generation: none of its tokens verifies (#13).
      generation: db.pluck<[string], number>(`SELECT signing_generation FROM tenants WHERE id = ? AND ${live}`),
      update: db.prepare(
        `UPDATE tenants SET name = @name, name_key = @nameKey, quota_bytes = @quotaBytes, allowed_types = @allowedTypes, self_service_s3 = @selfService
         WHERE id = @id AND ${live}`,
      ),
      markDeleted: db.prepare(`UPDATE tenants SET deleted_at = @now, name = @name, name_key = @name, key_hash = @keyHash WHERE id = @id AND ${live}`),
      purgeable: db.pluck<[number], string>(
        `SELECT id FROM tenants t WHERE deleted_at IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM files f WHERE f.tenant_id = t.id AND f.deleted_at IS NULL)
           AND NOT EXISTS (SELECT 1 FROM files f WHERE f.tenant_id = t.id AND f.deleted_at IS NOT NULL)
         LIMIT ?`,
      ),
      dropS3Parts: db.prepare('DELETE FROM s3_parts WHERE upload_id IN (SELECT id FROM s3_uploads WHERE tenant_id = ?)'),
      dropS3Uploads: db.prepare('DELETE FROM s3_uploads WHERE tenant_id = ?'),
      dropS3Credentials: db.prepare('DELETE FROM s3_credentials WHERE tenant_id = ?'),
      purgeWorkspaces: db.prepare('DELETE FROM workspaces WHERE tenant_id = ?'),
      purgeOutbox: db.prepare('DELETE FROM outbox WHERE tenant_id = ?'),
      purgeCounts: db.prepare('DELETE FROM file_counts WHERE tenant_id = ?'),
      purge: db.prepare('DELETE FROM tenants WHERE id = ? AND deleted_at IS NOT NULL'),
      dataVersion: db.pluck<[], number>(dialect(db, SQL.dataVersion)),
    }
  }

  /**
   * The generation that URL-signing keys of this tenant are derived from (lib/tokens.ts), or
   * undefined when the tenant does not exist: then no token of it verifies.
   */
  signingGeneration(id: string): number | undefined {
    return this.stmts.generation.get(id)
  }

  /**
   * SQLite's `data_version`: changes when another connection (the CLI) commits to the database,
   * not on this connection's own commits. On PostgreSQL, the auth_version row (PostgreSQL's
   * migration 20), bumped by any connection's change to a tenant's key, settings or existence or
   * to an S3 credential, own commits included. The authentication caches key on it.
   */
  dataVersion(): number {
    return this.stmts.dataVersion.get() as number
  }

  get(id: string): Tenant | undefined {
    const r = this.stmts.byId.get(id)
    return r && toTenant(r)
  }

  /**
   * The tenant as `get` reads it, for a quota check inside the write transaction that then
   * charges it: on PostgreSQL its row stays locked until that transaction ends (SQL.forCharge).
   */
  getForCharge(id: string): Tenant | undefined {
    const r = this.stmts.forCharge.get(id)
    return r && toTenant(r)
  }

  /** The tenant whose key hashes to `keyHash`, with the stored hash for a constant-time re-check. */
  getByKeyHash(keyHash: Buffer): { tenant: Tenant; keyHash: Buffer } | undefined {
    const r = this.stmts.byKeyHash.get(keyHash)
    return r && { tenant: toTenant(r), keyHash: r.key_hash }
  }

  /** The tenant whose name is the same as `name` once both are case-folded and NFC-normalised (nameKey). */
  getByName(name: string): Tenant | undefined {
    const r = this.stmts.byName.get(nameKey(name))
    return r && toTenant(r)
  }

  /** Every live tenant, oldest first. */
  list(): Tenant[] {
    return this.stmts.all.all().map(toTenant)
  }

  /** One page of live tenants, newest first, strictly after `cursor` (keyset, never OFFSET). */
  page(cursor: TenantCursor | undefined, limit: number): Tenant[] {
    const rows = cursor ? this.stmts.pageAfter.all(cursor.createdAt, cursor.id, limit) : this.stmts.firstPage.all(limit)
    return rows.map(toTenant)
  }

  /** The `limit` live tenants using the most bytes, most first (ties by id). */
  topByUsage(limit: number): Tenant[] {
    return this.stmts.topByUsage.all(limit).map(toTenant)
  }

  /** How many live tenants there are. */
  liveCount(): number {
    return Number(this.stmts.liveCount.get())
  }

  /** Live files of the tenant (any processing status), from the maintained counts. */
  fileCount(id: string): number {
    return this.stmts.fileCount.get(id) as number
  }

  insert(t: {
    id: string
    name: string
    keyHash: Buffer
    keyKind: 'live' | 'test'
    webhookSecret: string
    quotaBytes: number
    allowedFileTypes: string[]
    /** Default true (migration 22's default). */
    selfServiceS3Credentials?: boolean
    createdAt: number
  }): void {
    const { selfServiceS3Credentials, ...row } = t
    this.stmts.insert.run({
      ...row,
      nameKey: nameKey(t.name),
      allowedTypes: JSON.stringify(t.allowedFileTypes),
      selfService: selfServiceS3Credentials === false ? 0 : 1,
    })
  }

  /**
   * Replaces the key hash and webhook secret and bumps the signing generation (every URL signed
   * before stops verifying); returns false when the tenant does not exist.
   */
  rotate(id: string, keyHash: Buffer, webhookSecret: string): boolean {
    return this.stmts.rotate.run(keyHash, webhookSecret, id).changes === 1
  }

  update(t: { id: string; name: string; quotaBytes: number; allowedFileTypes: string[]; selfServiceS3Credentials: boolean }): boolean {
    return (
      this.stmts.update.run({
        id: t.id,
        name: t.name,
        nameKey: nameKey(t.name),
        quotaBytes: t.quotaBytes,
        allowedTypes: JSON.stringify(t.allowedFileTypes),
        selfService: t.selfServiceS3Credentials ? 1 : 0,
      }).changes === 1
    )
  }

  /**
   * Marks a live tenant deleted. `name` (also its name key: a placeholder no live name can have)
   * and `keyHash` replace the real ones, so the name is free for a new tenant and no key can match
   * any more; the row stays until purge().
   */
  markDeleted(id: string, now: number, name: string, keyHash: Buffer): boolean {
    return this.stmts.markDeleted.run({ id, now, name, keyHash }).changes === 1
  }

  /**
   * The name (and name key) a deleted tenant's row takes, which no live tenant can have: names
   * never hold control characters. The id comes first, so two never collide (SQLite's NOCASE
   * collation stops comparing at a NUL). PostgreSQL's text cannot hold a NUL at all (SQLSTATE
   * 22021, #30): U+0001 there.
   */
  deletedName(id: string): string {
    return `${id}${this.dialect === 'postgres' ? '\u0001' : '\u0000'}deleted`
  }

  /** Deleted tenants none of whose files remain (all purged by the garbage collector). */
  purgeable(limit: number): string[] {
    return this.stmts.purgeable.all(limit)
  }

  /**
   * Removes a tenant's S3 credentials and its multipart uploads in progress (their parts release
   * their quota through the s3_parts triggers; the blobs they leave unreferenced are collected by
   * `coffer gc`). Call in the transaction that deletes the tenant.
   */
  dropS3(id: string): void {
    this.stmts.dropS3Parts.run(id)
    this.stmts.dropS3Uploads.run(id)
    this.stmts.dropS3Credentials.run(id)
  }

  /** Removes a deleted tenant's last rows: workspaces, webhook events, counts, the tenant. Call in a write transaction. */
  purge(id: string): boolean {
    this.dropS3(id)
    this.stmts.purgeWorkspaces.run(id)
    this.stmts.purgeOutbox.run(id)
    this.stmts.purgeCounts.run(id)
    return this.stmts.purge.run(id).changes === 1
  }
}
