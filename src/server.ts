import type { Logger } from 'pino'
import { buildApp } from './app'
import type { Config } from './config'
import { createCore, type Core } from './core'
import { newNodeId } from './lib/data-dir'
import { boundYoungGeneration } from './lib/heap-relief'
import { shellWord } from './lib/shell-word'
import type { App } from './http/types'
import { closeGracefully } from './http/request-lifecycle'
import type { Background } from './lib/background'
import { Periodic } from './lib/periodic'
import { LeasedBackground } from './services/leases'
import { NodeTmp } from './services/node-tmp'
import { buildS3App, type S3App } from './s3/server'
import { markStartup } from './lib/startup-trace'
import { Checkpointer, checkpointOptionsFromEnv, handOffCheckpoints, type CheckpointOptions } from './db/checkpoint'

/**
 * The server runtime: core + HTTP app + background components, started and stopped as one.
 * `coffer serve` (cli/serve.ts) runs it; tests start it directly. No argv, env or signals here.
 */

/** A running server. close() stops accepting, drains in-flight requests and closes the database. */
export interface Server {
  url: string
  app: App
  /** The S3 listener, unless COFFER_S3_PORT=off. */
  s3?: { url: string; app: S3App }
  core: Core
  /** Started once listening, stopped by close(). */
  background: readonly Background[]
  /** The WAL's checkpointer (db/checkpoint.ts), one of `background`; none on a throwaway database. */
  checkpointer?: Checkpointer
  /** Idempotent; resolves once everything is stopped and the database is closed. */
  close(): Promise<void>
}

/**
 * The components that run beside the HTTP server. Each is started once the server listens and
 * stopped on shutdown, before the database closes.
 */
export function backgroundComponents(core: Core, logger: Logger, checkpointer?: Checkpointer): Background[] {
  // Each runs in the one process holding its lease (#29: coffer serve --workers N).
  return [...(checkpointer ? [checkpointer] : []), ...jobs(core, logger)].map(
    (job) => new LeasedBackground(job, core.leases, core.clock, logger, core.config.leaseSeconds * 1000),
  )
}

function jobs(core: Core, logger: Logger): Background[] {
  return [
    core.webhooks,
    new Periodic(
      'sweep-expired-uploads',
      30_000,
      () => {
        const swept = core.uploads.sweepExpired()
        if (swept > 0) logger.info({ swept }, 'abandoned uploads marked failed')
      },
      logger,
    ),
    new Periodic(
      'reclaim-multipart-uploads',
      60_000,
      () => {
        const reclaimed = core.s3.multipart.reclaim()
        if (reclaimed > 0) logger.info({ reclaimed }, 'expired S3 multipart uploads reclaimed')
      },
      logger,
    ),
    new Periodic(
      'lifecycle',
      core.config.s3LifecycleIntervalSeconds * 1000,
      async () => {
        const r = await core.lifecycle.pass()
        if (r.expired + r.noncurrentDeleted + r.markersRemoved + r.uploadsAborted > 0) logger.info(r, 'lifecycle rules applied')
      },
      logger,
    ),
    new Periodic(
      'gc',
      10 * 60_000,
      async () => {
        const r = await core.gc.collect()
        if (r.filesPurged + r.blobsRemoved > 0) logger.info(r, 'garbage collected')
        if (r.storeFailures) logger.warn(r, 'the blob store refused some deletions; they are retried on the next run')
      },
      logger,
    ),
  ]
}

/**
 * A listener could not listen: which one (the JSON API or the S3 front) and on which port, so the
 * person is told the setting that moves it (#24: the S3 port taken was reported as the API's).
 * `cause` is Node's error (its `code` and `syscall`: EADDRINUSE, EACCES, getaddrinfo…).
 */
export class ListenError extends Error {
  override name = 'ListenError'
  constructor(
    readonly listener: 'API' | 'S3',
    readonly port: number,
    override readonly cause: unknown,
  ) {
    super(`the ${listener} listener cannot listen on port ${port}: ${(cause as Error | undefined)?.message ?? String(cause)}`, { cause })
  }
}

