import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import { RequestMetrics } from './request-metrics'
import { RecentRequests, type RequestCounts } from './recent-requests'

/** How an upload ended: `completed`, or the lower-cased error code that failed it, or `expired` (swept). */
export type UploadOutcome =
  | 'completed'
  | 'invalid_file_type'
  | 'file_too_large'
  | 'quota_exceeded'
  | 'validation_error'
  | 'insufficient_storage'
  | 'store_unavailable'
  | 'internal_error'
  | 'expired'

/** What the upload service reports; an interface so services stay free of prom-client. */
export interface UploadMeter {
  /** Content bytes read from an upload body, counted as they stream (whatever the outcome). */
  received(bytes: number): void
  /** An upload ended: `completed`, `expired`, or the public error code that failed it. */
  finished(result: string): void
}

const FAILURE_OUTCOMES: ReadonlySet<string> = new Set([
  'invalid_file_type',
  'file_too_large',
  'quota_exceeded',
  'validation_error',
  'insufficient_storage',
  'store_unavailable',
])

/** What a remote blob store reports about each call it makes (an interface: blobs/ stays free of prom-client). */
export interface StoreMeter {
  /** One call to the store: its operation (put, get, head, delete, list, …), duration, and error kind if it failed. */
  storeCall(operation: string, seconds: number, error?: string): void
}

/** The label of an upload's end: a bounded set whatever the service reports. */
export function uploadOutcome(result: string): UploadOutcome {
  if (result === 'completed' || result === 'expired') return result
  const code = result.toLowerCase()
  return (FAILURE_OUTCOMES.has(code) ? code : 'internal_error') as UploadOutcome
}

/** What the gauges read at scrape time. */
export interface MetricSources {
  /** Deduplicated content on disk: what the blobs table records. */
  blobs(): { bytes: number; count: number }
  /**
   * Webhook outbox sizes, read at every scrape. Optional so that tests can build Metrics alone:
   * without a source the gauge has no samples rather than a made-up zero.
   */
  outbox?: () => { pending: number; dead: number }
  /** Wall-clock time for the last minute's request counts (the core's clock); Date.now without one. */
  now?: () => number
  /** Group commit's totals so far (db/group-commit.ts): how many writes share a transaction and a WAL flush (#29). */
  commits?: () => { batches: number; jobs: number; flushes: number; commitSeconds: number; flushSeconds: number }
}

/** Request durations from 5 ms to a minute: uploads of 100 MiB on a slow link take that long. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/**
 * Every Prometheus metric Coffer exposes, on its own registry (never prom-client's global one, so
 * two apps in one test process do not collide). Labels are bounded sets only: route templates,
 * methods, status codes, outcomes; never a URL, an id or a key.
 */
