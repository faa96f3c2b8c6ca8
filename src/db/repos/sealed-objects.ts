import type { DB } from '../database'
import { engineOf, type Engine } from '../engine'
import type { StoredSse } from './objects'

/** A completed file whose content is sealed under a key of its own (#27, s3/sealed-objects.ts). */
export interface SealedObjectRow {
  fileId: string
  /** The sealed blob's SHA-256. */
  sha256: string
  /** The plaintext's size. */
  size: number
  sse: StoredSse
}

/**
 * The files whose content is sealed under a key of their own (SSE-C, SSE-KMS, SSE-S3 without a
 * master key; s3/sse.ts), for `coffer verify`, which opens those whose key the server holds. A
 * keyset walk by file id over completed files with an S3 object's attributes: `object_info` is
 * JSON text on both databases, filtered by LIKE (run as written on both) and parsed here.
 */
export class SealedObjectsRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      after: db.prepare<[string, number], { id: string; sha256: string; size: number; info: string }>(
        `SELECT id, sha256, size_bytes AS size, object_info AS info FROM files
          WHERE id > ? AND status = 'completed' AND sha256 IS NOT NULL AND object_info LIKE '%"sse":%'
          ORDER BY id LIMIT ?`,
      ),
    }
  }

  /** The sealed objects among the next `limit` files with an S3 object's attributes after `afterId`, in order of id; `next`: where the next page starts, absent after the last. */
  after(afterId: string, limit: number): { rows: SealedObjectRow[]; next: string | undefined } {
    const raw = this.stmts.after.all(afterId, limit)
    const rows: SealedObjectRow[] = []
    for (const r of raw) {
      const sse = (JSON.parse(r.info) as { sse?: StoredSse }).sse
      if (sse) rows.push({ fileId: r.id, sha256: r.sha256, size: r.size, sse })
    }
    return { rows, next: raw.length === limit ? raw.at(-1)!.id : undefined }
  }
}
