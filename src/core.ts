import type { FastifyBaseLogger } from 'fastify'
import { ConfigError, type Config } from './config'
import { openDatabase, releaseCache, skipSync, type DB } from './db/database'
import { engineOf, type Engine } from './db/engine'
import { bundledSchemaImage } from './db/schema-image'
import { onLoadOver } from './lib/heap-relief'
import { markStartup } from './lib/startup-trace'
import { GroupCommit, commitsFor, type Commits, type SyncFile } from './db/group-commit'
import { FilesRepo } from './db/repos/files'
import { BlobsRepo } from './db/repos/blobs'
import { InlineBlobsRepo } from './db/repos/inline-blobs'
import { WorkspacesRepo } from './db/repos/workspaces'
import { TenantsRepo } from './db/repos/tenants'
import { OutboxRepo } from './db/repos/outbox'
import { DiskBlobStore } from './blobs/disk-blob-store'
import type { S3BlobStore } from './blobs/s3-blob-store'
import { BlobLeasesRepo } from './db/repos/blob-leases'
import { RemoteBlobs } from './services/remote-blobs'
import { BlobWrites } from './services/blob-writes'
import type { BlobStore } from './blobs/blob-store'
import { systemClock, type Clock } from './lib/clock'
import { ensureDataDir, loadSecret, type DataDir } from './lib/data-dir'
import { TokenSigner } from './lib/tokens'
import { createLogger } from './lib/logger'
import { Metrics } from './lib/metrics'
import { TenantsService } from './services/tenants'
import { FilesService } from './services/files'
import { UploadsService } from './services/uploads'
import { UploadRecords } from './services/upload-records'
import { SignedUrls } from './services/signed-urls'
import { Quotas } from './services/quotas'
import { GarbageCollector } from './services/gc'
import { WorkspacesService } from './services/workspaces'
import { WebhooksService } from './services/webhooks'
import { FileEvents } from './webhooks/events'
import { WebhookScheduler } from './webhooks/scheduler'
import { deliver } from './webhooks/deliver'
import { systemResolver, type Resolver } from './webhooks/ssrf'
import { ObjectsRepo } from './db/repos/objects'
import { VersionsRepo } from './db/repos/versions'
import { ObjectVersions } from './services/versions'
import { ObjectLock } from './services/object-lock'
import { ObjectLocksRepo } from './db/repos/object-locks'
import { MultipartRepo } from './db/repos/multipart'
import { S3CredentialsRepo } from './db/repos/s3-credentials'
import { S3CredentialsService } from './services/s3-credentials'
import { createS3Services, type S3Services } from './s3/services'
import { RateBudget } from './lib/rate-budget'
import { DiskReserve } from './lib/disk-reserve'
import { BucketConfigsRepo } from './db/repos/bucket-configs'
import { BucketConfigsService } from './services/bucket-configs'
import { BucketCache } from './services/bucket-cache'
import { BucketChanges } from './db/bucket-changes'
import { MemoryBudget } from './blobs/memory-budget'
import { loadMasterKey } from './lib/encryption-keys'
import { KmsKeyRing, loadKmsKeys } from './lib/kms-keys'
import { SseS3Keys, encryptedStore, openEncryption } from './services/encryption'
import { BucketEncryptionService } from './services/bucket-encryption'
import { BucketCorsService } from './services/bucket-cors'
import { PublicAccessService } from './services/public-access'
import { LeasesRepo } from './db/repos/leases'
import { Leases } from './services/leases'
import { LifecycleService } from './services/lifecycle'
import { BucketLoggingService } from './services/bucket-logging'
import { LifecycleRepo } from './db/repos/lifecycle'
import { FileVersions } from './services/file-versions'
import { OverviewService } from './services/overview'
import { WorkspaceObjects } from './services/workspace-objects'
import { assertSharedSecret } from './services/server-secret'
import { DEFAULT_TENANT_QUOTA, SupportedTypes } from './lib/file-types'

/**
 * The composition root: every service built from one config, for the fronts (HTTP routes, CLI
 * commands) to call. Fronts call services only; `db`, `store`, `dataDir` and `outbox` are here
 * for the server runtime (readiness, start-up clean-up) and for tests that inspect state.
 */
