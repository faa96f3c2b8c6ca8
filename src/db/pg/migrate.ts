import { SchemaTooNewError } from '../database'
import type { Migration } from '../migrations'
import type { PgBridge } from './bridge'
import { PG_MIGRATIONS } from './migrations'

/**
 * The advisory lock key under which schemas are migrated: any constant both sides agree on, here
 * the first 8 bytes of SHA-256('coffer:migrate') as a signed bigint. Advisory locks are per
 * database, so two Coffers on different databases of one server do not wait for each other.
 */
export const MIGRATE_LOCK_KEY = '2344861562653042021'

/**
 * Brings a PostgreSQL database's schema up to date, once however many nodes start together: each
 * takes the session-level advisory lock first (pg_advisory_lock waits for it), reads the version
 * under it, and applies what is missing, each migration in its own transaction with its
 * schema_migrations row. A node that waited finds the work done and applies nothing. The lock is
 * released however this ends (an error, a migration that fails); a node that dies holding it
 * releases it with its connection. Statements have no time limit here: a migration of a large
 * table may take longer than a request's. Returns the versions this call applied.
 */
/** How long one migration (or the wait for another node's) may take before the bridge gives up on it. */
const MIGRATION_DEADLINE_MS = 60 * 60_000

export function migratePg(bridge: PgBridge, migrations: readonly Migration[] = PG_MIGRATIONS): number[] {
  bridge.exec('SET statement_timeout = 0')
  bridge.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATE_LOCK_KEY], MIGRATION_DEADLINE_MS)
  try {
    bridge.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version    INTEGER PRIMARY KEY,
      name       TEXT NOT NULL,
      applied_at BIGINT NOT NULL
    )`)
    const current = bridge.query('SELECT coalesce(max(version), 0) AS v FROM schema_migrations').rows[0]!.v as number
    const newest = migrations.at(-1)?.version ?? 0
    if (current > newest) throw new SchemaTooNewError(current, newest)
    const applied: number[] = []
    for (const m of migrations) {
      if (m.version <= current) continue
      bridge.transaction(() => {
        bridge.exec(m.sql, MIGRATION_DEADLINE_MS)
        bridge.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()])
      })
      applied.push(m.version)
    }
    return applied
  } finally {
    try {
      bridge.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATE_LOCK_KEY])
      bridge.exec('RESET statement_timeout')
    } catch {
      // The connection is gone, and the lock with it.
    }
  }
}
