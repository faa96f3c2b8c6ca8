import type { Logger } from 'pino'
import { loadConfig, type Config } from '../config'
import { createLogger, logFormatFor } from '../lib/logger'
import { ListenError, startServer, type Server } from '../server'
import { explainDataDir, explainListen } from './startup-errors'
import { announceEphemeral, prepareAnnouncement, prepareEphemeral, publishAnnouncement } from './ephemeral'
import {
  awaitPrimaryStop,
  awaitStart,
  DEFAULT_WORKERS,
  isWorker,
  leaveCluster,
  reportReady,
  processTitle,
  runPrimary,
  workerId,
  type WorkerStart,
} from './workers'
import { parse, println, UsageError, type CliIO } from './io'
import { createBuckets, fixtureSettings, hasFixture, persistentTenant, type FixtureSettings } from './fixture'
import { detach, DETACHED_CHILD_ENV } from './detach'
import { SETTLE_AFTER_MS, settleHeap } from '../lib/settle-heap'
import { markStartup, startupTraceLine } from '../lib/startup-trace'
import { shellWord } from '../lib/shell-word'
import { firstRun, needsFirstRun, printBanner } from './first-run'
import { tenantsInSqlite } from '../db/stray-sqlite'

export const SERVE_HELP = `Usage: coffer serve [--detach] [--port PORT] [--s3-port PORT|off] [--s3-sigv2 on|off] [--host HOST] [--data-dir DIR] [--log-level LEVEL] [--log-format auto|json|pretty] [--workers N]
       coffer serve --ephemeral [--detach] [--in-memory [--in-memory-max-bytes N]] [--port PORT] [--s3-port PORT|off] [--host HOST] [--log-level LEVEL]
                    [--write-env PATH] [--json-file PATH] [--bucket NAME[=DIR]]... [fixed keys]

Runs the HTTP API (default port 8080), and the S3 API on a second port (default 9000; off
disables it); with --ephemeral both default to free ports.
Flags override COFFER_* environment variables (see coffer --help).

--ephemeral  A throwaway instance for CI: a temporary data dir (under TMPDIR) removed on exit,
             COFFER_ADMIN_API_KEY or a generated admin key, one tenant with an sk_test_ key, webhooks to loopback
             and private addresses allowed. Once listening it prints exactly one JSON line on
             stdout, {"url","adminApiKey","tenant":{"id","apiKey"},"s3":{"endpoint","region",
             "accessKeyId","secretAccessKey"}}; logs go to stderr. Both ports are free ones
             (never 8080 or 9000) unless --port / --s3-port (COFFER_PORT / COFFER_S3_PORT) say.

Fixed keys and buckets, with --ephemeral or at the first start of a new data dir (a later
start must give the same keys, or it refuses to start; buckets it lacks are created):
--admin-api-key KEY          COFFER_ADMIN_API_KEY (16-512 characters)
--tenant-api-key KEY         COFFER_TENANT_API_KEY (sk_test_ or sk_live_ + 20-100 of A-Z a-z 0-9 _ -)
--s3-access-key-id ID        COFFER_S3_ACCESS_KEY_ID (3-128 of A-Z a-z 0-9 . _ -)
--s3-secret-access-key KEY   COFFER_S3_SECRET_ACCESS_KEY (4-128 of A-Z a-z 0-9 + / = . _ -)
--bucket NAME[=DIR]          repeatable (COFFER_S3_BUCKETS=a,b=DIR): created before ready;
                             =DIR uploads DIR's files, keys = their paths relative to DIR
--write-env PATH             (--ephemeral) AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
                             AWS_DEFAULT_REGION, AWS_ENDPOINT_URL(_S3), COFFER_URL, COFFER_API_KEY,
                             COFFER_PID as NAME=value lines, written atomically (0600) once ready
--json-file PATH             (--ephemeral) the JSON line, written atomically (0600) once ready

--in-memory  (--ephemeral) Everything in RAM, nothing written to disk: the data dir goes on a
             tmpfs (COFFER_IN_MEMORY_DIR, default /dev/shm), and writes that would make it hold
             more than --in-memory-max-bytes N (COFFER_IN_MEMORY_MAX_BYTES; default a quarter of
             the memory) answer 507 InsufficientStorage, before the OOM killer is met.

--detach     Runs the server in the background (its own session) and returns once it is ready,
             printing its JSON line with "pid" added (without --ephemeral: {"url","s3":{"endpoint",
             "region"},"pid"}); its logs go to stderr. Stop it with kill PID. If it fails to
             start, its error is printed and the exit code is not 0; nothing is left running.

--workers N  N processes serving the same ports and data dir (COFFER_WORKERS; default 1: one
             process, no primary); writes meet in SQLite, background jobs run in the one
             worker holding their lease, a worker that dies is replaced (README, Workers).

SIGTERM or SIGINT shuts down gracefully: no new requests, in-flight ones get up to
COFFER_SHUTDOWN_TIMEOUT_SECONDS to finish, then the database closes and the exit code is 0.`