export interface Core {
  readonly config: Config
  readonly clock: Clock
  readonly dataDir: DataDir
  /** The metadata database, SQLite or PostgreSQL (#30): what every repository and service runs on. */
  readonly db: Engine
  /**
   * The SQLite connection behind `db`, for what only SQLite has (the backup's snapshot, PRAGMAs,
   * tests reading rows with better-sqlite3's own API); undefined on PostgreSQL.
   */
  readonly sqlite: DB | undefined
  readonly store: BlobStore
  readonly tenants: TenantsService
  /** The file types the API accepts on this server (COFFER_FILE_TYPES beside the spec's six). */
  readonly fileTypes: SupportedTypes
  readonly files: FilesService
  readonly uploads: UploadsService
  readonly workspaces: WorkspacesService
  /** Blob garbage collection and integrity checks (`coffer gc`, `coffer verify`). */
  readonly gc: GarbageCollector
  /** Webhook deliveries: all of them for operators (`coffer webhooks`), a tenant's own for the API. */
  readonly webhookEvents: WebhooksService
  readonly outbox: OutboxRepo
  readonly webhooks: WebhookScheduler
  /** Prometheus metrics; the HTTP layer records requests, the services what they see. */
  readonly metrics: Metrics
  /** S3 credential pairs of tenants (admin API, CLI, SigV4 lookups). */
  readonly s3Credentials: S3CredentialsService
  /** The S3 front's operations, on the same repositories, blobs and quotas. */
  readonly s3: S3Services
  /** Per-tenant request counters of the rate limit, shared by the API and S3 fronts. */
  readonly rateBudget: RateBudget
  /** The space kept for deletes on a full disk (`<data-dir>/reserve`). */
  readonly reserve: DiskReserve
  /** Buckets' configuration documents (CORS, policy, tags, lifecycle, …), one per family. */
  readonly bucketConfigs: BucketConfigsService
  /** Buckets' default encryption, and whether the data dir seals every blob (SSE-S3, #27). */
  readonly bucketEncryption: BucketEncryptionService
  /** SSE-KMS's key ring (COFFER_KMS_KEYS_FILE; empty when unset, #27). */
  readonly kms: KmsKeyRing
  /** Coffer's own SSE-S3 key (#27): seals objects asking for SSE-S3 when there is no master key. */
  readonly sseS3: SseS3Keys
  /** Buckets' CORS rules (the 'cors' configuration document) and their matching. */
  readonly bucketCors: BucketCorsService
  /** What buckets make public: canned ACLs, policies, public access blocks (#26). */
  readonly publicAccess: PublicAccessService
  /** Named leases in the database: which worker runs a background job, who completes an upload (#29). */
  readonly leases: Leases
  /** S3 object lock (#25): buckets' lock configuration, versions' retention and legal hold. */
  readonly objectLock: ObjectLock
  /** Buckets' lifecycle rules and the pass that applies them (#25). */
  readonly lifecycle: LifecycleService
  /** Buckets' server access logging configurations (the 'logging' configuration document). */
  readonly bucketLogging: BucketLoggingService
  /** A file's versions through the API and the console: list, restore, deleted keys (#25). */
  readonly fileVersions: FileVersions
  /** The admin overview (#31): version, uptime, disk, blobs, request rates, webhook backlog, usage. */
  readonly overview: OverviewService
  /** A workspace as the bucket browser sees it (#31): objects by prefix, one object's details, delete when empty. */
  readonly workspaceObjects: WorkspaceObjects
  close(): void
}

