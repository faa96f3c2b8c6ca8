import { useEffect, useState } from 'preact/hooks'
import { api } from './api'
import { formatBytes, formatTime, parseSize } from './format'
import { Confirm, DataTable, ErrorText, Header, Modal, Pager, SecretBox, TextField, Usage, useAction } from './ui'
import { ANY_TYPE, FILE_TYPES } from '../lib/file-types'
import { Overview } from './overview'

interface Tenant {
  id: string
  name: string
  quotaBytes: number
  usedBytes: number
  fileCount: number
  allowedFileTypes: string[]
  selfServiceS3Credentials: boolean
  createdAt: string
}
interface Secret {
  title: string
  apiKey: string
  webhookSecret: string
}

function sizeOf(text: string): number {
  // The API stores `unlimited` as the largest safe integer.
  if (text.trim().toLowerCase() === 'unlimited') return Number.MAX_SAFE_INTEGER
  const bytes = parseSize(text)
  if (bytes === null) throw new Error(`“${text}” is not a size: write it like 500 MiB or 10 GiB, or unlimited.`)
  return bytes
}

/**
 * The server's supported file types (GET /api/v1/admin/overview's server.supportedFileTypes): the
 * six, then the operator's additions, or ['*'] when it takes any type; null until it has answered.
 */
type Supported = readonly string[] | null

const serverTakesAny = (supported: Supported) => supported?.includes(ANY_TYPE) ?? false

/** The types offered one by one: the server's list (the six when it takes any), then those of `value` it does not list. */
function typeOptions(supported: Supported, value: readonly string[]): string[] {
  const listed: readonly string[] = supported === null || serverTakesAny(supported) ? FILE_TYPES : supported
  return [...listed, ...value.filter((t) => t !== ANY_TYPE && !listed.includes(t))]
}

/** Whether the server (once known) would refuse `type` in a tenant's list: a type it no longer supports. */
function refused(supported: Supported, type: string): boolean {
  if (supported === null) return false
  if (type === ANY_TYPE) return !serverTakesAny(supported)
  return !serverTakesAny(supported) && !supported.includes(type)
}

const sameTypes = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((t) => b.includes(t))

/** A tenant's types in the table: 'any' for ['*'], 'all' when they are every type the server supports. */
function typesText(types: readonly string[], supported: Supported): string {
  if (types.includes(ANY_TYPE)) return 'any'
  if (supported !== null && !serverTakesAny(supported) && sameTypes(types, supported)) return 'all'
  return types.join(', ')
}

/**
 * The file types as checkboxes: one per type the server supports, plus "Any type (*)" when it
 * takes any. While Any is ticked the others are ticked and disabled (it covers them); unticking it
 * leaves them all ticked. At least one must stay checked (the API's rule).
 */
function TypesField(props: { supported: Supported; value: readonly string[]; onChange: (v: string[]) => void }) {
  const { supported, value } = props
  const any = value.includes(ANY_TYPE)
  const options = typeOptions(supported, value)
  return (
    <fieldset class="types">
      <legend>Allowed file types</legend>
      {(any || serverTakesAny(supported)) && (
        <label class="check">
          <input type="checkbox" checked={any} onChange={(e) => props.onChange(e.currentTarget.checked ? [ANY_TYPE] : options)} />
          Any type (*){refused(supported, ANY_TYPE) ? ' (not supported by this server)' : ''}
        </label>
      )}
      {options.map((t) => (
        <label key={t} class="check">
          <input
            type="checkbox"
            checked={any || value.includes(t)}
            disabled={any}
            onChange={(e) => props.onChange(e.currentTarget.checked ? [...value, t] : value.filter((x) => x !== t))}
          />
          {t}
          {refused(supported, t) ? ' (not supported by this server)' : ''}
        </label>
      ))}
    </fieldset>
  )
}

/** Refuses, before asking the API, a list with a type the server would refuse (one it no longer supports). */
function checkTypes(supported: Supported, types: readonly string[]): void {
  const bad = types.filter((t) => refused(supported, t))
  if (bad.length > 0) throw new Error(`This server does not support ${bad.join(', ')}: untick it to save the allowed types.`)
}