/** What the serve command needs from the process (main.ts owns signals and exit handlers). */
export interface ServeProcess {
  /** Starts listening for stop signals and resolves with the first; `logger` reports a second. */
  waitForStop(logger: Logger): Promise<string>
  /** Runs `fn` however the process ends (the ephemeral data dir goes with it). */
  onExit(fn: () => void): void
  /** How the person can run this coffer again (src/cli/self-command.ts), for the hints in the log. */
  selfCommand(): string
  /** The command and leading arguments that run this same program again (`--detach` starts its child with them). */
  selfInvocation(): { command: string; args: string[] }
}

/** `coffer serve`: runs the server until a stop signal, then shuts it down gracefully. */
export async function serveCommand(args: string[], io: CliIO, proc: ServeProcess): Promise<number> {
  const { values } = parse(args, {
    port: { type: 'string' },
    's3-port': { type: 'string' },
    's3-sigv2': { type: 'string' },
    host: { type: 'string' },
    'data-dir': { type: 'string' },
    'log-level': { type: 'string' },
    'log-format': { type: 'string' },
    'blob-store': { type: 'string' },
    'blob-s3-endpoint': { type: 'string' },
    'blob-s3-bucket': { type: 'string' },
    'blob-s3-region': { type: 'string' },
    'blob-s3-prefix': { type: 'string' },
    ephemeral: { type: 'boolean' },
    // A CI fixture's fixed keys, buckets and output files (#28; src/cli/fixture.ts).
    'admin-api-key': { type: 'string' },
    'tenant-api-key': { type: 'string' },
    's3-access-key-id': { type: 'string' },
    's3-secret-access-key': { type: 'string' },
    bucket: { type: 'string', multiple: true },
    // Not --env-file: Node itself reads that flag wherever it stands, also in the executable
    // (nodejs/node#54232), and exits when the file is not there yet.
    'write-env': { type: 'string' },
    'json-file': { type: 'string' },
    detach: { type: 'boolean' },
    // Everything in RAM (#28; src/cli/ephemeral.ts, src/blobs/memory-budget.ts).
    'in-memory': { type: 'boolean' },
    'in-memory-max-bytes': { type: 'string' },
    workers: { type: 'string' },
    // Metadata in PostgreSQL (#30).
    'database-url': { type: 'string' },
    // What tenants may store: types beyond the spec's six, the quota of new tenants.
    'file-types': { type: 'string' },
    'default-quota-bytes': { type: 'string' },
  })
  const { help, ephemeral, bucket, 'write-env': envFile, 'json-file': jsonFile, detach: detachFlag, 'in-memory': inMemory, ...flags } = values
  if (help) {
    println(io.stdout, SERVE_HELP)
    return 0
  }
  // A worker of `--workers N` (#29): the primary parsed all this already and sends the result.
  if (isWorker()) {
    process.title = processTitle('worker')
    return serveWorker(io, proc)
  }
  // The child started by --detach (src/cli/detach.ts): its logs go to stderr, and it says it is
  // ready with one JSON line on stdout that carries its pid.
  const detachedChild = io.env[DETACHED_CHILD_ENV] === '1'
  if (detachFlag && !detachedChild) {
    const self = proc.selfInvocation()
    return detach({
      command: self.command,
      args: [...self.args, 'serve', ...args.filter((a) => a !== '--detach')],
      env: io.env,
      stdout: io.stdout,
      stderr: io.stderr,
      stopped: proc.waitForStop(createLogger('silent')),
    })
  }
  if (!ephemeral && (envFile !== undefined || jsonFile !== undefined)) throw new UsageError('--write-env and --json-file go with --ephemeral')
  if (!ephemeral && inMemory) throw new UsageError('--in-memory goes with --ephemeral')
  if (!inMemory && flags['in-memory-max-bytes'] !== undefined) throw new UsageError('--in-memory-max-bytes goes with --in-memory')
  // A throwaway instance's metadata goes with its data dir; a shared database would outlive it.
  if (ephemeral && (flags['database-url'] !== undefined || (io.env.COFFER_DATABASE_URL ?? '') !== ''))
    throw new UsageError('--ephemeral keeps its metadata in its temporary data dir: unset COFFER_DATABASE_URL (--database-url)')
  const eph = ephemeral ? prepareEphemeral(io.env, flags, { buckets: bucket, envFile, jsonFile, inMemory }) : undefined
  // However the process ends (clean exit, a crash, a forced exit), the temporary data dir goes too.
  if (eph) proc.onExit(() => eph.remove())
  const config = eph?.config ?? loadConfig(io.env, flags)
  markStartup('configured')
  const fixture = eph ? undefined : fixtureSettings(config, bucket)
  // Ephemeral mode keeps stdout for its one JSON line; the logs go to stderr.
  const logStream = eph || detachedChild ? io.stderr : io.stdout
  const logger = createLogger(config.logLevel, logStream, logFormatFor(config.logFormat, logStream))
  // Listening for signals from the start: one that arrives while starting still shuts down cleanly.
  const stopSignal = proc.waitForStop(logger)
  if (eph?.memoryBudgetBytes !== undefined)
    logger.info({ dataDir: config.dataDir, maxBytes: eph.memoryBudgetBytes }, 'in memory: data dir on a tmpfs, writes past maxBytes refused')
  if (eph && eph.staleRemoved.length > 0) logger.info({ removed: eph.staleRemoved }, 'removed the temporary data dirs of ephemeral instances that are gone')
  if (config.databaseUrl !== undefined) warnSqliteLeftBehind(config, logger)
  const workers = config.workers ?? DEFAULT_WORKERS
  if (workers > 1) {
    return runPrimary({
      workers,
      config,
      logger,
      stopSignal,
      primaryPid: process.pid,
      ...(fixture && hasFixture(fixture) ? { fixture } : {}),
      ...(eph
        ? {
            ephemeral: { adminApiKey: eph.adminApiKey, fixture: eph.fixture },
            // With --detach the line carries the primary's pid, as a single process's does.
            announce: (a) =>
              publishAnnouncement(detachedChild ? { ...a, json: JSON.stringify({ ...JSON.parse(a.json), pid: process.pid }) } : a, eph, io.stdout),
          }
        : {}),
      ...(detachedChild
        ? {
            stderrLogs: true,
            ...(eph
              ? {}
              : {
                  onReady: (r: { url: string; s3Url?: string }) =>
                    println(
                      io.stdout,
                      JSON.stringify({ url: r.url, ...(r.s3Url ? { s3: { endpoint: r.s3Url, region: config.s3Region } } : {}), pid: process.pid }),
                    ),
                }),
          }
        : {}),
    })
  }
  process.title = processTitle('single')
  const server = await start(config, logger, {
    selfCommand: proc.selfCommand(),
    ...(fixture ? { fixture } : {}),
    ...(eph?.memoryBudgetBytes !== undefined ? { memoryBudgetBytes: eph.memoryBudgetBytes } : {}),
    ...(eph ? { throwaway: true } : {}),
  })
  // A new data dir nobody can sign in to gets its first tenant (src/cli/first-run.ts).
  if (!eph && !(fixture && hasFixture(fixture))) await welcome(server, logger, io.stdout)
  const pid = detachedChild ? { pid: process.pid } : {}
  if (eph) {
    try {
      await announceEphemeral(server, eph, io.stdout, pid)
    } catch (err) {
      await server.close()
      throw err
    }
  } else if (detachedChild) {
    const s3 = server.s3 ? { s3: { endpoint: server.s3.url, region: config.s3Region } } : {}
    println(io.stdout, JSON.stringify({ url: server.url, ...s3, ...pid }))
  }
  markStartup('ready')
  const trace = startupTraceLine()
  if (trace !== undefined) println(io.stderr, trace)
  // Start-up's garbage collected once, a moment after the first requests (lib/settle-heap.ts, #29).
  const settle = setTimeout(settleHeap, SETTLE_AFTER_MS)
  const code = await closeOnStop(server, stopSignal, logger, 'signal received')
  clearTimeout(settle)
  return code
}

