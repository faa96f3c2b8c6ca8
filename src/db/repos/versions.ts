import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'
import type { ObjectInfo } from './objects'
import { createHash } from 'node:crypto'

/**
 * The first key of the two-key advisory locks on one object key (PostgreSQL): the first 4 bytes
 * of SHA-256('coffer:object-key') as a signed int4, apart from the content and hash lock classes.
 */
export const KEY_LOCK_CLASS = createHash('sha256').update('coffer:object-key').digest().readInt32BE(0)

/** A bucket's versioning state as S3 names it; `null` when it was never enabled (unversioned). */
export type VersioningStatus = 'Enabled' | 'Suspended' | null

/** One version of an object key (migration 15): content (fileId set) or a delete marker. */
export interface VersionRow {
  workspaceId: string
  key: string
  /** S3's versionId; `'null'` for the null version. */
  versionId: string
  /** Order among the key's versions, newest highest. */
  seq: number
  tenantId: string
  /** The files row holding the content; null for a delete marker. */
  fileId: string | null
  size: number
  createdAt: number
  /** When a newer version replaced it; null for the current version. */
  noncurrentAt: number | null
}

/** A version with what its file stores, as listings and reads of one version need it. */
export interface VersionedObject extends VersionRow {
  sha256: string | null
  info: ObjectInfo | null
  fileType: string | null
}

interface Row {
  workspace_id: string
  object_key: string
  version_id: string
  seq: number
  tenant_id: string
  file_id: string | null
  size_bytes: number
  created_at: number
  noncurrent_at: number | null
}

interface JoinedRow extends Row {
  sha256: string | null
  object_info: string | null
  file_type: string | null
}

const toVersion = (r: Row): VersionRow => ({
  workspaceId: r.workspace_id,
  key: r.object_key,
  versionId: r.version_id,
  seq: r.seq,
  tenantId: r.tenant_id,
  fileId: r.file_id,
  size: r.size_bytes,
  createdAt: r.created_at,
  noncurrentAt: r.noncurrent_at,
})

const toVersioned = (r: JoinedRow): VersionedObject => ({
  ...toVersion(r),
  sha256: r.sha256,
  info: r.object_info === null ? null : (JSON.parse(r.object_info) as ObjectInfo),
  fileType: r.file_type,
})

const COLUMNS = 'workspace_id, object_key, version_id, seq, tenant_id, file_id, size_bytes, created_at, noncurrent_at'
const JOINED = `SELECT v.workspace_id, v.object_key, v.version_id, v.seq, v.tenant_id, v.file_id, v.size_bytes, v.created_at, v.noncurrent_at,
  f.sha256, f.object_info, f.file_type FROM object_versions v LEFT JOIN files f ON f.id = v.file_id`

/**
 * A key whose current version is a delete marker, with its newest content version: what the API's
 * list of deleted files shows (GET /api/v1/files/deleted) and how its versions are reached.
 */
export interface DeletedKey {
  workspaceId: string
  key: string
  /** The current delete marker's versionId and time (when the key was deleted). */
  markerVersionId: string
  deletedAt: number
  /** The newest version with content. */
  versionId: string
  fileId: string
  size: number
  originalName: string
  fileType: string
}

/** Keyset position in the deleted keys, newest deletion first. */
export interface DeletedKeyCursor {
  deletedAt: number
  workspaceId: string
  key: string
}

interface DeletedKeyRow {
  workspace_id: string
  object_key: string
  marker_version_id: string
  deleted_at: number
  version_id: string
  file_id: string
  size_bytes: number
  original_name: string
  file_type: string
}

// Keys whose current version is a delete marker (the partial indexes of migration 21) and that
// still have a version with content: a lone marker has nothing to restore. The newest content
// version is read through object_versions_order, newest first, stopping at the first with a file.
const DELETED_KEYS = `SELECT m.workspace_id, m.object_key, m.version_id AS marker_version_id, m.created_at AS deleted_at,
    c.version_id, c.file_id, c.size_bytes, f.original_name, f.file_type
  FROM object_versions m
  JOIN object_versions c ON c.workspace_id = m.workspace_id AND c.object_key = m.object_key
    AND c.seq = (SELECT x.seq FROM object_versions x WHERE x.workspace_id = m.workspace_id AND x.object_key = m.object_key
                   AND x.file_id IS NOT NULL ORDER BY x.seq DESC LIMIT 1)
  JOIN files f ON f.id = c.file_id
  WHERE m.file_id IS NULL AND m.noncurrent_at IS NULL`
