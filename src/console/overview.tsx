import type { ComponentChildren } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { api } from './api'
import { formatBytes, formatTime } from './format'
import { DataTable, ErrorText, Usage, useAction } from './ui'

interface Counts {
  requests: number
  clientErrors: number
  serverErrors: number
}
/** GET /api/v1/admin/overview (src/contract/overview.ts). */
export interface OverviewData {
  server: { version: string; startedAt: string; uptimeSeconds: number; blobStore: 'disk' | 's3'; supportedFileTypes: string[] }
  dataDir: { path: string; totalBytes: number; freeBytes: number }
  blobs: { count: number; bytes: number }
  requests: { sinceStart: Counts; lastMinute: Counts & { requestsPerSecond: number; errorsPerSecond: number; windowSeconds: number } }
  webhooks: { pending: number; dead: number; oldestPendingAt: string | null }
  tenants: {
    count: number
    byUsage: { id: string; name: string; usedBytes: number; quotaBytes: number; fileCount: number }[]
  }
}

/** 3 d 4 h, 5 h 2 min, 42 s: an uptime as a person reads it. */
export function formatDuration(seconds: number): string {
  const d = Math.floor(seconds / 86400)
  const h = Math.floor((seconds % 86400) / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  if (d > 0) return `${d} d ${h} h`
  if (h > 0) return `${h} h ${m} min`
  if (m > 0) return `${m} min ${seconds % 60} s`
  return `${seconds} s`
}

const perSecond = (n: number) => `${n.toLocaleString('en', { maximumFractionDigits: 3 })}/s`

/** One figure: a term and its value, in a description list (read as pairs by screen readers). */
function Figure(props: { term: string; children: ComponentChildren }) {
  return (
    <div>
      <dt>{props.term}</dt>
      <dd>{props.children}</dd>
    </div>
  )
}

/** The admin overview (#31): the server at a glance, refreshed on demand; onServer gets its server section (the tenant forms' file types). */
export function Overview(props: { apiKey: string; refresh: number; onServer?: (server: OverviewData['server']) => void }) {
  const [data, setData] = useState<OverviewData | null>(null)
  const [version, setVersion] = useState(0)
  const [error, run] = useAction()
  useEffect(
    () =>
      void run(async () => {
        const o = await api<OverviewData>(props.apiKey, 'GET', '/api/v1/admin/overview?limit=10')
        setData(o)
        props.onServer?.(o.server)
      }),
    [version, props.refresh],
  )

  const o = data
  return (
    <section class="card" aria-labelledby="overview-h" aria-busy={o === null}>
      <h2 id="overview-h">Overview</h2>
      <ErrorText error={error} />
      {o && (
        <>
          <dl class="figures">
            <Figure term="Version">{o.server.version}</Figure>
            <Figure term="Uptime">
              <span title={`since ${formatTime(o.server.startedAt)}`}>{formatDuration(o.server.uptimeSeconds)}</span>
            </Figure>
            <Figure term="Free space">
              {formatBytes(o.dataDir.freeBytes)} of {formatBytes(o.dataDir.totalBytes)}
            </Figure>
            <Figure term="Blobs">
              {o.blobs.count.toLocaleString('en')} ({formatBytes(o.blobs.bytes)}
              {o.server.blobStore === 's3' ? ', in the S3 store' : ''})
            </Figure>
            <Figure term="Requests">
              {perSecond(o.requests.lastMinute.requestsPerSecond)} over the last {o.requests.lastMinute.windowSeconds} s;{' '}
              {o.requests.sinceStart.requests.toLocaleString('en')} since start
            </Figure>
            <Figure term="Errors">
              {perSecond(o.requests.lastMinute.errorsPerSecond)}; since start {o.requests.sinceStart.clientErrors.toLocaleString('en')} client (4xx),{' '}
              {o.requests.sinceStart.serverErrors.toLocaleString('en')} server (5xx)
            </Figure>
            <Figure term="Webhook backlog">
              {o.webhooks.pending.toLocaleString('en')} pending
              {o.webhooks.oldestPendingAt ? `, oldest from ${formatTime(o.webhooks.oldestPendingAt)}` : ''}
            </Figure>
            <Figure term="Dead letters">
              {o.webhooks.dead.toLocaleString('en')}
              {o.webhooks.dead > 0 ? ' (coffer webhooks retry re-drives them)' : ''}
            </Figure>
          </dl>
          <DataTable caption={`Usage by tenant, largest first (${o.tenants.byUsage.length} of ${o.tenants.count})`} columns={['Tenant', 'Used', 'Files']}>
            {o.tenants.byUsage.map((t) => (
              <tr key={t.id}>
                <th scope="row" data-label="Tenant" class="name">
                  {t.name}
                </th>
                <td data-label="Used">
                  <Usage used={t.usedBytes} quota={t.quotaBytes} label={`Storage used by ${t.name}`} />
                </td>
                <td data-label="Files">{t.fileCount.toLocaleString('en')}</td>
              </tr>
            ))}
          </DataTable>
        </>
      )}
      <div class="buttons">
        <button type="button" onClick={() => setVersion((v) => v + 1)}>
          Refresh overview
        </button>
      </div>
    </section>
  )
}