export interface CoreOptions {
  clock?: Clock
  /** Where background components (the webhook scheduler) log; silent by default (CLI). */
  log?: FastifyBaseLogger
  /** DNS for webhook deliveries; tests inject one. */
  resolve?: Resolver
  /** Wraps the blob store (disk or S3, as configured); tests inject faults (a full disk, a failing read) this way. */
  store?: (store: BlobStore) => BlobStore
  /** How often the webhook scheduler polls the outbox besides being woken on insert (1 s). */
  webhookPollMs?: number
  /** How the group commit flushes the WAL; tests inject a slow or failing one. */
  walSync?: SyncFile
  /**
   * `serve --ephemeral --in-memory` (#28): the data dir is on a tmpfs, and writes that would make
   * it hold more than this many bytes are refused (blobs/memory-budget.ts).
   */
  memoryBudgetBytes?: number
  /**
   * `serve --ephemeral` (#28): the data dir is removed when the process ends and never reopened,
   * so its database skips fsyncs (no power loss can matter to it); see db/database.ts.
   */
  throwaway?: boolean
  /**
   * The metadata in PostgreSQL (#30) instead of the data dir's SQLite file, over the config's
   * COFFER_DATABASE_URL (tests set it here: COFFER_TEST_DATABASE=postgres).
   */
  database?: { postgres: string }
  /**
   * A server's node id (#30): the names of the temp files its stores make start with it, so that
   * servers sharing the data dir path remove only what a server that is gone left in tmp/
   * (services/node-tmp.ts). Absent (CLI commands): no prefix.
   */
  node?: string
}

/**
 * Opens the data dir (creating it if needed), its database and the services on top of it.
 * Nothing is started: `serve` starts the webhook scheduler, the CLI never does.
 */
