import cluster, { type Worker } from 'node:cluster'
import type { Logger } from 'pino'
import type { Config } from '../config'
import type { Announcement } from './ephemeral'
import type { FixtureSettings } from './fixture'

/**
 * `coffer serve --workers N` (#29): N processes (node:cluster) serving the same API and S3 ports
 * over the same data dir. The primary serves nothing and opens no database: it starts the
 * workers, tells a person (and a CI script) once when all of them are ready, starts another when
 * one dies, and stops them all on a stop signal. What the workers share goes through the
 * database (README, Workers).
 */

/** The primary's instructions to a worker it started. */
export interface WorkerStart {
  type: 'coffer:start'
  config: Config
  /** Whether this worker does the start-up clean-up (StartOptions.startup): the first one only. */
  startup: boolean
  /** A persistent data dir's fixture tenant and buckets (#28), made by the first worker before it listens. */
  fixture?: FixtureSettings
  /** --ephemeral: the first worker makes the tenant and buckets and sends back the announcement. */
  ephemeral?: { adminApiKey: string; fixture: FixtureSettings }
  /** Logs on stderr: an ephemeral instance's stdout is its one JSON line. */
  stderrLogs: boolean
  /** The primary's pid, the one to signal (COFFER_PID). */
  primaryPid: number
}

/** A worker listens: where, and (the first worker of an ephemeral instance) what to announce. */
export interface WorkerReady {
  type: 'coffer:ready'
  url: string
  s3Url?: string
  announcement?: Announcement
}

/**
 * How many processes `serve` runs when COFFER_WORKERS / --workers is unset: one. A newcomer's
 * first server, a CI fixture and a small box are served best by one process (its idle memory is
 * a third of a primary with a worker per core on two cores); more workers are asked for.
 */
export const DEFAULT_WORKERS = 1

/** The name `ps` and `top` show: Coffer and the process's role (comm keeps its first 15 characters). */
export function processTitle(role: 'single' | 'primary' | 'worker'): string {
  return role === 'single' ? 'coffer' : role === 'primary' ? 'coffer: primary' : `coffer: worker ${cluster.worker?.id ?? '?'}`
}

export function isWorker(): boolean {
  return cluster.isWorker
}

/** In a worker: the primary's start message (the config and the worker's part). */
export function awaitStart(): Promise<WorkerStart> {
  return new Promise((resolve) => {
    const on = (m: unknown) => {
      if ((m as { type?: string } | null)?.type !== 'coffer:start') return
      process.off('message', on)
      resolve(m as WorkerStart)
    }
    process.on('message', on)
  })
}

/** In a worker: resolves when the primary asks it to stop (it got a stop signal). */
export function awaitPrimaryStop(): Promise<string> {
  return new Promise((resolve) => {
    const on = (m: unknown) => {
      if ((m as { type?: string } | null)?.type !== 'coffer:stop') return
      process.off('message', on)
      resolve('primary')
    }
    process.on('message', on)
    // A primary that is gone (killed, or exited while this worker was starting) cannot stop it:
    // a worker never outlives it.
    process.once('disconnect', () => resolve('primary gone'))
  })
}

/** In a worker: tells the primary it listens. */
export function reportReady(ready: Omit<WorkerReady, 'type'>): void {
  process.send?.({ type: 'coffer:ready', ...ready } satisfies WorkerReady)
}

/** In a worker that has shut down: leaves the cluster, so the process can exit. */
export function leaveCluster(): void {
  if (cluster.worker?.isConnected()) cluster.worker.disconnect()
}

/** The id of this worker (1, 2, … in the order the primary started them, restarts included). */
export function workerId(): number | undefined {
  return cluster.worker?.id
}

export interface PrimaryOptions {
  workers: number
  config: Config
  logger: Logger
  /** Resolves with the first stop signal. */
  stopSignal: Promise<string>
  fixture?: FixtureSettings
  ephemeral?: { adminApiKey: string; fixture: FixtureSettings }
  /** Publishes an ephemeral instance's announcement once every worker is ready. */
  announce?: (a: Announcement) => void
  /** Called once every worker is ready (`--detach` prints its JSON line then). */
  onReady?: (r: { url: string; s3Url?: string }) => void
  /** Workers log to stderr (ephemeral instances, and --detach, whose stdout carries the ready line). */
  stderrLogs?: boolean
  primaryPid: number
}

/** A replacement is started at once, unless workers keep dying young: then after a growing pause (at most 30 s). */
const YOUNG_MS = 10_000

