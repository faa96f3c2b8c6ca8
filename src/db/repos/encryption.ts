import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'

/** The encryption table's row 1 (or none): the wrapped data-dir key of an encrypted data dir (#27). */
export interface EncryptionRow {
  wrappedKey: Buffer
  keyId: number
  plainRemaining: boolean
}

/**
 * Row 2 (or none): the SSE-S3 key (#27, migration 23), as it is (`wrapped` false) while no master
 * key is configured, else wrapped under the master key as the data-dir key is.
 */
export interface SseS3KeyRow {
  key: Buffer
  wrapped: boolean
}

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // PostgreSQL folds an unquoted alias to lower case: the camelCase ones are quoted there.
  get: {
    sqlite: 'SELECT wrapped_key AS wrappedKey, key_id AS keyId, plain_remaining AS plainRemaining FROM encryption WHERE id = 1',
    postgres: 'SELECT wrapped_key AS "wrappedKey", key_id AS "keyId", plain_remaining AS "plainRemaining" FROM encryption WHERE id = 1',
  },
}

/** SQL for the encryption table. */
export class EncryptionRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      get: db.prepare<[], { wrappedKey: Buffer; keyId: number; plainRemaining: number }>(dialect(db, SQL.get)),
      insert: db.prepare('INSERT INTO encryption (id, wrapped_key, key_id, plain_remaining, created_at) VALUES (1, ?, ?, ?, ?)'),
      rewrap: db.prepare('UPDATE encryption SET wrapped_key = ? WHERE id = 1'),
      sealedAll: db.prepare('UPDATE encryption SET plain_remaining = 0 WHERE id = 1'),
      // Lower-case aliases: the same on both databases. ON CONFLICT … DO NOTHING runs as written on both.
      sseS3: db.prepare<[], { k: Buffer; wrapped: number }>('SELECT wrapped_key AS k, wrapped FROM encryption WHERE id = 2'),
      insertSseS3: db.prepare(
        'INSERT INTO encryption (id, wrapped_key, key_id, plain_remaining, created_at, wrapped) VALUES (2, ?, 0, 0, ?, 0) ON CONFLICT (id) DO NOTHING',
      ),
      wrapSseS3: db.prepare('UPDATE encryption SET wrapped_key = ?, wrapped = 1 WHERE id = 2'),
    }
  }

  get(): EncryptionRow | undefined {
    const r = this.stmts.get.get()
    return r && { wrappedKey: r.wrappedKey, keyId: r.keyId, plainRemaining: r.plainRemaining === 1 }
  }

  insert(wrappedKey: Buffer, keyId: number, plainRemaining: boolean, now: number): void {
    this.stmts.insert.run(wrappedKey, keyId, plainRemaining ? 1 : 0, now)
  }

  /** A new wrapping of the same data-dir key (master key rotation). */
  rewrap(wrappedKey: Buffer): void {
    this.stmts.rewrap.run(wrappedKey)
  }

  /** Every blob is sealed: content in the clear is no longer read. */
  markSealedAll(): void {
    this.stmts.sealedAll.run()
  }

  /** The SSE-S3 key's row, if one was ever made. */
  sseS3Key(): SseS3KeyRow | undefined {
    const r = this.stmts.sseS3.get()
    return r && { key: r.k, wrapped: r.wrapped === 1 }
  }

  /** Keeps `key` as the SSE-S3 key, as it is, unless one is kept already (two processes making one at once: the first wins). */
  insertSseS3Key(key: Buffer, now: number): void {
    this.stmts.insertSseS3.run(key, now)
  }

  /** The SSE-S3 key wrapped under a master key, in place of what was kept (as it was, or another wrapping). */
  wrapSseS3Key(wrappedKey: Buffer): void {
    this.stmts.wrapSseS3.run(wrappedKey)
  }
}