function EditTenant(props: { apiKey: string; tenant: Tenant; supported: Supported; onClose: () => void; onSaved: () => void }) {
  const t = props.tenant
  const [name, setName] = useState(t.name)
  const [quota, setQuota] = useState(t.quotaBytes >= Number.MAX_SAFE_INTEGER ? 'unlimited' : formatBytes(t.quotaBytes))
  const [types, setTypes] = useState(t.allowedFileTypes)
  const [selfService, setSelfService] = useState(t.selfServiceS3Credentials)
  const [error, run] = useAction()
  const save = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      // Unchanged types are not sent: the tenant keeps its list as stored (['*'] included).
      const changed = !sameTypes(types, t.allowedFileTypes)
      if (changed) checkTypes(props.supported, types)
      await api(props.apiKey, 'PATCH', `/api/v1/admin/tenants/${t.id}`, {
        name: name.trim(),
        quotaBytes: sizeOf(quota),
        ...(changed ? { allowedFileTypes: types } : {}),
        selfServiceS3Credentials: selfService,
      })
      props.onSaved()
      props.onClose()
    })
  }
  return (
    <Modal title={`Edit ${t.name}`} onClose={props.onClose}>
      <form onSubmit={save} class="stacked">
        <TextField label="Name" required maxLength={100} value={name} onValue={setName} />
        <TextField label="Quota" required value={quota} onValue={setQuota} />
        <TypesField supported={props.supported} value={types} onChange={setTypes} />
        <label class="check">
          <input type="checkbox" checked={selfService} onChange={(e) => setSelfService(e.currentTarget.checked)} />
          The tenant may create and revoke its own S3 access keys
        </label>
        <ErrorText error={error} />
        <div class="buttons">
          <button type="submit" class="primary" disabled={types.length === 0}>
            Save
          </button>
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Modal>
  )
}

