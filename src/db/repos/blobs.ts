import type { DB } from '../database'
import { engineOf, type Engine } from '../engine'

/**
 * The first of the two keys of a content lock (PostgreSQL's two-int4 advisory locks, a key space
 * apart from the bigint one the migrations lock, pg/migrate.ts): the first 4 bytes of
 * SHA-256('coffer:blob-content') as a signed int4.
 */
export const CONTENT_LOCK_CLASS = 1992296239

/** SQL for the blobs table: one row per stored content, removable only when no file row references it. */
export class BlobsRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      insert: db.prepare('INSERT INTO blobs (sha256, size_bytes, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
      exists: db.pluck<[string], number>('SELECT 1 FROM blobs WHERE sha256 = ?'),
      sizeOf: db.pluck<[string], number>('SELECT size_bytes FROM blobs WHERE sha256 = ?'),
      sizeIfUnreferenced: db.pluck<[string], number>(
        `SELECT b.size_bytes FROM blobs b WHERE b.sha256 = ?
           AND NOT EXISTS (SELECT 1 FROM files f WHERE f.sha256 = b.sha256)
           AND NOT EXISTS (SELECT 1 FROM s3_parts p WHERE p.sha256 = b.sha256)`,
      ),
      shasAfter: db.pluck<[string, number], string>('SELECT sha256 FROM blobs WHERE sha256 > ? ORDER BY sha256 LIMIT ?'),
      sizesAfter: db.prepare<[string, number], { sha256: string; size: number }>(
        'SELECT sha256, size_bytes AS size FROM blobs WHERE sha256 > ? ORDER BY sha256 LIMIT ?',
      ),
      createdSince: db.pluck<[number], string>('SELECT sha256 FROM blobs WHERE created_at >= ?'),
      delete: db.prepare('DELETE FROM blobs WHERE sha256 = ?'),
      defer: db.prepare('INSERT INTO blob_releases (sha256, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING'),
      deferred: db.pluck<[number], string>('SELECT sha256 FROM blob_releases ORDER BY sha256 LIMIT ?'),
      undefer: db.prepare('DELETE FROM blob_releases WHERE sha256 = ?'),
      stats: db.prepare<[], { bytes: number; count: number }>('SELECT bytes, count FROM blob_totals WHERE id = 1'),
      // SQLite: nothing; its one write lock already orders every transaction (lockContent).
      lock: db.dialect === 'postgres' ? db.prepare('SELECT pg_advisory_xact_lock(?::integer, ?::integer)') : undefined,
    }
  }

  /**
   * Inside a transaction on PostgreSQL: waits for, then holds until the commit or rollback, the
   * lock of `sha256`'s content, which a write that settles that content and the unlink of released
   * content after its commit both take (BlobWrites), so that an unlink never removes a file a
   * write is committing (#30). Keyed by the hash's first 32 bits: two hashes that share them only
   * wait for each other. Nothing on SQLite, whose write lock orders them already.
   */
  lockContent(sha256: string): void {
    this.stmts.lock?.run(CONTENT_LOCK_CLASS, Number.parseInt(sha256.slice(0, 8), 16) | 0)
  }

  insertIfMissing(sha256: string, size: number, now: number): void {
    this.stmts.insert.run(sha256, size, now)
  }

  exists(sha256: string): boolean {
    return this.stmts.exists.get(sha256) === 1
  }

  /** The recorded size, or undefined when there is no such blob. */
  sizeOf(sha256: string): number | undefined {
    return this.stmts.sizeOf.get(sha256)
  }

  /** The blob's size when it exists and no file row (live, deleted or failed) nor multipart part references it. */
  sizeIfUnreferenced(sha256: string): number | undefined {
    return this.stmts.sizeIfUnreferenced.get(sha256)
  }

  /** Keyset walk over every blob, in hash order. */
  shasAfter(after: string, limit: number): string[] {
    return this.stmts.shasAfter.all(after, limit)
  }

  /** Keyset walk over every blob with its recorded size, in hash order. */
  sizesAfter(after: string, limit: number): { sha256: string; size: number }[] {
    return this.stmts.sizesAfter.all(after, limit)
  }

  /**
   * The hashes of the blobs created at or after `since` (epoch ms): the encrypted store's orphan
   * check. No index: it runs for an old file no row maps to (a crash's leftover), rarely.
   */
  createdSince(since: number): string[] {
    return this.stmts.createdSince.all(since)
  }

  delete(sha256: string): void {
    this.stmts.delete.run(sha256)
  }

  /**
   * Records that `sha256` was released by the transaction running now and is to be removed after
   * it is durable (CompleteMultipartUpload's parts): a crash in between leaves the row to finish.
   */
  deferRelease(sha256: string, now: number): void {
    this.stmts.defer.run(sha256, now)
  }

  /** Up to `limit` releases waiting to be finished. */
  deferred(limit: number): string[] {
    return this.stmts.deferred.all(limit)
  }

  undefer(sha256: string): void {
    this.stmts.undefer.run(sha256)
  }

  /** Count and bytes of all blobs, maintained by triggers: one row read whatever the store's size. */
  stats(): { bytes: number; count: number } {
    return this.stmts.stats.get()!
  }
}
