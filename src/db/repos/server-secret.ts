import type { DB } from '../database'
import { engineOf, type Engine } from '../engine'

/**
 * SQL for the server_secret row (migration 25, #30): the fingerprint of the secret the first node
 * on a database started with. No rules here (services/server-secret.ts).
 */
export class ServerSecretRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      // Nodes starting together both insert: the first commits, the second's does nothing.
      claim: db.prepare('INSERT INTO server_secret (id, fingerprint, created_at) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING'),
      get: db.pluck<[], string>('SELECT fingerprint FROM server_secret WHERE id = 1'),
      set: db.prepare(
        'INSERT INTO server_secret (id, fingerprint, created_at) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at',
      ),
    }
  }

  /** Stores `fingerprint` in place of any other. */
  set(fingerprint: string, now: number): void {
    this.stmts.set.run(fingerprint, now)
  }

  /** Stores `fingerprint` unless a node stored one before, and returns the stored one. */
  claim(fingerprint: string, now: number): string {
    this.stmts.claim.run(fingerprint, now)
    return this.stmts.get.get()!
  }
}
