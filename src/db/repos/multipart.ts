import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'
import type { ChecksumType, ObjectInfo } from './objects'

export interface MultipartUpload {
  id: string
  tenantId: string
  workspaceId: string
  key: string
  /** What the object will store, and the upload's ChecksumAlgorithm (lower case) and type when it was created with one. */
  info: Omit<ObjectInfo, 'etag'> & { checksumAlgorithm?: string; checksumType?: ChecksumType }
  createdAt: number
  expiresAt: number
}

export interface Part {
  partNumber: number
  size: number
  md5: string
  sha256: string
  /** base64 checksum of the upload's algorithm, when it has one. */
  checksum: string | null
  createdAt: number
}

interface UploadRow {
  id: string
  tenant_id: string
  workspace_id: string
  object_key: string
  object_info: string
  created_at: number
  expires_at: number
}

interface PartRow {
  part_number: number
  size_bytes: number
  md5: string
  sha256: string
  checksum: string | null
  created_at: number
}

const toUpload = (r: UploadRow): MultipartUpload => ({
  id: r.id,
  tenantId: r.tenant_id,
  workspaceId: r.workspace_id,
  key: r.object_key,
  info: JSON.parse(r.object_info) as MultipartUpload['info'],
  createdAt: r.created_at,
  expiresAt: r.expires_at,
})
const toPart = (r: PartRow): Part => ({
  partNumber: r.part_number,
  size: r.size_bytes,
  md5: r.md5,
  sha256: r.sha256,
  checksum: r.checksum,
  createdAt: r.created_at,
})

/** The listing's text; PostgreSQL cannot type a parameter tested for NULL before its use, so there it is cast. */
const listSql = (cast: '' | '::text') => `SELECT * FROM s3_uploads WHERE workspace_id = @workspaceId
           AND (@from${cast} IS NULL OR object_key >= @from) AND (@below${cast} IS NULL OR object_key < @below)
           AND (@afterKey${cast} IS NULL OR (object_key, id) > (@afterKey, @afterId))
         ORDER BY object_key, id LIMIT @limit`

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  list: { sqlite: listSql(''), postgres: listSql('::text') },
  // sum() of a bigint is a numeric in PostgreSQL, which `pg` reads as a string: cast back.
  partsUsage: {
    sqlite: 'SELECT coalesce(sum(size_bytes), 0) FROM s3_parts WHERE upload_id = ?',
    postgres: 'SELECT coalesce(sum(size_bytes), 0)::bigint FROM s3_parts WHERE upload_id = ?',
  },
}

