import type { DB } from '../db/database'
import { connectionLost, engineOf, type Engine } from '../db/engine'
import { probeWritable, type DataDir } from '../lib/data-dir'
import type { BlobStore } from '../blobs/blob-store'

export interface Readiness {
  ready: boolean
  database: DatabaseReport
  /** `blobStore` only with a remote store (the disk store is the data dir, checked by `storage`). */
  checks: { database: string; storage: string; blobStore?: string }
}

/** Whether the metadata database answers; on PostgreSQL, a lost or refused connection is `unavailable`. */
export type DatabaseStatus = { ok: true } | { ok: false; check: string }

/**
 * Which metadata database a node runs on and whether it answers (#30), as /health and /ready
 * report it: `sqlite` (the data dir's coffer.db) or `postgres`; never its URL, which may hold a
 * password and names hosts a probe's caller has no business knowing.
 */
export interface DatabaseReport {
  kind: 'sqlite' | 'postgres'
  /** `ok`, or the failed check (`unavailable: 08006`, `failed: …`). */
  status: string
}

export function databaseReport(db: DB | Engine, status: DatabaseStatus): DatabaseReport {
  return { kind: engineOf(db).dialect, status: status.ok ? 'ok' : status.check }
}

/**
 * One `SELECT 1` on the database (#30). On PostgreSQL a lost connection fails it and the bridge
 * connects again on the next statement, so the next check (and request) finds it back by itself
 * once the server answers again. Any other failure is reported too, by its code.
 */
export function databaseStatus(db: DB | Engine): DatabaseStatus {
  try {
    engineOf(db).pluck('SELECT 1').get()
    return { ok: true }
  } catch (err) {
    const code = (err as { code?: unknown }).code
    return { ok: false, check: `${connectionLost(err) ? 'unavailable' : 'failed'}${typeof code === 'string' ? `: ${code}` : ''}` }
  }
}

/** Readiness: the database answers, the data dir accepts a write, and a remote blob store answers. */
export async function readiness(db: DB | Engine, dataDir: DataDir, store: BlobStore): Promise<Readiness> {
  const database = databaseStatus(db)
  const checks: Readiness['checks'] = { database: database.ok ? 'ok' : 'failed', storage: 'ok' }
  const report = databaseReport(db, database)
  try {
    probeWritable(dataDir)
  } catch (err) {
    checks.storage = `failed: ${(err as NodeJS.ErrnoException).code ?? 'error'}`
  }
  if (store.remote) {
    try {
      await store.probe()
      checks.blobStore = 'ok'
    } catch (err) {
      checks.blobStore = `failed: ${(err as { code?: string }).code ?? 'error'}`
    }
  }
  return { ready: Object.values(checks).every((c) => c === 'ok'), database: report, checks }
}