/**
 * Decision (#30, README "Command line"): a server on PostgreSQL whose data dir still holds a
 * coffer.db with tenants serves (they may have been copied already, the file kept as a fallback),
 * but says at every start, once, that those tenants are not what it serves and how to move them.
 */
function warnSqliteLeftBehind(config: Config, logger: Logger): void {
  const tenants = tenantsInSqlite(config.dataDir)
  if (tenants === 0) return
  logger.warn(
    { dataDir: config.dataDir, tenants },
    `the data dir's coffer.db holds ${tenants} tenant(s) that this server does not serve: its metadata is in PostgreSQL (COFFER_DATABASE_URL). ` +
      `To move them there, stop the servers and run coffer migrate-metadata --to postgres://… --data-dir ${shellWord(config.dataDir)}; to serve coffer.db again, unset COFFER_DATABASE_URL`,
  )
}

/**
 * The first start of a data dir with no tenant and no admin key: creates the tenant "default" and
 * its credentials file, and shows them in a banner when a person is at the terminal (stdout is
 * one). Piped or under systemd only the log line that names the file is written.
 */
async function welcome(server: Server, logger: Logger, out: NodeJS.WritableStream): Promise<void> {
  try {
    if (!needsFirstRun(server)) return
    const f = firstRun(server, logger)
    if (f && (out as { isTTY?: boolean }).isTTY === true) printBanner(out, f)
  } catch (err) {
    await server.close()
    throw err
  }
}