/** SQL for multipart uploads and their parts; quota charging is done by the s3_parts triggers. */
export class MultipartRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      insert: db.prepare(
        `INSERT INTO s3_uploads (id, tenant_id, workspace_id, object_key, object_info, created_at, expires_at)
         VALUES (@id, @tenantId, @workspaceId, @key, @info, @createdAt, @expiresAt)`,
      ),
      get: db.prepare<[string, string], UploadRow>('SELECT * FROM s3_uploads WHERE id = ? AND workspace_id = ?'),
      list: db.prepare<
        [{ workspaceId: string; from: string | null; below: string | null; afterKey: string | null; afterId: string; limit: number }],
        UploadRow
      >(dialect(db, SQL.list)),
      expired: db.prepare<[number, number], UploadRow>('SELECT * FROM s3_uploads WHERE expires_at < ? ORDER BY expires_at LIMIT ?'),
      orphaned: db.prepare<[number], UploadRow>(
        'SELECT u.* FROM s3_uploads u JOIN workspaces w ON w.id = u.workspace_id WHERE w.deleted_at IS NOT NULL LIMIT ?',
      ),
      byWorkspace: db.pluck<[string], string>('SELECT id FROM s3_uploads WHERE workspace_id = ?'),
      deleteUpload: db.prepare('DELETE FROM s3_uploads WHERE id = ?'),
      parts: db.prepare<[string], PartRow>('SELECT * FROM s3_parts WHERE upload_id = ? ORDER BY part_number'),
      partsPage: db.prepare<[string, number, number], PartRow>('SELECT * FROM s3_parts WHERE upload_id = ? AND part_number > ? ORDER BY part_number LIMIT ?'),
      part: db.prepare<[string, number], PartRow>('SELECT * FROM s3_parts WHERE upload_id = ? AND part_number = ?'),
      deletePart: db.prepare('DELETE FROM s3_parts WHERE upload_id = ? AND part_number = ?'),
      deleteParts: db.prepare<[string], PartRow>('DELETE FROM s3_parts WHERE upload_id = ? RETURNING *'),
      insertPart: db.prepare(
        'INSERT INTO s3_parts (upload_id, part_number, size_bytes, md5, sha256, checksum, created_at) VALUES (@uploadId, @partNumber, @size, @md5, @sha256, @checksum, @createdAt)',
      ),
      partsUsage: db.pluck<[string], number>(dialect(db, SQL.partsUsage)),
      insertCompleted: db.prepare('INSERT INTO s3_completed_uploads (id, workspace_id, file_id, expires_at) VALUES (?, ?, ?, ?)'),
      completedFile: db.pluck<[string, string, number], string>(
        'SELECT file_id FROM s3_completed_uploads WHERE id = ? AND workspace_id = ? AND expires_at >= ?',
      ),
      forgetCompleted: db.prepare<[number, number]>(
        'DELETE FROM s3_completed_uploads WHERE id IN (SELECT id FROM s3_completed_uploads WHERE expires_at < ? ORDER BY expires_at LIMIT ?)',
      ),
    }
  }

  insert(u: MultipartUpload): void {
    this.stmts.insert.run({ ...u, info: JSON.stringify(u.info) })
  }

  get(workspaceId: string, id: string): MultipartUpload | undefined {
    const r = this.stmts.get.get(id, workspaceId)
    return r && toUpload(r)
  }

  /**
   * In (key, upload id) order: keys from `from` (inclusive) and below `below`, after the (key, id)
   * cursor `after`; one range scan of the (workspace, key, id) index, read as the caller iterates.
   */
  *list(workspaceId: string, q: { after?: { key: string; id: string }; from?: string; below?: string }, limit: number): Generator<MultipartUpload> {
    const rows = this.stmts.list.iterate({
      workspaceId,
      from: q.from ?? null,
      below: q.below ?? null,
      afterKey: q.after?.key ?? null,
      afterId: q.after?.id ?? '',
      limit,
    })
    for (const r of rows) yield toUpload(r)
  }

  expired(now: number, limit: number): MultipartUpload[] {
    return this.stmts.expired.all(now, limit).map(toUpload)
  }

  /** Uploads whose workspace was deleted (through the API): they can never complete. */
  orphaned(limit: number): MultipartUpload[] {
    return this.stmts.orphaned.all(limit).map(toUpload)
  }

  idsInWorkspace(workspaceId: string): string[] {
    return this.stmts.byWorkspace.all(workspaceId)
  }

  parts(uploadId: string): Part[] {
    return this.stmts.parts.all(uploadId).map(toPart)
  }

  partsPage(uploadId: string, after: number, limit: number): Part[] {
    return this.stmts.partsPage.all(uploadId, after, limit).map(toPart)
  }

  part(uploadId: string, partNumber: number): Part | undefined {
    const r = this.stmts.part.get(uploadId, partNumber)
    return r && toPart(r)
  }

  /** Replaces a part (a retried UploadPart): the old row's bytes are released by the trigger. */
  putPart(uploadId: string, p: Part): void {
    this.stmts.deletePart.run(uploadId, p.partNumber)
    this.stmts.insertPart.run({ uploadId, ...p })
  }

  /** Removes the upload and its parts (releasing their bytes); returns the parts' blobs. */
  delete(uploadId: string): string[] {
    const parts = this.stmts.deleteParts.all(uploadId)
    this.stmts.deleteUpload.run(uploadId)
    return parts.map((p) => p.sha256)
  }

  /** Remembers that the upload made the object `fileId`, until `expiresAt` (a retried Complete). */
  insertCompleted(uploadId: string, workspaceId: string, fileId: string, expiresAt: number): void {
    this.stmts.insertCompleted.run(uploadId, workspaceId, fileId, expiresAt)
  }

  /** The object a completed upload made, while it is remembered. */
  completedFile(workspaceId: string, uploadId: string, now: number): string | undefined {
    return this.stmts.completedFile.get(uploadId, workspaceId, now)
  }

  /** Forgets up to `limit` completed uploads remembered past their time; returns how many. */
  forgetCompleted(now: number, limit: number): number {
    return this.stmts.forgetCompleted.run(now, limit).changes
  }

  /** Bytes the upload's parts hold against the quotas. */
  usage(uploadId: string): number {
    return this.stmts.partsUsage.get(uploadId) as number
  }
}
