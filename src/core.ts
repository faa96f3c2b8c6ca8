import type { Config } from './config'
import { openDatabase, type DB } from './db/database'
import { systemClock, type Clock } from './lib/clock'
import { ensureDataDir, loadSecret, type DataDir } from './lib/data-dir'
import { TenantsService } from './services/tenants'

/** Everything the HTTP layer and the CLI work with, built from one config. */
export interface Core {
  readonly config: Config
  readonly clock: Clock
  readonly dataDir: DataDir
  readonly db: DB
  readonly secret: Buffer
  readonly tenants: TenantsService
  close(): void
}

/** Opens the data dir (creating it if needed), its database and the services on top of it. */
export function createCore(config: Config, clock: Clock = systemClock): Core {
  const dataDir = ensureDataDir(config.dataDir)
  const db = openDatabase(dataDir.db, dataDir.root)
  const secret = loadSecret(dataDir, config.secret)
  const tenants = new TenantsService(db, clock)
  let closed = false
  return {
    config,
    clock,
    dataDir,
    db,
    secret,
    tenants,
    close() {
      if (closed) return
      closed = true
      db.close()
    },
  }
}