/** Runs the primary until a stop signal; resolves with the exit code. */
export async function runPrimary(o: PrimaryOptions): Promise<number> {
  const { logger } = o
  process.title = processTitle('primary')
  let stopping = false
  /** Once every worker of the start was ready: before that, a worker that exits stops the start. */
  let serving = false
  const live = new Set<Worker>()
  let failures = 0
  let restartTimer: NodeJS.Timeout | undefined

  const start = (startup: boolean, extra: Pick<WorkerStart, 'fixture' | 'ephemeral'> = {}) => {
    const worker = cluster.fork()
    live.add(worker)
    const startedAt = Date.now()
    const message: WorkerStart = {
      type: 'coffer:start',
      config: o.config,
      startup,
      primaryPid: o.primaryPid,
      stderrLogs: o.stderrLogs ?? o.ephemeral !== undefined,
      ...extra,
    }
    worker.once('online', () => worker.send(message))
    const ready = new Promise<WorkerReady>((resolve, reject) => {
      worker.on('message', (m: unknown) => {
        if ((m as { type?: string } | null)?.type === 'coffer:ready') resolve(m as WorkerReady)
      })
      worker.once('exit', (code, signal) => reject(Object.assign(new Error('worker exited before it was ready'), { code, signal })))
    })
    ready.catch(() => undefined)
    worker.once('exit', (code, signal) => {
      live.delete(worker)
      if (stopping || !serving) return
      const young = Date.now() - startedAt < YOUNG_MS
      failures = young ? failures + 1 : 0
      // A worker that exited cleanly was stopped by a signal of its own, which a stop of the whole
      // service (Ctrl-C, `pkill coffer`) also sends the primary: a moment for that signal to arrive
      // before it is replaced, so that a stopping service does not start new workers.
      const delayMs = Math.max(code === 0 && signal === null ? 1000 : 0, failures <= 1 ? 0 : Math.min(30_000, 500 * 2 ** (failures - 2)))
      // Nothing acknowledged is lost with it (every acknowledged write was durable first); its
      // requests in flight failed, its background jobs move to another worker when its leases expire.
      logger.error({ worker: worker.id, pid: worker.process.pid, code, signal, restartInMs: delayMs }, 'worker died: starting another')
      restartTimer = setTimeout(() => {
        if (stopping) return
        const replacement = start(false)
        replacement.ready.then(
          (r) => logger.info({ worker: replacement.worker.id, url: r.url }, 'replacement worker ready'),
          () => undefined,
        )
      }, delayMs)
    })
    return { worker, ready }
  }

  const stopAll = async (): Promise<number> => {
    stopping = true
    clearTimeout(restartTimer)
    const codes = await Promise.all(
      [...live].map(
        (w) =>
          new Promise<number>((resolve) => {
            w.once('exit', (code) => resolve(code ?? 1))
            if (w.isConnected()) w.send({ type: 'coffer:stop' })
            else w.process.kill('SIGTERM')
          }),
      ),
    )
    return codes.every((c) => c === 0) ? 0 : 1
  }

  const stopped = o.stopSignal.then((signal) => {
    logger.info({ signal }, 'signal received')
    return signal
  })
  const untilStop = <T>(p: Promise<T>) => Promise.race([p.then((value) => ({ value })), stopped.then(() => undefined)])

  logger.info({ workers: o.workers, dataDir: o.config.dataDir }, 'coffer starting workers')
  let first: WorkerReady
  let rest: WorkerReady[]
  try {
    // The first worker migrates the database, cleans up after the previous run and makes the
    // fixture, before any other serves (StartOptions.startup).
    const one = await untilStop(start(true, { ...(o.fixture ? { fixture: o.fixture } : {}), ...(o.ephemeral ? { ephemeral: o.ephemeral } : {}) }).ready)
    if (!one) return await stopAll()
    first = one.value
    const others = await untilStop(Promise.all(Array.from({ length: o.workers - 1 }, () => start(false).ready)))
    if (!others) return await stopAll()
    rest = others.value
  } catch (err) {
    // The worker has said why on stderr (one line, as `coffer serve` alone does); its code is ours.
    const code = (err as { code?: number | null }).code
    await stopAll()
    return typeof code === 'number' && code !== 0 ? code : 1
  }
  serving = true
  logger.info(
    { workers: o.workers, url: first.url, ...(first.s3Url ? { s3: first.s3Url } : {}), ready: 1 + rest.length },
    `coffer ready: ${o.workers} workers listening on ${first.url}`,
  )
  if (first.announcement) o.announce?.(first.announcement)
  o.onReady?.({ url: first.url, ...(first.s3Url ? { s3Url: first.s3Url } : {}) })
  await stopped
  const code = await stopAll()
  logger.info({ code }, 'shutdown complete')
  return code
}