export function createCore(config: Config, options: CoreOptions = {}): Core {
  const clock = options.clock ?? systemClock
  const dataDir = ensureDataDir(config.dataDir)
  markStartup('data dir and key')
  const metadata = openMetadata(dataDir, config, options)
  const { sqlite } = metadata
  // On SQLite every component gets the better-sqlite3 connection itself, as before #30 (its engine
  // is engineOf(sqlite)); on PostgreSQL, the engine over the bridge.
  const db: DB | Engine = sqlite ?? metadata.engine
  markStartup('database opened and migrated')
  // Once a load is over, SQLite's page cache (up to 16 MB, better-sqlite3's cache_size) goes back
  // to the allocator; the next reads fill it again from the OS's page cache (#29). PostgreSQL's
  // cache is the server's: this process holds none.
  const stopShrinking = sqlite ? onLoadOver(() => releaseCache(sqlite)) : () => {}
  const serverSecret = loadSecret(dataDir, config.secret)
  // Every node of one PostgreSQL database signs and seals with one secret, or refuses to start (#30).
  if (metadata.engine) {
    try {
      assertSharedSecret(metadata.engine, serverSecret, clock.now())
    } catch (err) {
      metadata.close()
      throw err
    }
  }
  // Written before anything else can fill the disk; a delete on a full disk may need it (#24).
  const reserve = new DiskReserve(dataDir.reserve, config.diskReserveBytes, options.log ?? createLogger('silent'))
  reserve.ensure()
  const metrics = new Metrics({ blobs: () => blobsRepo.stats(), outbox: () => outbox.counts(), now: () => clock.now(), commits: () => commits.stats })
  // Small blobs live in the database on the disk store only; the S3 store's staging area keeps
  // every staged body in a file, which it uploads from.
  // A server's temp files carry its node id (StartOptions.node, services/node-tmp.ts, #30).
  const tmpPrefix = options.node === undefined ? '' : `${options.node}.`
  const s3Store = config.blobStore === 's3' ? createS3Store(config, new DiskBlobStore(dataDir.blobs, dataDir.tmp, undefined, tmpPrefix), metrics) : undefined
  const disk = createDiskStore(db, dataDir, tmpPrefix)
  const encryption = startEncryption(db, config, clock, metadata.close)
  const kms = startKms(config, metadata.close)
  // The master key was read and checked by startEncryption just above.
  const sseS3 = new SseS3Keys(db, encryption ? loadMasterKey(config) : undefined, () => clock.now())
  // Sealed inside any test wrapper: faults injected into the store see what callers see.
  const sealed = encryption ? encryptedStore(db, s3Store ?? disk, encryption.keys, encryption.repo) : (s3Store ?? disk)
  // The in-memory budget counts what is stored, sealed or not (#28).
  const budget = options.memoryBudgetBytes
  const chosen =
    budget === undefined ? sealed : new MemoryBudget(sealed, budget, () => blobsRepo.stats().bytes, sqlite ? [dataDir.db, `${dataDir.db}-wal`] : [])
  const store = options.store ? options.store(chosen) : chosen

  const filesRepo = new FilesRepo(db)
  const blobsRepo = new BlobsRepo(db)
  const workspacesRepo = new WorkspacesRepo(db)
  const tenantsRepo = new TenantsRepo(db)
  const outbox = new OutboxRepo(db)
  const remote = store.remote
    ? new RemoteBlobs({ db, clock, leases: new BlobLeasesRepo(db), blobs: blobsRepo, store, timeoutMs: config.blobS3TimeoutSeconds * 1000 })
    : undefined
  const writes = new BlobWrites({ db, clock, blobs: blobsRepo, store, ...(remote ? { remote } : {}) })

  const versionsRepo = new VersionsRepo(db)
  const events = new FileEvents(outbox, filesRepo, workspacesRepo, clock, versionsRepo)
  // A bucket's workspace, versioning and documents, read once and kept across requests (#29).
  // On PostgreSQL, which has no data_version, the cache keeps nothing: every call reads the rows,
  // so another node's change is seen by the next request (bucket-cache.ts).
  const bucketChanges = sqlite ? new BucketChanges(sqlite) : undefined
  const bucketConfigsRepo = new BucketConfigsRepo(db)
  const bucketCache = new BucketCache({ workspaces: workspacesRepo, versions: versionsRepo, configs: bucketConfigsRepo }, bucketChanges)
  const versions = new ObjectVersions({ db, clock, versions: versionsRepo, files: filesRepo, events, cache: bucketCache })
  const bucketConfigs = new BucketConfigsService(bucketConfigsRepo, clock, bucketCache)
  const publicAccess = new PublicAccessService(bucketConfigs, config.s3BlockPublicAccess)
  const objectLock = new ObjectLock({ db, clock, locks: new ObjectLocksRepo(db), versions: versionsRepo, configs: bucketConfigs })
  // A deleted tenant has no signing generation: it verifies no token (#13).
  const signer = new TokenSigner(serverSecret, (tenantId) => tenantsRepo.signingGeneration(tenantId))
  const fileTypes = new SupportedTypes(config.fileTypes)
  const tenants = new TenantsService(
    db,
    tenantsRepo,
    clock,
    { files: filesRepo, workspaces: workspacesRepo, outbox, objectLock },
    { fileTypes, defaultQuotaBytes: config.defaultQuotaBytes ?? DEFAULT_TENANT_QUOTA },
  )
  const urls = new SignedUrls(signer, filesRepo, clock)
  const quotas = new Quotas(tenantsRepo, workspacesRepo)
  const workspaces = new WorkspacesService(db, workspacesRepo, filesRepo, clock, events, config.webhookAllowPrivate, objectLock)
  const files = new FilesService(db, filesRepo, workspaces, urls, clock, events, reserve, versions)
  // PostgreSQL: each unit its own transaction (EngineCommits; README, "no group commit of our own").
  const commits: Commits = sqlite ? new GroupCommit(sqlite, options.throwaway ? async () => {} : options.walSync, bucketChanges) : commitsFor(db)
  // The tenant, keys and buckets an ephemeral start writes next need no fsync either.
  if (options.throwaway && sqlite) skipSync(sqlite)
  const leases = new Leases(new LeasesRepo(db), commits, clock, process.pid)
  const objectsRepo = new ObjectsRepo(db)
  const bucketEncryption = new BucketEncryptionService(bucketConfigs, encryption !== undefined, { kms, sseS3 })
  const records = new UploadRecords({
    db,
    commits,
    clock,
    files: filesRepo,
    workspaces: workspacesRepo,
    quotas,
    events,
    versions,
    objects: objectsRepo,
  })
  const uploads = new UploadsService({
    clock,
    records,
    workspaces,
    quotas,
    store,
    writes,
    urls,
    settings: { uploadUrlTtlMs: config.uploadUrlTtlSeconds * 1000, webhookAllowPrivate: config.webhookAllowPrivate, fileTypes },
    meter: metrics,
    encryption: bucketEncryption,
  })
  const resolve = options.resolve ?? systemResolver
  const webhooks = new WebhookScheduler({
    outbox,
    tenants: tenantsRepo,
    clock,
    log: options.log ?? createLogger('silent'),
    ...(options.webhookPollMs !== undefined ? { pollMs: options.webhookPollMs } : {}),
    send: (delivery, signal) => deliver(delivery, { allowPrivate: config.webhookAllowPrivate, resolve, signal }),
  })
  events.onEnqueued(() => webhooks.notify())
  const gc = new GarbageCollector({
    db,
    clock,
    files: filesRepo,
    blobs: blobsRepo,
    store,
    tenants,
    retentionMs: config.deletedRetentionSeconds * 1000,
    writes,
    reserve,
    keys: { kms, sseS3 },
  })
  const fileVersions = new FileVersions({
    db,
    clock,
    files: filesRepo,
    objects: objectsRepo,
    versions: versionsRepo,
    objectVersions: versions,
    workspaces: workspacesRepo,
    workspacesService: workspaces,
    quotas,
    objectLock,
    events,
  })
  const s3Credentials = new S3CredentialsService(
    db,
    new S3CredentialsRepo(db),
    tenantsRepo,
    clock,
    serverSecret,
    () => tenants.authChanges(),
    bucketChanges && (() => bucketChanges.version()),
  )
  const s3 = createS3Services({
    db,
    commits,
    clock,
    store,
    writes,
    workspaces: workspacesRepo,
    buckets: bucketCache,
    objects: objectsRepo,
    multipart: new MultipartRepo(db),
    blobs: blobsRepo,
    files: filesRepo,
    events,
    quotas,
    versions,
    objectLock,
    region: config.s3Region,
    maxObjectBytes: config.s3MaxObjectBytes,
    multipartTtlMs: config.s3MultipartTtlSeconds * 1000,
    reserve,
    leases,
  })
  const lifecycle = new LifecycleService({
    db,
    clock,
    configs: bucketConfigs,
    repo: new LifecycleRepo(db),
    versions,
    reserve,
    abortUpload: (id) => s3.multipart.abortInTx(id),
    dayMs: config.s3LifecycleDaySeconds * 1000,
  })
  let closed = false
  return {
    config,
    clock,
    dataDir,
    db: engineOf(db),
    sqlite,
    store,
    tenants,
    fileTypes,
    files,
    uploads,
    workspaces,
    gc,
    webhookEvents: new WebhooksService(outbox, clock, () => webhooks.notify()),
    outbox,
    webhooks,
    metrics,
    s3Credentials,
    s3,
    rateBudget: new RateBudget(),
    reserve,
    bucketConfigs,
    bucketEncryption,
    kms,
    sseS3,
    bucketCors: new BucketCorsService(bucketConfigs),
    publicAccess,
    leases,
    objectLock,
    lifecycle,
    bucketLogging: new BucketLoggingService(bucketConfigs),
    fileVersions,
    overview: new OverviewService({
      clock,
      dataDir: dataDir.root,
      blobStore: config.blobStore,
      fileTypes,
      blobs: blobsRepo,
      outbox,
      tenants,
      metrics,
    }),
    workspaceObjects: new WorkspaceObjects({ db, objects: objectsRepo, files: filesRepo, workspaces, versions, objectLock, publicAccess }),
    close() {
      if (closed) return
      closed = true
      stopShrinking()
      s3Store?.close()
      commits.close()
      metadata.close()
    },
  }
}