// A row value: one range on the index, so a page seeks to its cursor (the first page starts past any time).
const DELETED_AFTER = `(m.created_at, m.workspace_id, m.object_key) < (@at, @ws, @key)`
// Within one workspace (its index has no workspace column after the first).
const DELETED_AFTER_IN = `(m.created_at, m.object_key) < (@at, @key)`
const DELETED_ORDER = 'ORDER BY m.created_at DESC, m.workspace_id DESC, m.object_key DESC LIMIT @limit'
const HAS_CONTENT = `EXISTS (SELECT 1 FROM object_versions x WHERE x.workspace_id = m.workspace_id AND x.object_key = m.object_key AND x.file_id IS NOT NULL)`

const toDeletedKey = (r: DeletedKeyRow): DeletedKey => ({
  workspaceId: r.workspace_id,
  key: r.object_key,
  markerVersionId: r.marker_version_id,
  deletedAt: r.deleted_at,
  versionId: r.version_id,
  fileId: r.file_id,
  size: r.size_bytes,
  originalName: r.original_name,
  fileType: r.file_type,
})

/** The keyset cursor of a version listing: a key, and a version of it (exclusive), or past the whole key. */
export interface VersionCursor {
  key: string
  seq?: number
}

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // Keyset page over object_versions_order: keys in binary order, each key's versions newest first.
  // PostgreSQL cannot type a parameter that is only tested for NULL first: the bounds are cast to text.
  page: {
    sqlite: `${JOINED} WHERE v.workspace_id = @workspaceId
           AND (@after IS NULL OR v.object_key > @after)
           AND (@from IS NULL OR v.object_key >= @from)
           AND (@below IS NULL OR v.object_key < @below)
         ORDER BY v.object_key, v.seq DESC LIMIT @limit`,
    postgres: `${JOINED} WHERE v.workspace_id = @workspaceId
           AND (@after::text IS NULL OR v.object_key > @after)
           AND (@from::text IS NULL OR v.object_key >= @from)
           AND (@below::text IS NULL OR v.object_key < @below)
         ORDER BY v.object_key, v.seq DESC LIMIT @limit`,
  },
}

