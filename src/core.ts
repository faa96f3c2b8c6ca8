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
import { Quotas } from './services/quotas'
import { GarbageCollector } from './services/gc'
import { WorkspacesService } from './services/workspaces'
import { WebhookDeliveriesService } from './services/webhooks'
import { OutboxRepo } from './db/repos/outbox'
import { FileEvents } from './webhooks/events'
import { WebhookScheduler } from './webhooks/scheduler'
import { deliver } from './webhooks/deliver'
import { systemResolver, type Resolver } from './webhooks/ssrf'
import type { FastifyBaseLogger } from 'fastify'
import { createLogger } from './lib/logger'
import { Metrics } from './lib/metrics'

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
  readonly outbox: OutboxRepo
  readonly webhooks: WebhookScheduler
  /** A tenant's own webhook deliveries (the API's view of the outbox). */
  readonly deliveries: WebhookDeliveriesService
  /** Prometheus metrics; the HTTP layer records requests, the services what they see. */
  readonly metrics: Metrics
  close(): void
}

export interface CoreOptions {
  clock?: Clock
  /** Where background components (the webhook scheduler) log; silent by default (CLI). */
  log?: FastifyBaseLogger
  /** DNS for webhook deliveries; tests inject one. */
  resolve?: Resolver
  /** Wraps the blob store; tests inject faults (a full disk) this way. */
  store?: (disk: BlobStore) => BlobStore
  /** How often the webhook scheduler polls the outbox besides being woken on insert (1 s). */
  webhookPollMs?: number
}

/**
 * Opens the data dir (creating it if needed), its database and the services on top of it.
 * Nothing is started: `serve` starts the webhook scheduler, the CLI never does.
 */
export function createCore(config: Config, options: CoreOptions = {}): Core {
  const clock = options.clock ?? systemClock
  const dataDir = ensureDataDir(config.dataDir)
  const db = openDatabase(dataDir.db, dataDir.root)
  const signer = new TokenSigner(loadSecret(dataDir, config.secret))
  const disk = new DiskBlobStore(dataDir.blobs, dataDir.tmp)
  const store = options.store ? options.store(disk) : disk
  const filesRepo = new FilesRepo(db)
  const blobsRepo = new BlobsRepo(db)
  const workspacesRepo = new WorkspacesRepo(db)
  const outbox = new OutboxRepo(db)
  const events = new FileEvents(outbox, filesRepo, clock)
  const tenants = new TenantsService(db, clock)
  const metrics = new Metrics({ blobs: () => blobsRepo.stats(), outbox: () => outbox.counts() })
  const files = new FilesService(db, filesRepo, workspacesRepo, signer, clock, events)
  const uploads = new UploadsService({
    db,
    clock,
    files: filesRepo,
    workspaces: workspacesRepo,
    blobs: blobsRepo,
    store,
    signer,
    filesService: files,
    quotas: new Quotas(tenants.repo, workspacesRepo),
    events,
    uploadUrlTtlMs: config.uploadUrlTtlSeconds * 1000,
    webhookAllowPrivate: config.webhookAllowPrivate,
    meter: metrics,
  })
  const workspaces = new WorkspacesService(db, workspacesRepo, clock, events)
  const resolve = options.resolve ?? systemResolver
  const webhooks = new WebhookScheduler({
    outbox,
    tenants: tenants.repo,
    clock,
    log: options.log ?? createLogger('silent'),
    ...(options.webhookPollMs !== undefined ? { pollMs: options.webhookPollMs } : {}),
    send: (delivery, signal) => deliver(delivery, { allowPrivate: config.webhookAllowPrivate, resolve, signal }),
  })
  events.onEnqueued(() => webhooks.notify())
  const deliveries = new WebhookDeliveriesService(outbox, clock, () => webhooks.notify())
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
    outbox,
    webhooks,
    deliveries,
    metrics,
    close() {
      if (closed) return
      closed = true
      db.close()
    },
  }
}