export interface StartOptions {
  /** How to run this coffer again (`coffer`, or its full path), for the hints in the log. */
  selfCommand?: string
  /**
   * Runs on the core before the listeners open: what must exist once the server answers (a CI
   * fixture's tenant and buckets, #28). Its failure stops the start-up.
   */
  beforeListen?: (core: Core) => Promise<void>
  /** `--ephemeral --in-memory` (#28): the most bytes its tmpfs data dir may hold (CoreOptions). */
  memoryBudgetBytes?: number
  /** `--ephemeral`: a data dir removed on exit, whose database needs no fsync (CoreOptions). */
  throwaway?: boolean
  /** The metadata in PostgreSQL (CoreOptions.database, #30), over the config's COFFER_DATABASE_URL. */
  database?: { postgres: string }
  /**
   * Whether this process does the start-up clean-up of the data dir (default true): content
   * released before the previous run stopped, and on SQLite its leases and every temp file it left.
   * With --workers N only the first worker does, before the others start (#29). Every start
   * removes the temp files of servers whose lease lapsed, never a live one's (services/node-tmp.ts).
   */
  startup?: boolean
  /** The checkpointer's interval and WAL bound, over those of the environment (db/checkpoint.ts). */
  checkpoint?: Partial<CheckpointOptions>
}

