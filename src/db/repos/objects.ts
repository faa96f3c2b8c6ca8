import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'

/** S3's checksum types: of the bytes as a whole, or (multipart) of the parts' checksums. */
export type ChecksumType = 'COMPOSITE' | 'FULL_OBJECT'

/**
 * How an SSE-C, SSE-KMS or (without a master key) SSE-S3 object is sealed (#27, s3/sse.ts): a
 * salted HMAC verifying the customer's key (never the key), the name of the key ring's key, or
 * Coffer's own SSE-S3 key (services/encryption.ts SseS3Keys).
 */
export type StoredSse = ({ type: 'C'; verifier: string } | { type: 'KMS'; keyId: string } | { type: 'S3' }) & {
  /** The plaintext sizes of the sealed segments (one per part) of a multipart object; absent: one segment of the object's size. */
  segments?: number[]
  /**
   * The plaintext's SHA-256, where it is recorded (API uploads, #27): the Storage Brain API reports
   * it (download ETag, versions) while the blob is stored under the sealed bytes' hash.
   */
  sha256?: string
}

/** What an S3 write stores beside the bytes (an S3 object is a file row with a key). */
export interface ObjectInfo {
  /** The quoted ETag S3 clients verify: MD5 of the bytes, or `"<md5 of part md5s>-<N>"`. */
  etag: string
  contentType: string
  /** `x-amz-meta-*` without the prefix, lower-case names. */
  meta: Record<string, string>
  cacheControl?: string
  contentDisposition?: string
  contentEncoding?: string
  contentLanguage?: string
  expires?: string
  /**
   * A checksum the client sent and Coffer verified, returned on GET/HEAD. For a multipart upload
   * created with a ChecksumAlgorithm, the composite: the checksum of the parts' binary checksums
   * followed by `-<N>` (S3's COMPOSITE checksum type), or with `type: 'FULL_OBJECT'` the CRC of
   * the whole object combined from the parts' CRCs. Absent type: FULL_OBJECT (a single-part write).
   */
  checksum?: { algorithm: string; value: string; type?: ChecksumType }
  /** Multipart objects: part count (for `x-amz-mp-parts-count`). */
  parts?: number
  /**
   * The object's canned ACL (#26; services/public-access.ts), absent for `private`. Kept here, not
   * in a column, so that it travels with the object's attributes into its versions.
   */
  acl?: string
  /**
   * The object lock a write asked for (x-amz-object-lock-*, #25), carried from the request (or a
   * multipart upload's creation) to the commit, which moves it onto the new version's row and
   * never stores it here.
   */
  lock?: { mode?: 'GOVERNANCE' | 'COMPLIANCE'; until?: number; legalHold?: boolean }
  /** S3 object tags (services/tagging.ts), kept with the object so that they travel with it. */
  tags?: Record<string, string>
  /**
   * SSE-C or SSE-KMS (#27, s3/sse.ts): the object's blob is sealed under a key of its own, found
   * again with this (a verifier of the customer's key, or the key ring's key name); its sha256 is
   * the sealed bytes'.
   */
  sse?: StoredSse
}

/** A completed, live object of a bucket. */
export interface ObjectRow {
  fileId: string
  tenantId: string
  workspaceId: string
  key: string
  size: number
  sha256: string
  /** Set for S3 writes; null for files uploaded through the API (their ETag is the SHA-256). */
  info: ObjectInfo | null
  fileType: string
  originalName: string
  completedAt: number
  /** Its S3 versionId (#25): 'null' for the null version; undefined where not read (listings). */
  versionId?: string
  /** Its bucket's versioning state, where the version id is read: S3 answers x-amz-version-id only in a versioned bucket. */
  versioning?: 'Enabled' | 'Suspended' | null
  /** False for a noncurrent version read by its versionId. */
  isLatest?: boolean
}

interface Row {
  id: string
  tenant_id: string
  workspace_id: string
  object_key: string
  size_bytes: number
  sha256: string
  object_info: string | null
  file_type: string
  original_name: string
  completed_at: number
  version_id?: string | null
  versioning?: 'Enabled' | 'Suspended' | null
  is_latest?: number
}

