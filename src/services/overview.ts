import { version } from '../../package.json'
import type { BlobsRepo } from '../db/repos/blobs'
import type { OutboxRepo } from '../db/repos/outbox'
import type { TenantsService, TenantUsage } from './tenants'
import { isoTime, type Clock } from '../lib/clock'
import { diskSpace } from '../lib/data-dir'
import type { SupportedTypes } from '../lib/file-types'
import type { RequestCounts } from '../lib/recent-requests'
import { RecentRequests } from '../lib/recent-requests'

/** What the overview reads the request counts from (lib/metrics.ts). */
export interface RequestCountSource {
  requestCounts(): { sinceStart: RequestCounts; lastMinute: RequestCounts }
}

export interface OverviewDeps {
  clock: Clock
  dataDir: string
  blobStore: 'disk' | 's3'
  fileTypes: Pick<SupportedTypes, 'list'>
  blobs: Pick<BlobsRepo, 'stats'>
  outbox: Pick<OutboxRepo, 'backlog'>
  tenants: Pick<TenantsService, 'topByUsage'>
  metrics: RequestCountSource
}

/** The overview's figures with tenants as the services give them (the route renders them). */
export interface OverviewData {
  server: { version: string; startedAt: string; uptimeSeconds: number; blobStore: 'disk' | 's3'; supportedFileTypes: string[] }
  dataDir: { path: string; totalBytes: number; freeBytes: number }
  blobs: { count: number; bytes: number }
  requests: {
    sinceStart: RequestCounts
    lastMinute: RequestCounts & { requestsPerSecond: number; errorsPerSecond: number; windowSeconds: number }
  }
  webhooks: { pending: number; dead: number; oldestPendingAt: string | null }
  tenants: { count: number; byUsage: TenantUsage[] }
}

const rate = (n: number, seconds: number) => Math.round((n / seconds) * 1000) / 1000

/**
 * The admin overview (#31). Every figure is a maintained total or a bounded read, so a call costs
 * the same with 100 files or 100 million: the blob totals are one row (blob_totals, kept by
 * triggers), the outbox backlog two index ranges over pending and dead events only, the usage
 * table one pass over the tenants rows (not files; usage is kept on the row by triggers) plus one
 * file_counts range per listed tenant, the disk one statfs(2), the request counts in memory.
 */
export class OverviewService {
  /** When this process's core was built: the uptime's origin. */
  private readonly startedAt: number

  constructor(private readonly deps: OverviewDeps) {
    this.startedAt = deps.clock.now()
  }

  get(limit: number): OverviewData {
    const { deps } = this
    const now = deps.clock.now()
    const uptimeMs = Math.max(0, now - this.startedAt)
    const counts = deps.metrics.requestCounts()
    const recent = counts.lastMinute
    // A process up for less than a minute has counted over its uptime only (at least one second).
    const windowSeconds = Math.min(RecentRequests.SECONDS, Math.max(1, Math.ceil(uptimeMs / 1000)))
    const backlog = deps.outbox.backlog()
    const tenants = deps.tenants.topByUsage(limit)
    return {
      server: {
        version,
        startedAt: isoTime(this.startedAt),
        uptimeSeconds: Math.floor(uptimeMs / 1000),
        blobStore: deps.blobStore,
        supportedFileTypes: [...deps.fileTypes.list],
      },
      dataDir: { path: deps.dataDir, ...diskSpace(deps.dataDir) },
      blobs: deps.blobs.stats(),
      requests: {
        sinceStart: counts.sinceStart,
        lastMinute: {
          ...recent,
          requestsPerSecond: rate(recent.requests, windowSeconds),
          errorsPerSecond: rate(recent.clientErrors + recent.serverErrors, windowSeconds),
          windowSeconds,
        },
      },
      webhooks: { pending: backlog.pending, dead: backlog.dead, oldestPendingAt: backlog.oldestPendingAt === null ? null : isoTime(backlog.oldestPendingAt) },
      tenants: { count: tenants.total, byUsage: tenants.tenants },
    }
  }
}
