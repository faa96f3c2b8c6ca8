import { ping, type DB } from '../db/database'
import { probeWritable, type DataDir } from '../lib/data-dir'

export interface Readiness {
  ready: boolean
  checks: { database: string; storage: string }
}

/** Readiness: the database answers and the data dir accepts a write. */
export function readiness(db: DB, dataDir: DataDir): Readiness {
  const checks = { database: 'ok', storage: 'ok' }
  try {
    ping(db)
  } catch {
    checks.database = 'failed'
  }
  try {
    probeWritable(dataDir)
  } catch (err) {
    checks.storage = `failed: ${(err as NodeJS.ErrnoException).code ?? 'error'}`
  }
  return { ready: checks.database === 'ok' && checks.storage === 'ok', checks }
}