const toObject = (r: Row): ObjectRow => ({
  fileId: r.id,
  tenantId: r.tenant_id,
  workspaceId: r.workspace_id,
  key: r.object_key,
  size: r.size_bytes,
  sha256: r.sha256,
  info: r.object_info === null ? null : (JSON.parse(r.object_info) as ObjectInfo),
  fileType: r.file_type,
  originalName: r.original_name,
  completedAt: r.completed_at,
  ...(r.version_id !== undefined && r.version_id !== null ? { versionId: r.version_id } : {}),
  ...(r.versioning !== undefined ? { versioning: r.versioning } : {}),
  ...(r.is_latest !== undefined ? { isLatest: r.is_latest === 1 } : {}),
})

/** One part of a completed multipart object, as it was uploaded (s3_object_parts). */
export interface ObjectPart {
  partNumber: number
  size: number
  /** Bytes before this part in the object. */
  offset: number
  /** base64, when the upload had a checksum algorithm. */
  checksum: string | null
}

interface PartRow {
  part_number: number
  size_bytes: number
  checksum: string | null
  offset: number
}

const toPart = (r: PartRow): ObjectPart => ({ partNumber: r.part_number, size: r.size_bytes, checksum: r.checksum, offset: r.offset })

const COLUMNS = 'id, tenant_id, workspace_id, object_key, size_bytes, sha256, object_info, file_type, original_name, completed_at'
/** With the version the file is and its bucket's versioning state (#25): two primary-key lookups. */
const VERSIONED = `${COLUMNS},
  (SELECT v.version_id FROM object_versions v WHERE v.file_id = files.id) AS version_id,
  (SELECT w.versioning FROM workspaces w WHERE w.id = files.workspace_id) AS versioning`

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // sum() of a bigint is a numeric in PostgreSQL, which `pg` reads as a string: cast back.
  part: {
    sqlite: `SELECT part_number, size_bytes, checksum,
           (SELECT coalesce(sum(size_bytes), 0) FROM s3_object_parts WHERE file_id = ? AND part_number < ?) AS offset
         FROM s3_object_parts WHERE file_id = ? AND part_number = ?`,
    postgres: `SELECT part_number, size_bytes, checksum,
           (SELECT coalesce(sum(size_bytes), 0)::bigint FROM s3_object_parts WHERE file_id = ? AND part_number < ?) AS offset
         FROM s3_object_parts WHERE file_id = ? AND part_number = ?`,
  },
}

/**
 * A keyset page of keys above `@lo` (exclusive with '>', inclusive with '>='), below `@below` when
 * bounded. No parameter is tested for NULL, so the text is the same on both databases.
 */
function pageStatement(db: Engine, op: '>' | '>=', bounded: boolean) {
  return db.prepare<[{ workspaceId: string; lo: string; below?: string; limit: number }], Row>(
    `SELECT ${COLUMNS} FROM files
     WHERE workspace_id = @workspaceId AND deleted_at IS NULL AND object_key IS NOT NULL
       AND object_key ${op} @lo${bounded ? ' AND object_key < @below' : ''}
       AND status = 'completed'
     ORDER BY object_key LIMIT @limit`,
  )
}

