import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'

/** The encryption row (one or none): the wrapped data-dir key of an encrypted data dir (#27). */
export interface EncryptionRow {
  wrappedKey: Buffer
  keyId: number
  plainRemaining: boolean
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
}
