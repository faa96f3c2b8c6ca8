import type { DB } from '../database'
import { dialect, engineOf, type Engine } from '../engine'

/** Where the two databases differ (engine.ts), side by side. */
const SQL = {
  // A lease taken again by the same upload replaces its hash and expiry; PostgreSQL names the conflict.
  lease: {
    sqlite: 'INSERT OR REPLACE INTO blob_leases (upload_id, sha256, expires_at) VALUES (?, ?, ?)',
    postgres: `INSERT INTO blob_leases (upload_id, sha256, expires_at) VALUES (?, ?, ?)
               ON CONFLICT (upload_id) DO UPDATE SET sha256 = excluded.sha256, expires_at = excluded.expires_at`,
  },
  tombstone: {
    sqlite: 'INSERT OR IGNORE INTO blob_tombstones (sha256, created_at, claimed_until) VALUES (?, ?, 0)',
    postgres: 'INSERT INTO blob_tombstones (sha256, created_at, claimed_until) VALUES (?, ?, 0) ON CONFLICT (sha256) DO NOTHING',
  },
}

/** SQL for blob_leases and blob_tombstones: how a remote store orders uploads and deletions (services/remote-blobs.ts). */
export class BlobLeasesRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      lease: db.prepare(dialect(db, SQL.lease)),
      held: db.pluck<[string, string, number], number>('SELECT 1 FROM blob_leases WHERE upload_id = ? AND sha256 = ? AND expires_at > ?'),
      release: db.prepare('DELETE FROM blob_leases WHERE upload_id = ?'),
      leased: db.pluck<[string, number], number>('SELECT 1 FROM blob_leases WHERE sha256 = ? AND expires_at > ? LIMIT 1'),
      dropExpired: db.prepare('DELETE FROM blob_leases WHERE expires_at <= ?'),
      tombstone: db.prepare(dialect(db, SQL.tombstone)),
      tombstoned: db.pluck<[string], number>('SELECT 1 FROM blob_tombstones WHERE sha256 = ?'),
      claim: db.prepare('UPDATE blob_tombstones SET claimed_until = ? WHERE sha256 = ? AND claimed_until <= ?'),
      unclaim: db.prepare('UPDATE blob_tombstones SET claimed_until = 0 WHERE sha256 = ?'),
      bury: db.prepare('DELETE FROM blob_tombstones WHERE sha256 = ?'),
      claimable: db.pluck<[number, number], string>('SELECT sha256 FROM blob_tombstones WHERE claimed_until <= ? ORDER BY created_at LIMIT ?'),
      count: db.pluck<[], number>('SELECT count(*) FROM blob_tombstones'),
    }
  }

  /** Records that upload `uploadId` is writing `sha256` until `expiresAt` (epoch ms). */
  lease(uploadId: string, sha256: string, expiresAt: number): void {
    this.stmts.lease.run(uploadId, sha256, expiresAt)
  }

  /** True when the upload still holds an unexpired lease on the hash. */
  held(uploadId: string, sha256: string, now: number): boolean {
    return this.stmts.held.get(uploadId, sha256, now) === 1
  }

  release(uploadId: string): void {
    this.stmts.release.run(uploadId)
  }

  /** True when some upload holds an unexpired lease on the hash. */
  leased(sha256: string, now: number): boolean {
    return this.stmts.leased.get(sha256, now) === 1
  }

  /** Leases of uploads that died without releasing them. */
  dropExpired(now: number): number {
    return this.stmts.dropExpired.run(now).changes
  }

  tombstone(sha256: string, now: number): void {
    this.stmts.tombstone.run(sha256, now)
  }

  tombstoned(sha256: string): boolean {
    return this.stmts.tombstoned.get(sha256) === 1
  }

  /** Claims a tombstone nobody holds (or whose holder's claim ran out) until `until`; false when taken. */
  claim(sha256: string, now: number, until: number): boolean {
    return this.stmts.claim.run(until, sha256, now).changes === 1
  }

  /** Gives a claim back (its deletion failed before reaching the store) so the next run retries at once. */
  unclaim(sha256: string): void {
    this.stmts.unclaim.run(sha256)
  }

  /** The object is gone: the hash may be written again. */
  bury(sha256: string): void {
    this.stmts.bury.run(sha256)
  }

  /** Tombstones free to claim, oldest first. */
  claimable(now: number, limit: number): string[] {
    return this.stmts.claimable.all(now, limit)
  }

  count(): number {
    return this.stmts.count.get()!
  }
}