/** SQL for files seen as S3 objects (files with an object key); no rules here. */
export class ObjectsRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      get: db.prepare<[string, string], Row>(
        `SELECT ${VERSIONED} FROM files WHERE workspace_id = ? AND object_key = ? AND deleted_at IS NULL AND status = 'completed'`,
      ),
      // One read for a GetObject/HeadObject: the bucket (a live workspace of the tenant, by slug)
      // and the object in it. A subquery, not a join: measured 14 us against 105 us for the
      // join (whose plan reads the same two indexes) and 26 us for two statements.
      inBucket: db.prepare<[string, string, string], Row>(
        `SELECT ${VERSIONED} FROM files
         WHERE workspace_id = (SELECT id FROM workspaces WHERE tenant_id = ? AND slug = ? AND deleted_at IS NULL)
           AND object_key = ? AND deleted_at IS NULL AND status = 'completed'`,
      ),
      // A version's file, live or retained (a noncurrent version's file is soft-deleted).
      byFile: db.prepare<[string], Row>(
        `SELECT ${VERSIONED}, (CASE WHEN deleted_at IS NULL THEN 1 ELSE 0 END) AS is_latest FROM files WHERE id = ? AND status = 'completed'`,
      ),
      setInfo: db.prepare<[string, string]>(`UPDATE files SET object_info = ? WHERE id = ? AND status = 'completed'`),
      liveIdByKey: db.pluck<[string, string], string>(`SELECT id FROM files WHERE workspace_id = ? AND object_key = ? AND deleted_at IS NULL`),
      insert: db.prepare(
        `INSERT INTO files (id, tenant_id, workspace_id, original_name, file_type, status, size_bytes, declared_size, sha256,
           context, tags, upload_expires_at, created_at, completed_at, object_key, object_info)
         VALUES (@id, @tenantId, @workspaceId, @originalName, @fileType, 'completed', @size, NULL, @sha256,
           '', '{}', @now, @now, @now, @key, @info)`,
      ),
      // Keyset page over the unique index, in binary (UTF-8) key order: one statement per shape of
      // bounds (#31). Written as `(@after IS NULL OR object_key > @after) AND (@from IS NULL OR
      // object_key >= @from)`, SQLite seeks on one lower bound only, and not the one that applies:
      // a page after 900,000 keys of a 1,000,000-key bucket read them all (1 s against 0.5 ms).
      pageAfter: pageStatement(db, '>', false),
      pageAfterBelow: pageStatement(db, '>', true),
      pageFrom: pageStatement(db, '>=', false),
      pageFromBelow: pageStatement(db, '>=', true),
      insertPart: db.prepare('INSERT INTO s3_object_parts (file_id, part_number, size_bytes, checksum) VALUES (?, ?, ?, ?)'),
      copyParts: db.prepare(
        'INSERT INTO s3_object_parts (file_id, part_number, size_bytes, checksum) SELECT ?, part_number, size_bytes, checksum FROM s3_object_parts WHERE file_id = ?',
      ),
      // The offset sums the parts before it: at most 9,999 rows of the primary key, read once per request.
      part: db.prepare<[string, number, string, number], PartRow>(dialect(db, SQL.part)),
      partsPage: db.prepare<[string, number, number], PartRow>(
        'SELECT part_number, size_bytes, checksum, 0 AS offset FROM s3_object_parts WHERE file_id = ? AND part_number > ? ORDER BY part_number LIMIT ?',
      ),
      // A version restored by copy (#25): a new completed file with the source's name, type, content,
      // API context and tags; its S3 attributes are the ones given (the caller drops what a copy
      // does not carry). No upload webhookUrl: that one was told how its own upload ended.
      insertCopy: db.prepare<[{ id: string; from: string; info: string | null; now: number }]>(
        `INSERT INTO files (id, tenant_id, workspace_id, original_name, file_type, status, size_bytes, declared_size, sha256,
           context, tags, upload_expires_at, created_at, completed_at, object_key, object_info)
         SELECT @id, tenant_id, workspace_id, original_name, file_type, 'completed', size_bytes, NULL, sha256,
           context, tags, @now, @now, @now, object_key, @info
         FROM files WHERE id = @from AND status = 'completed'`,
      ),
      // Ceph RGW's HeadBucket read-stats: the objects a listing shows, counted over the workspace's index.
      stats: db.prepare<[string], { objects: number | string; bytes: number | string }>(
        `SELECT COUNT(*) AS objects, COALESCE(SUM(size_bytes), 0) AS bytes FROM files
         WHERE workspace_id = ? AND deleted_at IS NULL AND object_key IS NOT NULL AND status = 'completed'`,
      ),
      anyLive: db.pluck<[string], number>(`SELECT 1 FROM files WHERE workspace_id = ? AND deleted_at IS NULL AND status != 'failed' LIMIT 1`),
    }
  }

  /** The completed live object at `key`, if any. */
  get(workspaceId: string, key: string): ObjectRow | undefined {
    const r = this.stmts.get.get(workspaceId, key)
    return r && toObject(r)
  }

  /** The completed live object at `key` in the tenant's live bucket (workspace) `slug`, if both exist. */
  getInBucket(tenantId: string, slug: string, key: string): ObjectRow | undefined {
    const r = this.stmts.inBucket.get(tenantId, slug, key)
    return r && toObject(r)
  }

  /** The completed file `fileId` as an object, whether it is its key's current version or a noncurrent one. */
  byFile(fileId: string): ObjectRow | undefined {
    const r = this.stmts.byFile.get(fileId)
    return r && toObject(r)
  }

  /**
   * Replaces an object version's attributes (PutObjectAcl); false when its file is gone. A
   * noncurrent version's file is soft-deleted but retained (object_versions), so it is not required live.
   */
  setInfo(fileId: string, info: ObjectInfo): boolean {
    return this.stmts.setInfo.run(JSON.stringify(info), fileId).changes === 1
  }

  /** The id of the live file (any status) holding `key`: the one a write to that key replaces. */
  liveIdByKey(workspaceId: string, key: string): string | undefined {
    return this.stmts.liveIdByKey.get(workspaceId, key)
  }

  insertCompleted(o: {
    id: string
    tenantId: string
    workspaceId: string
    key: string
    originalName: string
    fileType: string
    size: number
    sha256: string
    info: ObjectInfo
    now: number
  }): void {
    this.stmts.insert.run({ ...o, info: JSON.stringify(o.info) })
  }

  /**
   * Up to `limit` objects in key order: after `after` (exclusive), at or after `from`, below
   * `below` (exclusive). Every bound is a range on the index, so a page costs the same at any depth.
   * Rows are read as the caller iterates: a listing that stops early (a common prefix) reads no more.
   */
  *page(workspaceId: string, bounds: { after?: string; from?: string; below?: string }, limit: number): Generator<ObjectRow> {
    const { after, from = '', below } = bounds
    // The one lower bound that applies: past `after` unless `from` is further on (UTF-8 order, as the index).
    const exclusive = after !== undefined && Buffer.compare(Buffer.from(after), Buffer.from(from)) >= 0
    const lo = exclusive ? after : from
    const rows =
      below === undefined
        ? (exclusive ? this.stmts.pageAfter : this.stmts.pageFrom).iterate({ workspaceId, lo, limit })
        : (exclusive ? this.stmts.pageAfterBelow : this.stmts.pageFromBelow).iterate({ workspaceId, lo, below, limit })
    for (const r of rows) yield toObject(r)
  }

  /** Records the part layout of a multipart object just inserted (in the transaction that inserts it). */
  insertParts(fileId: string, parts: { partNumber: number; size: number; checksum?: string | undefined }[]): void {
    for (const p of parts) this.stmts.insertPart.run(fileId, p.partNumber, p.size, p.checksum ?? null)
  }

  /** A copy shares its source's content, so it shares its part layout too. */
  copyParts(fromFileId: string, toFileId: string): void {
    this.stmts.copyParts.run(toFileId, fromFileId)
  }

  /** Part `partNumber` of the object, with its offset, if the object has a recorded layout holding it. */
  part(fileId: string, partNumber: number): ObjectPart | undefined {
    const r = this.stmts.part.get(fileId, partNumber, fileId, partNumber)
    return r && toPart(r)
  }

  /** Up to `limit` parts after part number `after`, in order (offsets not computed: 0). */
  partsPage(fileId: string, after: number, limit: number): ObjectPart[] {
    return this.stmts.partsPage.all(fileId, after, limit).map(toPart)
  }

  /** How many current objects the bucket holds, and their bytes. */
  stats(workspaceId: string): { objects: number; bytes: number } {
    const r = this.stmts.stats.get(workspaceId)
    return { objects: Number(r?.objects ?? 0), bytes: Number(r?.bytes ?? 0) }
  }

  /** True when the workspace holds any live file (completed or still uploading). */
  hasLiveFiles(workspaceId: string): boolean {
    return this.stmts.anyLive.get(workspaceId) === 1
  }

  /** A new completed file `id` copying file `from` (a version restored over its key's current one); false when `from` has no content. */
  insertCopy(id: string, from: string, info: ObjectInfo | null, now: number): boolean {
    return this.stmts.insertCopy.run({ id, from, info: info === null ? null : JSON.stringify(info), now }).changes === 1
  }
}
