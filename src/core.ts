import type { Config } from './config'
import { openDatabase, type DB } from './db/database'
import { systemClock, type Clock } from './lib/clock'
import { ensureDataDir, loadSecret, type DataDir } from './lib/data-dir'
import { TokenSigner } from './lib/tokens'
import { DiskBlobStore } from './blobs/disk-blob-store'
import type { BlobStore } from './blobs/blob-store'
import { FilesRepo } from './db/repos/files'
import { BlobsRepo } from './db/repos/blobs'
import { WorkspacesRepo } from './db/repos/workspaces'
import { TenantsService } from './services/tenants'
import { FilesService } from './services/files'
import { UploadsService } from './services/uploads'
import { GarbageCollector } from './services/gc'
import { WorkspacesService } from './services/workspaces'
import { cachedFor, Metrics } from './lib/metrics'

/** How stale the blob gauges may be; the sum behind them scans the blobs table. */
const BLOB_STATS_MAX_AGE_MS = 30_000

/** Everything the HTTP layer and the CLI work with, built from one config. */
export interface Core {
  readonly config: Config
  readonly clock: Clock
  readonly dataDir: DataDir
  readonly db: DB
  readonly store: BlobStore
  readonly tenants: TenantsService
  readonly files: FilesService
  readonly uploads: UploadsService
  readonly workspaces: WorkspacesService
  readonly gc: GarbageCollector
  /** Prometheus metrics; the HTTP layer records requests, the services what they see. */
  readonly metrics: Metrics
  close(): void
}

/** Opens the data dir (creating it if needed), its database and the services on top of it. */
export function createCore(config: Config, clock: Clock = systemClock): Core {
  const dataDir = ensureDataDir(config.dataDir)
  const db = openDatabase(dataDir.db, dataDir.root)
  const signer = new TokenSigner(loadSecret(dataDir, config.secret))
  const store = new DiskBlobStore(dataDir.blobs, dataDir.tmp)
  const filesRepo = new FilesRepo(db)
  const blobsRepo = new BlobsRepo(db)
  const workspacesRepo = new WorkspacesRepo(db)
  const tenants = new TenantsService(db, clock)
  const metrics = new Metrics({ blobs: cachedFor(BLOB_STATS_MAX_AGE_MS, clock, () => blobsRepo.stats()) })
  const files = new FilesService(db, filesRepo, workspacesRepo, signer, clock)
  const uploads = new UploadsService({
    db,
    clock,
    files: filesRepo,
    tenants: tenants.repo,
    workspaces: workspacesRepo,
    blobs: blobsRepo,
    store,
    signer,
    filesService: files,
    uploadUrlTtlMs: config.uploadUrlTtlSeconds * 1000,
    meter: metrics,
  })
  const workspaces = new WorkspacesService(db, workspacesRepo, clock)
  const gc = new GarbageCollector({ db, clock, files: filesRepo, blobs: blobsRepo, store, retentionMs: config.deletedRetentionSeconds * 1000 })
  let closed = false
  return {
    config,
    clock,
    dataDir,
    db,
    store,
    tenants,
    files,
    uploads,
    workspaces,
    gc,
    metrics,
    close() {
      if (closed) return
      closed = true
      db.close()
    },
  }
}