/** SQL for object versions and buckets' versioning state; no rules here (services/versions.ts has them). */
export class VersionsRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      versioning: db.pluck<[string], VersioningStatus>('SELECT versioning FROM workspaces WHERE id = ?'),
      setVersioning: db.prepare('UPDATE workspaces SET versioning = ? WHERE id = ?'),
      latest: db.prepare<[string, string], Row>(`SELECT ${COLUMNS} FROM object_versions WHERE workspace_id = ? AND object_key = ? ORDER BY seq DESC LIMIT 1`),
      byId: db.prepare<[string, string, string], Row>(`SELECT ${COLUMNS} FROM object_versions WHERE workspace_id = ? AND object_key = ? AND version_id = ?`),
      byIdJoined: db.prepare<[string, string, string], JoinedRow>(`${JOINED} WHERE v.workspace_id = ? AND v.object_key = ? AND v.version_id = ?`),
      byFile: db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM object_versions WHERE file_id = ?`),
      previous: db.prepare<[string, string, number], Row>(
        `SELECT ${COLUMNS} FROM object_versions WHERE workspace_id = ? AND object_key = ? AND seq < ? ORDER BY seq DESC LIMIT 1`,
      ),
      insert: db.prepare(
        `INSERT INTO object_versions (${COLUMNS})
         VALUES (@workspaceId, @key, @versionId, @seq, @tenantId, @fileId, @size, @createdAt, @noncurrentAt)`,
      ),
      setNoncurrent: db.prepare('UPDATE object_versions SET noncurrent_at = ? WHERE workspace_id = ? AND object_key = ? AND version_id = ?'),
      delete: db.prepare('DELETE FROM object_versions WHERE workspace_id = ? AND object_key = ? AND version_id = ?'),
      deleteInWorkspace: db.prepare('DELETE FROM object_versions WHERE workspace_id = ?'),
      deleteOfTenant: db.prepare('DELETE FROM object_versions WHERE tenant_id = ?'),
      any: db.pluck<[string], number>('SELECT 1 FROM object_versions WHERE workspace_id = ? LIMIT 1'),
      fileIdsInWorkspace: db.pluck<[string], string>('SELECT file_id FROM object_versions WHERE workspace_id = ? AND file_id IS NOT NULL'),
      // The rest of one key's versions, newest first, below a version.
      restOfKey: db.prepare<[{ workspaceId: string; key: string; seq: number; limit: number }], JoinedRow>(
        `${JOINED} WHERE v.workspace_id = @workspaceId AND v.object_key = @key AND v.seq < @seq ORDER BY v.seq DESC LIMIT @limit`,
      ),
      countOfKey: db.pluck<[string, string], number>('SELECT count(*) FROM object_versions WHERE workspace_id = ? AND object_key = ?'),
      deletedKeys: db.prepare<[{ tenantId: string; at: number; ws: string; key: string; limit: number }], DeletedKeyRow>(
        `${DELETED_KEYS} AND m.tenant_id = @tenantId AND ${DELETED_AFTER} ${DELETED_ORDER}`,
      ),
      deletedKeysIn: db.prepare<[{ workspaceId: string; at: number; key: string; limit: number }], DeletedKeyRow>(
        `${DELETED_KEYS} AND m.workspace_id = @workspaceId AND ${DELETED_AFTER_IN} ${DELETED_ORDER}`,
      ),
      countDeletedKeys: db.pluck<[string], number>(
        `SELECT count(*) FROM object_versions m WHERE m.tenant_id = ? AND m.file_id IS NULL AND m.noncurrent_at IS NULL AND ${HAS_CONTENT}`,
      ),
      countDeletedKeysIn: db.pluck<[string], number>(
        `SELECT count(*) FROM object_versions m WHERE m.workspace_id = ? AND m.file_id IS NULL AND m.noncurrent_at IS NULL AND ${HAS_CONTENT}`,
      ),
      page: db.prepare<[{ workspaceId: string; after: string | null; from: string | null; below: string | null; limit: number }], JoinedRow>(
        dialect(db, SQL.page),
      ),
      // SQLite: nothing; its one write lock already orders every transaction (lockKey).
      lockKey: db.dialect === 'postgres' ? db.prepare('SELECT pg_advisory_xact_lock(?::integer, ?::integer)') : undefined,
    }
  }

  /**
   * Inside a write transaction on PostgreSQL, before the write reads what the key holds: waits
   * for, then holds until the commit or rollback, the lock of one object key. Under READ COMMITTED
   * each statement sees what was committed when it began, so two nodes' conditional writes of one
   * key (If-None-Match: *, If-Match) could both find the condition holding and both commit; with
   * the lock the second one's check runs after the first commits, and sees its version. Keyed by
   * 32 bits of the key's hash: two keys that share them only wait for each other. Nothing on SQLite.
   */
  lockKey(workspaceId: string, key: string): void {
    if (!this.stmts.lockKey) return
    const h = createHash('sha256').update(workspaceId).update('\0').update(key).digest()
    this.stmts.lockKey.run(KEY_LOCK_CLASS, h.readInt32BE(0))
  }

  versioning(workspaceId: string): VersioningStatus {
    return this.stmts.versioning.get(workspaceId) ?? null
  }

  setVersioning(workspaceId: string, status: 'Enabled' | 'Suspended'): void {
    this.stmts.setVersioning.run(status, workspaceId)
  }

  /** The key's newest version (its current one), if it has any. */
  latest(workspaceId: string, key: string): VersionRow | undefined {
    const r = this.stmts.latest.get(workspaceId, key)
    return r && toVersion(r)
  }

  byId(workspaceId: string, key: string, versionId: string): VersionRow | undefined {
    const r = this.stmts.byId.get(workspaceId, key, versionId)
    return r && toVersion(r)
  }

  /** One version with what its file stores (for GET/HEAD/COPY of a version). */
  objectById(workspaceId: string, key: string, versionId: string): VersionedObject | undefined {
    const r = this.stmts.byIdJoined.get(workspaceId, key, versionId)
    return r && toVersioned(r)
  }

  /** The version a file is, if it is one. */
  byFile(fileId: string): VersionRow | undefined {
    const r = this.stmts.byFile.get(fileId)
    return r && toVersion(r)
  }

  /** The newest version of the key older than `seq`. */
  previous(workspaceId: string, key: string, seq: number): VersionRow | undefined {
    const r = this.stmts.previous.get(workspaceId, key, seq)
    return r && toVersion(r)
  }

  insert(v: VersionRow): void {
    this.stmts.insert.run(v)
  }

  /** Current ↔ noncurrent (`at` null makes it current); the triggers move its bytes between the live file and the version. */
  setNoncurrent(workspaceId: string, key: string, versionId: string, at: number | null): void {
    this.stmts.setNoncurrent.run(at, workspaceId, key, versionId)
  }

  delete(workspaceId: string, key: string, versionId: string): boolean {
    return this.stmts.delete.run(workspaceId, key, versionId).changes === 1
  }

  /** Every version of a workspace goes (the workspace is deleted with its files). */
  deleteInWorkspace(workspaceId: string): void {
    this.stmts.deleteInWorkspace.run(workspaceId)
  }

  deleteAllOfTenant(tenantId: string): void {
    this.stmts.deleteOfTenant.run(tenantId)
  }

  /** True when the workspace holds any version or delete marker (S3's DeleteBucket refuses then). */
  hasAny(workspaceId: string): boolean {
    return this.stmts.any.get(workspaceId) === 1
  }

  /**
   * Up to `limit` versions in (key, newest first) order after the cursor, at or after `from`, below
   * `below`. A cursor inside a key first reads the rest of that key, then the keys after it: two
   * range scans of the order index, so a page costs the same at any depth.
   */
  *page(workspaceId: string, bounds: { after?: VersionCursor; from?: string; below?: string }, limit: number): Generator<VersionedObject> {
    let left = limit
    const after = bounds.after
    if (after?.seq !== undefined && left > 0) {
      // Binary (UTF-8) comparisons, as the index orders keys.
      const cmp = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b))
      const inKey = (bounds.from === undefined || cmp(after.key, bounds.from) >= 0) && (bounds.below === undefined || cmp(after.key, bounds.below) < 0)
      if (inKey) {
        for (const r of this.stmts.restOfKey.iterate({ workspaceId, key: after.key, seq: after.seq, limit: left })) {
          left--
          yield toVersioned(r)
        }
      }
    }
    if (left <= 0) return
    const rows = this.stmts.page.iterate({ workspaceId, after: after?.key ?? null, from: bounds.from ?? null, below: bounds.below ?? null, limit: left })
    for (const r of rows) yield toVersioned(r)
  }

  /** Up to `limit` versions of one key, newest first, older than `beforeSeq` (all when undefined). */
  ofKey(workspaceId: string, key: string, beforeSeq: number | undefined, limit: number): VersionedObject[] {
    return this.stmts.restOfKey.all({ workspaceId, key, seq: beforeSeq ?? Number.MAX_SAFE_INTEGER, limit }).map(toVersioned)
  }

  /** How many versions (and markers) the key has. */
  countOfKey(workspaceId: string, key: string): number {
    return this.stmts.countOfKey.get(workspaceId, key) ?? 0
  }

  /**
   * Up to `limit` keys of the tenant (or of one of its workspaces) whose current version is a
   * delete marker and which have a version with content, newest deletion first, after `after`.
   */
  deletedKeys(tenantId: string, workspaceId: string | undefined, after: DeletedKeyCursor | undefined, limit: number): DeletedKey[] {
    const bounds = after ? { at: after.deletedAt, ws: after.workspaceId, key: after.key, limit } : { at: Number.MAX_SAFE_INTEGER, ws: '', key: '', limit }
    const rows =
      workspaceId === undefined
        ? this.stmts.deletedKeys.all({ tenantId, ...bounds })
        : this.stmts.deletedKeysIn.all({ workspaceId, at: bounds.at, key: bounds.key, limit })
    return rows.map(toDeletedKey)
  }

  countDeletedKeys(tenantId: string, workspaceId: string | undefined): number {
    return (workspaceId === undefined ? this.stmts.countDeletedKeys.get(tenantId) : this.stmts.countDeletedKeysIn.get(workspaceId)) ?? 0
  }
}
