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

/**
 * The first key of the two-key advisory locks on a content hash (PostgreSQL; "Coff"): the
 * two-key space is apart from the one-key space of the migration lock (pg/migrate.ts). Locks are
 * per database, not per schema: two schemas' transactions on one hash wait for each other, no more.
 */
const HASH_LOCK_CLASS = 0x436f6666

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
      leasedHashes: db.pluck<[number], string>('SELECT DISTINCT sha256 FROM blob_leases WHERE expires_at > ?'),
      dropExpired: db.prepare('DELETE FROM blob_leases WHERE expires_at <= ?'),
      tombstone: db.prepare(dialect(db, SQL.tombstone)),
      tombstoned: db.pluck<[string], number>('SELECT 1 FROM blob_tombstones WHERE sha256 = ?'),
      claim: db.prepare('UPDATE blob_tombstones SET claimed_until = ? WHERE sha256 = ? AND claimed_until <= ?'),
      unclaim: db.prepare('UPDATE blob_tombstones SET claimed_until = 0 WHERE sha256 = ?'),
      bury: db.prepare('DELETE FROM blob_tombstones WHERE sha256 = ?'),
      claimable: db.pluck<[number, number], string>('SELECT sha256 FROM blob_tombstones WHERE claimed_until <= ? ORDER BY created_at LIMIT ?'),
      count: db.pluck<[], number>('SELECT count(*) FROM blob_tombstones'),
      // SQLite's write transaction excludes every other writer already: nothing to take there.
      lockHash:
        db.dialect === 'postgres'
          ? db.prepare<[string]>(`SELECT pg_advisory_xact_lock(${HASH_LOCK_CLASS}, ('x' || substr(?, 1, 8))::bit(32)::int)`)
          : undefined,
    }
  }

  /**
   * Inside a write transaction, before reading the hash's leases or tombstones: waits for, then
   * holds to the commit, the hash's lock (PostgreSQL, #30). An upload's lease and a collector's
   * tombstone each check for the other and then insert their own; under READ COMMITTED two nodes
   * doing so at once both found nothing and both went on, and the collector deleted the content
   * an acknowledged upload had just written (test/pg-cluster.test.ts: an abort releasing a part's
   * content on one node while another node put the same bytes lost 2 of 48 objects). With the
   * lock, the second transaction's check runs after the first commits, and sees its row.
   */
  lockHash(sha256: string): void {
    this.stmts.lockHash?.run(sha256)
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

  /** Every hash an upload holds an unexpired lease on (uploads in flight: few). */
  leasedHashes(now: number): string[] {
    return this.stmts.leasedHashes.all(now)
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
