import fs from 'node:fs'
import { openConnection, type DB } from './database'
import { dataDirPaths } from '../lib/data-dir'

/**
 * The live tenants of a data dir's coffer.db, read by a server whose metadata is in PostgreSQL
 * (#30) and which therefore never sees them: a person who set COFFER_DATABASE_URL on a data dir
 * served before would otherwise find an empty service and think the data lost (cli/serve.ts
 * warns). Opened read-only and closed at once; a file that is missing, not a database or not
 * migrated counts 0: there is nothing there to point at.
 */
export function tenantsInSqlite(dataDir: string): number {
  const file = dataDirPaths(dataDir).db
  if (!fs.existsSync(file)) return 0
  let db: DB | undefined
  try {
    db = openConnection(file, dataDir, { readonly: true, fileMustExist: true })
    return Number(db.prepare('SELECT count(*) FROM tenants WHERE deleted_at IS NULL').pluck().get())
  } catch {
    return 0
  } finally {
    db?.close()
  }
}