/** Serves until the stop signal, then closes gracefully: the exit code (1 when the close failed). */
async function closeOnStop(server: Server, stopSignal: Promise<string>, logger: Logger, message: string): Promise<number> {
  const signal = await stopSignal
  logger.info({ signal }, message)
  try {
    await server.close()
    return 0
  } catch (err) {
    logger.error({ err }, 'shutdown failed')
    return 1
  }
}

/** startServer, and its failure as one line a person can act on (#13): a port in use, a data dir that cannot be written, … */
async function start(
  config: Config,
  logger: Logger,
  o: { selfCommand: string; fixture?: FixtureSettings; startup?: boolean; memoryBudgetBytes?: number; throwaway?: boolean },
): Promise<Server> {
  const { fixture } = o
  try {
    return await startServer(config, logger, {
      selfCommand: o.selfCommand,
      ...(o.startup !== undefined ? { startup: o.startup } : {}),
      ...(o.memoryBudgetBytes !== undefined ? { memoryBudgetBytes: o.memoryBudgetBytes } : {}),
      ...(o.throwaway ? { throwaway: true } : {}),
      // A persistent data dir's fixture tenant and buckets exist before it listens (#28).
      ...(fixture && hasFixture(fixture)
        ? { beforeListen: async (core) => void (await createBuckets(core, persistentTenant(core, fixture).tenant, fixture.buckets)) }
        : {}),
    })
  } catch (err) {
    throw err instanceof ListenError ? explainListen(err, config.host) : explainDataDir(err, config.dataDir)
  }
}

/**
 * One worker of `--workers N` (#29): the primary's config, the server, `ready` to the primary
 * (with the announcement, for the first worker of an ephemeral instance), then a graceful
 * shutdown when the primary asks for it or a signal reaches this process (Ctrl-C signals the
 * whole process group).
 */
async function serveWorker(io: CliIO, proc: ServeProcess): Promise<number> {
  // Listened for before the start message: a stop the primary sends right behind it (a stop
  // signal while this worker starts) would otherwise reach no listener, and the worker would
  // serve on while the primary waits for it to exit.
  const primaryStop = awaitPrimaryStop()
  const job = await awaitStart()
  try {
    return await runWorker(job, io, proc, primaryStop)
  } finally {
    // Out of the cluster, so that the process exits; the primary then knows it meant to.
    leaveCluster()
  }
}

async function runWorker(job: WorkerStart, io: CliIO, proc: ServeProcess, primaryStop: Promise<string>): Promise<number> {
  const { config } = job
  const logStream = job.stderrLogs ? io.stderr : io.stdout
  const logger = createLogger(config.logLevel, logStream, logFormatFor(config.logFormat, logStream)).child({ worker: workerId() })
  const stopSignal = Promise.race([proc.waitForStop(logger), primaryStop])
  const server = await start(config, logger, { selfCommand: proc.selfCommand(), startup: job.startup, ...(job.fixture ? { fixture: job.fixture } : {}) })
  // The first worker makes a new data dir's first tenant, as one process would; the others serve it.
  if (job.startup && !job.ephemeral && !(job.fixture && hasFixture(job.fixture))) await welcome(server, logger, io.stdout)
  try {
    const announcement = job.ephemeral ? await prepareAnnouncement(server, job.ephemeral, job.primaryPid) : undefined
    reportReady({ url: server.url, ...(server.s3 ? { s3Url: server.s3.url } : {}), ...(announcement ? { announcement } : {}) })
  } catch (err) {
    await server.close()
    throw err
  }
  return closeOnStop(server, stopSignal, logger, 'stopping')
}
