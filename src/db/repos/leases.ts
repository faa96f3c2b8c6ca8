import type { DB } from '../database'
import { engineOf, type Engine } from '../engine'

/** One lease: who holds `name`, until when (epoch ms). */
export interface LeaseRow {
  name: string
  holder: string
  expiresAt: number
}

/**
 * SQL for leases (migration 15, #29): a name held by one holder until it expires. Taking and
 * renewing are the same statement, which PostgreSQL runs as written (#30): the row is inserted,
 * or updated when this holder has it already or its holder let it expire. One statement, so that
 * nodes racing under READ COMMITTED get one holder: a node whose insert meets the row waits for
 * its lock and evaluates the WHERE on its latest version (PostgreSQL's manual, INSERT, "ON
 * CONFLICT DO UPDATE guarantees an atomic INSERT or UPDATE outcome"), where a read and then an
 * upsert would let two nodes both see it expired (test/pg-leases.test.ts). `now` is the taking
 * node's clock: nodes need synchronized clocks (README, "Metadata in PostgreSQL").
 */
export class LeasesRepo {
  private readonly stmts

  constructor(database: DB | Engine) {
    const db = engineOf(database)
    this.stmts = {
      take: db.pluck<[{ name: string; holder: string; now: number; until: number }], string>(
        `INSERT INTO leases (name, holder, expires_at) VALUES (@name, @holder, @until)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
           WHERE leases.holder = excluded.holder OR leases.expires_at <= @now
         RETURNING holder`,
      ),
      release: db.prepare('DELETE FROM leases WHERE name = ? AND holder = ?'),
      get: db.prepare<[string], { name: string; holder: string; expires_at: number }>('SELECT * FROM leases WHERE name = ?'),
      clear: db.prepare('DELETE FROM leases'),
      live: db.pluck<[number], string>('SELECT holder FROM leases WHERE expires_at > ? ORDER BY name'),
    }
  }

  /** Takes `name` for `holder` until `until`, or renews it; false when another holder has it and it has not expired at `now`. */
  take(name: string, holder: string, now: number, until: number): boolean {
    return this.stmts.take.get({ name, holder, now, until }) === holder
  }

  /** Gives `name` up, if `holder` has it. */
  release(name: string, holder: string): void {
    this.stmts.release.run(name, holder)
  }

  get(name: string): LeaseRow | undefined {
    const r = this.stmts.get.get(name)
    return r && { name: r.name, holder: r.holder, expiresAt: r.expires_at }
  }

  /** The holders of the leases unexpired at `now`: a server runs on this database (#30, rotate-key). */
  liveHolders(now: number): string[] {
    return this.stmts.live.all(now)
  }

  /** Every lease: their holders are gone (the server's start, before any worker of it runs). */
  clear(): number {
    return this.stmts.clear.run().changes
  }
}
