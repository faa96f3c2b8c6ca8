import { useState } from 'preact/hooks'
import { api } from './api'
import { formatBytes, parseSize } from './format'
import { Confirm, DataTable, ErrorText, TextField, useAction } from './ui'

export interface Workspace {
  id: string
  name: string
  slug: string
  quotaBytes: number | null
  usedBytes: number
}

/** "" → no limit (null), else a size; throws a readable error for anything else. */
function quotaOf(text: string): number | null {
  if (text.trim() === '') return null
  const bytes = parseSize(text)
  if (bytes === null) throw new Error(`“${text}” is not a size: write it like 500 MiB or 10 GiB, or leave it empty for no limit.`)
  return bytes
}

const slugOf = (name: string) =>
  name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '')

function EditRow(props: { apiKey: string; ws: Workspace; onDone: (changed: boolean) => void }) {
  const [name, setName] = useState(props.ws.name)
  const [quota, setQuota] = useState(props.ws.quotaBytes === null ? '' : formatBytes(props.ws.quotaBytes))
  const [error, run] = useAction()
  const save = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      await api(props.apiKey, 'PATCH', `/api/v1/workspaces/${props.ws.id}`, { name: name.trim(), quotaBytes: quotaOf(quota) })
      props.onDone(true)
    })
  }
  return (
    <tr>
      <td colSpan={5}>
        <form class="toolbar" onSubmit={save}>
          <TextField label="Name" required maxLength={255} value={name} onValue={setName} />
          <TextField label="Quota" value={quota} placeholder="no limit" onValue={setQuota} />
          <button type="submit" class="primary">
            Save
          </button>
          <button type="button" onClick={() => props.onDone(false)}>
            Cancel
          </button>
        </form>
        <ErrorText error={error} />
      </td>
    </tr>
  )
}

/** Create, rename, re-quota and delete workspaces. */
export function Workspaces(props: { apiKey: string; workspaces: Workspace[]; onChanged: () => void }) {
  const [name, setName] = useState('')
  const [slug, setSlug] = useState('')
  const [quota, setQuota] = useState('')
  const [editing, setEditing] = useState<string | null>(null)
  const [deleting, setDeleting] = useState<Workspace | null>(null)
  const [error, run] = useAction()
  const create = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      await api(props.apiKey, 'POST', '/api/v1/workspaces', { name: name.trim(), slug: slug || slugOf(name), quotaBytes: quotaOf(quota) })
      setName('')
      setSlug('')
      setQuota('')
      props.onChanged()
    })
  }
  return (
    <section class="card" aria-labelledby="ws-h">
      <h2 id="ws-h">Workspaces</h2>
      {props.workspaces.length > 0 && (
        <DataTable columns={['Name', 'Slug', 'Used', 'Quota', 'Actions']}>
          {props.workspaces.map((w) =>
            editing === w.id ? (
              <EditRow
                key={w.id}
                apiKey={props.apiKey}
                ws={w}
                onDone={(changed) => {
                  setEditing(null)
                  if (changed) props.onChanged()
                }}
              />
            ) : (
              <tr key={w.id}>
                <th scope="row" data-label="Name" class="name">
                  {w.name}
                </th>
                <td data-label="Slug">{w.slug}</td>
                <td data-label="Used">{formatBytes(w.usedBytes)}</td>
                <td data-label="Quota">{w.quotaBytes === null ? 'no limit' : formatBytes(w.quotaBytes)}</td>
                <td class="actions">
                  <button type="button" aria-label={`Edit workspace ${w.name}`} onClick={() => setEditing(w.id)}>
                    Rename or set quota
                  </button>
                  <button type="button" class="danger" aria-label={`Delete workspace ${w.name}`} onClick={() => setDeleting(w)}>
                    Delete
                  </button>
                </td>
              </tr>
            ),
          )}
        </DataTable>
      )}
      <form class="toolbar" onSubmit={create} aria-label="New workspace">
        <TextField label="New workspace name" required maxLength={255} value={name} onValue={setName} />
        <TextField label="Slug" value={slug} placeholder={slugOf(name) || 'from the name'} pattern="[a-z0-9]+(-[a-z0-9]+)*" maxLength={63} onValue={setSlug} />
        <TextField label="Quota" value={quota} placeholder="no limit, or 10 GiB" onValue={setQuota} />
        <button type="submit">Create workspace</button>
      </form>
      <ErrorText error={error} />
      {deleting && (
        <Confirm
          title="Delete workspace"
          message={`Delete the workspace ${deleting.name}? Every file in it is deleted too and its space released.`}
          action="Delete workspace"
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api(props.apiKey, 'DELETE', `/api/v1/workspaces/${deleting.id}`)
            props.onChanged()
          }}
        />
      )}
    </section>
  )
}