/** The metadata database createCore runs on: the data dir's SQLite file, or PostgreSQL (CoreOptions.database). */
type Metadata = { sqlite: DB; engine?: undefined; close: () => void } | { sqlite: undefined; engine: Engine; close: () => void }

function openMetadata(dataDir: DataDir, config: Config, options: CoreOptions): Metadata {
  const postgres = options.database?.postgres ?? config.databaseUrl
  if (postgres === undefined) {
    const sqlite = openDatabase(dataDir.db, dataDir.root, undefined, { image: bundledSchemaImage, ...(options.throwaway ? { throwaway: true } : {}) })
    return { sqlite, close: () => sqlite.close() }
  }
  // Required here, not imported at the top: a start on SQLite evaluates none of the bridge's
  // modules and starts no thread (test/fixture-footprint.test.ts).
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { PgBridge } = require('./db/pg/bridge') as typeof import('./db/pg/bridge')
  const { PgEngine } = require('./db/pg/engine') as typeof import('./db/pg/engine')
  const { migratePg } = require('./db/pg/migrate') as typeof import('./db/pg/migrate')
  /* eslint-enable @typescript-eslint/no-require-imports */
  const bridge = new PgBridge({ url: postgres })
  try {
    // Under the advisory lock: nodes starting together migrate once (pg/migrate.ts).
    migratePg(bridge)
  } catch (err) {
    bridge.close()
    throw err
  }
  return { sqlite: undefined, engine: new PgEngine(bridge), close: () => bridge.close() }
}