export class Metrics implements UploadMeter, StoreMeter {
  readonly registry = new Registry()
  /** coffer_http_requests_total and coffer_http_request_duration_seconds (request-metrics.ts). */
  private readonly requests = new RequestMetrics(this.registry, DURATION_BUCKETS, {
    counter: 'coffer_http_requests_total',
    counterHelp: 'HTTP responses sent, by method, route template and status code',
    histogram: 'coffer_http_request_duration_seconds',
    histogramHelp: 'Time from request to response, by method, route template and status code',
  })
  readonly storeDuration = new Histogram({
    name: 'coffer_blob_store_operation_seconds',
    help: 'Calls to the remote blob store (S3), by operation, successful or not',
    labelNames: ['operation'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  })
  readonly storeErrors = new Counter({
    name: 'coffer_blob_store_errors_total',
    help: 'Failed calls to the remote blob store (S3), by operation and kind (timeout, unreachable, server, refused)',
    labelNames: ['operation', 'kind'] as const,
    registers: [this.registry],
  })
  private readonly inFlightSources: (() => number)[] = []
  readonly uploadBytes = new Counter({
    name: 'coffer_upload_bytes_total',
    help: 'Content bytes received in upload bodies (bytes in), whatever the outcome',
    registers: [this.registry],
  })
  readonly downloadBytes = new Counter({
    name: 'coffer_download_bytes_total',
    help: 'Content bytes sent by downloads (bytes out)',
    registers: [this.registry],
  })
  readonly uploads = new Counter({
    name: 'coffer_uploads_total',
    help: 'Uploads finished, by outcome: completed, the error code that failed them, or expired',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  })
  private processMetrics = false
  /** The last minute's responses, for the admin overview's rates (#31). */
  private readonly recent: RecentRequests
  /** Responses since start, by class: what the request counter's series add up to, kept as three numbers. */
  private readonly totals: RequestCounts = { requests: 0, clientErrors: 0, serverErrors: 0 }

  constructor(sources: MetricSources) {
    this.recent = new RecentRequests(sources.now ?? Date.now)
    const inFlight = () => this.inFlightSources.reduce((sum, count) => sum + count(), 0)
    new Gauge({
      name: 'coffer_http_requests_in_flight',
      help: 'Requests received whose response is not finished yet',
      registers: [this.registry],
      collect() {
        this.set(inFlight())
      },
    })
    new Gauge({
      name: 'coffer_blob_bytes',
      help: 'Bytes of stored content on disk (identical content counted once)',
      registers: [this.registry],
      collect() {
        this.set(sources.blobs().bytes)
      },
    })
    new Gauge({
      name: 'coffer_blobs',
      help: 'Stored content objects (blobs) on disk',
      registers: [this.registry],
      collect() {
        this.set(sources.blobs().count)
      },
    })
    const commits = sources.commits
    const total = (name: string, help: string, read: (c: NonNullable<ReturnType<NonNullable<MetricSources['commits']>>>) => number) =>
      commits &&
      new Counter({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.reset()
          this.inc(read(commits()))
        },
      })
    total('coffer_group_commit_batches_total', 'Group-commit transactions committed (each a batch of writes)', (c) => c.batches)
    total('coffer_group_commit_writes_total', 'Writes committed by group commit (PutObject, uploads): divided by batches, the batch size', (c) => c.jobs)
    total('coffer_group_commit_flushes_total', 'WAL flushes (fdatasync) of group commit', (c) => c.flushes)
    total('coffer_group_commit_seconds_total', 'Time the event loop spent committing batches (their statements, BEGIN and COMMIT)', (c) => c.commitSeconds)
    total('coffer_group_commit_flush_seconds_total', 'Time a WAL flush of group commit was in progress (in the thread pool)', (c) => c.flushSeconds)
    new Gauge({
      name: 'coffer_webhook_outbox_events',
      help: 'Webhook events in the outbox, by state: pending (to deliver) or dead (gave up)',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const counts = sources.outbox?.()
        if (!counts) return
        this.set({ state: 'pending' }, counts.pending)
        this.set({ state: 'dead' }, counts.dead)
      },
    })
  }

  /** A count the in-flight gauge reads at scrape time: each front (API, S3) adds its own; the gauge is their sum. */
  readInFlight(count: () => number): void {
    this.inFlightSources.push(count)
  }

  /** One finished HTTP request. */
  recordRequest(method: string, route: string, statusCode: number, seconds: number): void {
    this.requests.record(method, route, statusCode, seconds)
    this.recent.record(statusCode)
    this.totals.requests++
    if (statusCode >= 500) this.totals.serverErrors++
    else if (statusCode >= 400) this.totals.clientErrors++
  }

  /** Responses of both fronts since this process started, and over the last minute (the admin overview, #31). */
  requestCounts(): { sinceStart: RequestCounts; lastMinute: RequestCounts } {
    return { sinceStart: { ...this.totals }, lastMinute: this.recent.lastMinute() }
  }

  received(bytes: number): void {
    this.uploadBytes.inc(bytes)
  }

  finished(result: string): void {
    this.uploads.inc({ outcome: uploadOutcome(result) })
  }

  storeCall(operation: string, seconds: number, error?: string): void {
    this.storeDuration.observe({ operation }, seconds)
    if (error !== undefined) this.storeErrors.inc({ operation, kind: error })
  }

  /** Node's own metrics (CPU, memory, event loop lag, GC, handles): for the serving process only. */
  collectProcessMetrics(): void {
    if (this.processMetrics) return
    this.processMetrics = true
    // The event-loop lag is sampled every 100 ms, not prom-client's default 10 ms: at 10 ms the
    // timer woke an idle server ~200 times a second (6 ms of CPU per second doing nothing, and
    // background work that inflated every per-request cost measured on a slow run). A scrape
    // every 15 s still sees 150 samples.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 })
  }
}
