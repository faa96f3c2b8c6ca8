import { useEffect, useState } from 'preact/hooks'
import { api } from './api'
import { formatTime } from './format'
import { DataTable, ErrorText, useAction } from './ui'

interface Delivery {
  id: string
  event: string
  fileId: string
  url: string
  status: 'pending' | 'delivered' | 'dead'
  attempts: number
  lastError: string | null
  createdAt: string
}

/** The tenant's recent webhook deliveries; a dead one can be sent again. */
export function Deliveries(props: { apiKey: string }) {
  const [list, setList] = useState<Delivery[] | null>(null)
  const [error, run] = useAction()
  const load = () => run(async () => setList((await api<{ deliveries: Delivery[] }>(props.apiKey, 'GET', '/api/v1/webhooks/deliveries?limit=20')).deliveries))
  useEffect(() => void load(), [])
  const retry = (d: Delivery) =>
    run(async () => {
      await api(props.apiKey, 'POST', `/api/v1/webhooks/deliveries/${encodeURIComponent(d.id)}/retry`)
      await load()
    })
  return (
    <section class="card" aria-labelledby="hooks-h">
      <h2 id="hooks-h">Webhook deliveries</h2>
      <ErrorText error={error} />
      {list && list.length === 0 && <p class="muted">No webhook deliveries yet: uploads with a webhookUrl show up here.</p>}
      {list && list.length > 0 && (
        <DataTable columns={['Event', 'Status', 'Attempts', 'URL', 'Last error', 'Created', 'Actions']}>
          {list.map((d) => (
            <tr key={d.id}>
              <th scope="row" data-label="Event">
                {d.event}
              </th>
              <td data-label="Status">
                <span class={`status ${d.status}`}>{d.status}</span>
              </td>
              <td data-label="Attempts">{d.attempts}</td>
              <td data-label="URL" class="url">
                {d.url}
              </td>
              <td data-label="Last error">{d.lastError ?? '—'}</td>
              <td data-label="Created">{formatTime(d.createdAt)}</td>
              <td class="actions">
                {d.status === 'dead' && (
                  <button type="button" aria-label={`Retry delivery ${d.id}`} onClick={() => void retry(d)}>
                    Retry
                  </button>
                )}
              </td>
            </tr>
          ))}
        </DataTable>
      )}
      <div class="buttons">
        <button type="button" onClick={() => void load()}>
          Refresh deliveries
        </button>
      </div>
    </section>
  )
}