/**
 * The data dir's encryption at rest (#27), or undefined: a missing or wrong master key is a
 * ConfigError, printed as one line, and nothing starts (the database is closed again).
 */
export function startEncryption(db: DB | Engine, config: Config, clock: Clock, close: () => void): ReturnType<typeof openEncryption> {
  try {
    return openEncryption(db, loadMasterKey(config), clock.now())
  } catch (err) {
    close()
    throw new ConfigError(`encryption: ${(err as Error).message}`, { cause: err })
  }
}

/** SSE-KMS's key ring (#27): an unreadable or malformed COFFER_KMS_KEYS_FILE is a ConfigError, and nothing starts. */
function startKms(config: Config, close: () => void): KmsKeyRing {
  try {
    return loadKmsKeys(config)
  } catch (err) {
    close()
    throw new ConfigError(`kms: ${(err as Error).message}`, { cause: err })
  }
}

/** The disk store of a data dir, with small blobs inline in its database (DiskBlobStore). */
export function createDiskStore(db: DB | Engine, dataDir: DataDir, tmpPrefix = ''): DiskBlobStore {
  return new DiskBlobStore(dataDir.blobs, dataDir.tmp, new InlineBlobsRepo(db), tmpPrefix)
}

/**
 * The S3 store a config describes, staging in `staging`'s tmp dir (createCore; `coffer migrate-blobs`,
 * which needs both stores whichever one COFFER_BLOB_STORE names).
 */
export function createS3Store(config: Config, staging: DiskBlobStore, meter?: Metrics): S3BlobStore {
  const { blobS3AccessKeyId: accessKeyId, blobS3SecretAccessKey: secretAccessKey } = config
  if (config.blobS3Bucket === undefined) throw new ConfigError('invalid configuration: the S3 store needs COFFER_BLOB_S3_BUCKET')
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new ConfigError('invalid configuration: set both COFFER_BLOB_S3_ACCESS_KEY_ID and COFFER_BLOB_S3_SECRET_ACCESS_KEY, or neither')
  }
  // Loaded here, not at the top: the AWS SDK is a fifth of the bundle and its modules take ~100 ms
  // to evaluate, which every start of a disk-store server (the default) would pay (#15 cold start).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { S3BlobStore: Store } = require('./blobs/s3-blob-store') as typeof import('./blobs/s3-blob-store')
  return new Store({
    ...(config.blobS3Endpoint !== undefined ? { endpoint: config.blobS3Endpoint } : {}),
    bucket: config.blobS3Bucket,
    region: config.blobS3Region,
    ...(accessKeyId !== undefined && secretAccessKey !== undefined ? { credentials: { accessKeyId, secretAccessKey } } : {}),
    prefix: config.blobS3Prefix ?? '',
    forcePathStyle: config.blobS3ForcePathStyle,
    timeoutMs: config.blobS3TimeoutSeconds * 1000,
    ...(meter ? { meter } : {}),
    staging,
  })
}