export async function startServer(config: Config, logger: Logger, opts: StartOptions = {}): Promise<Server> {
  // A server's requests outlive a scavenge; the young generation would grow to 128 MiB (heap-relief.ts).
  boundYoungGeneration()
  // Names this server's temp files in tmp/, which other servers on the data dir path leave alone while it lives (#30).
  const node = newNodeId()
  const core = createCore(config, {
    node,
    log: logger,
    ...(opts.memoryBudgetBytes !== undefined ? { memoryBudgetBytes: opts.memoryBudgetBytes } : {}),
    ...(opts.throwaway ? { throwaway: true } : {}),
    ...(opts.database ? { database: opts.database } : {}),
  })
  markStartup('core created')
  // The serving connection's commits checkpoint no more: a thread does, in the process holding
  // its lease (db/checkpoint.ts, #29). A throwaway database (--ephemeral) syncs nothing, so its
  // checkpoints stay SQLite's, in the COMMIT that passes 1000 pages: page writes to the page cache
  // and no fsync, which spares it a thread's memory. COFFER_CHECKPOINT_THREAD=off keeps SQLite's
  // own too, for the bench's before/after in one build (not a setting).
  // On PostgreSQL (core.sqlite undefined) there is no WAL of ours to checkpoint.
  const sqlite = core.sqlite
  const ownCheckpoints = opts.throwaway || process.env.COFFER_CHECKPOINT_THREAD === 'off'
  const checkpointer =
    ownCheckpoints || !sqlite ? undefined : Checkpointer.of(sqlite, core.dataDir.root, { ...checkpointOptionsFromEnv(), ...opts.checkpoint }, logger)
  if (checkpointer && sqlite) handOffCheckpoints(sqlite)
  const startup = opts.startup ?? true
  const nodeTmp = new NodeTmp(node, { leases: core.leases, dataDir: core.dataDir, clock: core.clock, ttlMs: config.leaseSeconds * 1000, log: logger })
  let leftovers: number
  try {
    // On PostgreSQL other nodes hold leases and claims, live (#30): a dead node's lapse instead.
    const alone = startup && core.db.dialect === 'sqlite'
    if (alone) {
      // Their holders are gone with the previous run: its jobs start here at once, not after their leases expire.
      core.leases.clear()
      // So are the claims of the events it was sending (#30): they go out again at once (at-least-once).
      core.outbox.releaseClaims(core.clock.now())
    }
    // Held before the first upload; then what servers that are gone left in tmp/ goes, whatever
    // this start is (a worker replaced while the others serve, a node beside others): only theirs.
    nodeTmp.hold()
    leftovers = nodeTmp.sweep(alone)
  } catch (err) {
    core.close()
    throw err
  }
  if (leftovers > 0) logger.info({ removed: leftovers }, 'removed partial uploads left by a previous run')
  core.metrics.collectProcessMetrics()
  if (core.store.remote) {
    // One call at start: a misconfigured or unreachable store shows in the log at once (the server
    // starts anyway: the store may come up later; /ready says which), and the client's first real
    // request does not pay its set-up (about half a second).
    await core.store.probe().then(
      () => logger.info({ blobStore: core.store.description }, 'blob store reachable'),
      (err: unknown) =>
        logger.warn(
          { blobStore: core.store.description, code: (err as { code?: string }).code },
          'blob store unreachable at start; uploads and downloads answer 503 until it is back',
        ),
    )
  }
  // Content a crash left between a CompleteMultipartUpload's commit and the removal of its parts
  // goes now, not at the first collection ten minutes on (#24).
  const deferred = startup ? await core.gc.releaseDeferred() : { blobs: 0, bytes: 0 }
  if (deferred.blobs > 0) logger.info({ removed: deferred.blobs, bytes: deferred.bytes }, 'removed content released before the previous run stopped')
  markStartup('start-up clean-up')
  const app = await buildApp(core, { logger })
  markStartup('API app built')
  const s3App = config.s3Port === 'off' ? undefined : await buildS3App(core, { logger })
  markStartup('S3 app built')
  const background = backgroundComponents(core, logger, checkpointer)
  let closing: Promise<void> | undefined
  const close = () =>
    (closing ??= (async () => {
      const timeoutMs = config.shutdownTimeoutSeconds * 1000
      logger.info(
        { inFlight: app.inFlightRequests() + (s3App?.inFlightRequests() ?? 0), timeoutMs },
        'shutting down: refusing new requests, finishing those in flight',
      )
      // Background work stops while the requests in flight finish; both before the database closes.
      const stopped = Promise.allSettled(background.map((b) => b.stop()))
      try {
        await Promise.all([closeGracefully(app, timeoutMs, logger), s3App && closeGracefully(s3App, timeoutMs, logger)])
        // Uploads cut off at the timeout still mark their file failed and remove their temp file.
        await core.uploads.settled()
        for (const r of await stopped) if (r.status === 'rejected') logger.error({ err: r.reason }, 'a background component failed to stop')
      } finally {
        // This server's uploads are over: its temp files' lease goes, before the database closes.
        nodeTmp.stop()
        core.close()
      }
      logger.info('shutdown complete')
    })())
  logger.info({ dataDir: config.dataDir }, 'coffer starting')
  // Renewed from here on (seeding may outlast the lease), stopped by close() whatever follows.
  nodeTmp.start()
  try {
    await opts.beforeListen?.(core)
  } catch (err) {
    await close()
    throw err
  }
  markStartup('before listen (buckets)')
  let listening: ListenError['listener'] = 'API'
  try {
    await app.listen({ port: config.port, host: config.host, listenTextResolver: (address) => `coffer listening on ${address}` })
    listening = 'S3'
    if (s3App) await s3App.listen({ port: config.s3Port as number, host: config.host, listenTextResolver: (address) => `coffer S3 listening on ${address}` })
  } catch (err) {
    await close()
    throw new ListenError(listening, listening === 'API' ? config.port : (config.s3Port as number), err)
  }
  markStartup('listening')
  for (const b of background) b.start()
  const addr = app.server.address()
  const port = typeof addr === 'object' && addr ? addr.port : config.port
  const host = config.host.includes(':') ? `[${config.host}]` : config.host
  const url = `http://${host}:${port}`
  const s3Addr = s3App?.server.address()
  const s3 = s3App && typeof s3Addr === 'object' && s3Addr ? { url: `http://${host}:${s3Addr.port}`, app: s3App } : undefined
  if (config.adminApiKey === undefined) {
    logger.warn(
      `admin API disabled: set COFFER_ADMIN_API_KEY (at least 16 characters) to enable it, ` +
        `or create a tenant with: ${opts.selfCommand ?? 'coffer'} tenant create --name NAME --data-dir ${shellWord(config.dataDir)}`,
    )
  }
  return { url, app, core, background, close, ...(s3 ? { s3 } : {}), ...(checkpointer ? { checkpointer } : {}) }
}