export function AdminView(props: { apiKey: string; onSignOut: () => void }) {
  const key = props.apiKey
  const [cursors, setCursors] = useState<string[]>([])
  const [page, setPage] = useState<{ tenants: Tenant[]; nextCursor: string | null } | null>(null)
  const [version, setVersion] = useState(0)
  const [name, setName] = useState('')
  const [quota, setQuota] = useState('')
  const [supported, setSupported] = useState<Supported>(null)
  // null: the server's default (every type it supports), until the admin changes the ticks.
  const [types, setTypes] = useState<string[] | null>(null)
  const shownTypes = types ?? supported ?? FILE_TYPES
  const [secret, setSecret] = useState<Secret | null>(null)
  const [editing, setEditing] = useState<Tenant | null>(null)
  const [confirm, setConfirm] = useState<{ tenant: Tenant; kind: 'delete' | 'regenerate' } | null>(null)
  const [error, run] = useAction()
  const refresh = () => setVersion((v) => v + 1)

  useEffect(() => {
    const cursor = cursors.at(-1)
    void run(async () => setPage(await api(key, 'GET', `/api/v1/admin/tenants?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)))
  }, [cursors, version])

  const create = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      if (types !== null) checkTypes(supported, types)
      const body = { name: name.trim(), ...(types !== null ? { allowedFileTypes: types } : {}), ...(quota.trim() ? { quotaBytes: sizeOf(quota) } : {}) }
      const t = await api<{ name: string; apiKey: string; webhookSecret: string }>(key, 'POST', '/api/v1/admin/tenants', body)
      setSecret({ title: `Tenant ${t.name} created`, apiKey: t.apiKey, webhookSecret: t.webhookSecret })
      setName('')
      setQuota('')
      setTypes(null)
      refresh()
    })
  }

  return (
    <div class="view">
      <Header title="Coffer admin" subtitle="Signed in with the admin key" onSignOut={props.onSignOut} />
      <ErrorText error={error} />
      <Overview apiKey={key} refresh={version} onServer={(server) => setSupported(server.supportedFileTypes)} />
      <section class="card" aria-labelledby="new-h">
        <h2 id="new-h">New tenant</h2>
        <form class="stacked" onSubmit={create}>
          <TextField label="Tenant name" required maxLength={100} value={name} onValue={setName} />
          <TextField label="Quota" value={quota} placeholder="the server's default, 10 GiB or unlimited" onValue={setQuota} />
          <TypesField supported={supported} value={shownTypes} onChange={setTypes} />
          <div class="buttons">
            <button type="submit" class="primary" disabled={shownTypes.length === 0}>
              Create tenant
            </button>
          </div>
        </form>
      </section>

      <section class="card" aria-labelledby="tenants-h">
        <h2 id="tenants-h">Tenants</h2>
        {page && page.tenants.length === 0 && <p class="muted">No tenants yet.</p>}
        {page && page.tenants.length > 0 && (
          <DataTable columns={['Name', 'Usage', 'Files', 'Allowed types', 'S3 self-service', 'Created', 'Actions']}>
            {page.tenants.map((t) => (
              <tr key={t.id}>
                <th scope="row" data-label="Name" class="name">
                  {t.name}
                  <span class="muted id">{t.id}</span>
                </th>
                <td data-label="Usage">
                  <Usage used={t.usedBytes} quota={t.quotaBytes} label={`Storage used by ${t.name}`} />
                </td>
                <td data-label="Files">{t.fileCount}</td>
                <td data-label="Allowed types">{typesText(t.allowedFileTypes, supported)}</td>
                <td data-label="S3 self-service">{t.selfServiceS3Credentials ? 'on' : 'off'}</td>
                <td data-label="Created">{formatTime(t.createdAt)}</td>
                <td class="actions">
                  <button type="button" aria-label={`Edit tenant ${t.name}`} onClick={() => setEditing(t)}>
                    Edit
                  </button>
                  <button type="button" aria-label={`Regenerate key of ${t.name}`} onClick={() => setConfirm({ tenant: t, kind: 'regenerate' })}>
                    Regenerate key
                  </button>
                  <button type="button" class="danger" aria-label={`Delete tenant ${t.name}`} onClick={() => setConfirm({ tenant: t, kind: 'delete' })}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </DataTable>
        )}
        <Pager cursors={cursors} nextCursor={page?.nextCursor} onChange={setCursors} />
      </section>

      {editing && <EditTenant apiKey={key} tenant={editing} supported={supported} onClose={() => setEditing(null)} onSaved={refresh} />}
      {confirm?.kind === 'delete' && (
        <Confirm
          title="Delete tenant"
          message={`Delete the tenant ${confirm.tenant.name} and everything it stores? Its key stops working at once.`}
          action="Delete tenant"
          onClose={() => setConfirm(null)}
          onConfirm={async () => {
            await api(key, 'DELETE', `/api/v1/admin/tenants/${confirm.tenant.id}`)
            refresh()
          }}
        />
      )}
      {confirm?.kind === 'regenerate' && (
        <Confirm
          title="Regenerate key"
          message={`Give ${confirm.tenant.name} a new API key and webhook secret? The current key stops working at once.`}
          action="Regenerate key"
          onClose={() => setConfirm(null)}
          onConfirm={async () => {
            const r = await api<{ apiKey: string; webhookSecret: string }>(key, 'POST', `/api/v1/admin/tenants/${confirm.tenant.id}/regenerate-key`)
            setSecret({ title: `New key for ${confirm.tenant.name}`, apiKey: r.apiKey, webhookSecret: r.webhookSecret })
          }}
        />
      )}
      {secret && (
        <Modal title={secret.title} onClose={() => setSecret(null)}>
          <p>Copy the key now: it is shown only once and cannot be read again.</p>
          <SecretBox label="New API key" value={secret.apiKey} />
          <SecretBox label="Webhook signing secret" value={secret.webhookSecret} />
          <div class="buttons">
            <button type="button" class="primary" onClick={() => setSecret(null)}>
              Done
            </button>
          </div>
        </Modal>
      )}
    </div>
  )
}
