import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // PostgreSQL folds an unquoted alias to lower case: createdAt is quoted there.
  after: {
    sqlite: 'SELECT sha256, length(content) AS size, created_at AS createdAt FROM blob_inline WHERE sha256 > ? ORDER BY sha256 LIMIT ?',
    postgres: 'SELECT sha256, length(content) AS size, created_at AS "createdAt" FROM blob_inline WHERE sha256 > ? ORDER BY sha256 LIMIT ?',
  },
}

/**
 * SQL for blob_inline: the content of small blobs, kept in the database by the disk store
 * (DiskBlobStore) instead of a file of its own. A row is written inside the transaction that
 * commits the blob's first reference, so the group commit's one WAL flush makes it durable along
 * with that commit: no file, no directory entry, no fsyncs of their own (#15).
 */
export class InlineBlobsRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      insert: db.prepare('INSERT INTO blob_inline (sha256, content, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
      exists: db.pluck<[string], number>('SELECT 1 FROM blob_inline WHERE sha256 = ?'),
      get: db.pluck<[string], Buffer>('SELECT content FROM blob_inline WHERE sha256 = ?'),
      delete: db.prepare('DELETE FROM blob_inline WHERE sha256 = ?'),
      after: db.prepare<[string, number], { sha256: string; size: number; createdAt: number }>(dialect(db, SQL.after)),
    }
  }

  insertIfMissing(sha256: string, content: Buffer, now: number): void {
    this.stmts.insert.run(sha256, content, now)
  }

  exists(sha256: string): boolean {
    return this.stmts.exists.get(sha256) === 1
  }

  /** The content, or undefined when it is not stored inline. */
  get(sha256: string): Buffer | undefined {
    return this.stmts.get.get(sha256)
  }

  delete(sha256: string): void {
    this.stmts.delete.run(sha256)
  }

  /** Keyset walk over the inline blobs, in hash order. */
  after(after: string, limit: number): { sha256: string; size: number; createdAt: number }[] {
    return this.stmts.after.all(after, limit)
  }
}
