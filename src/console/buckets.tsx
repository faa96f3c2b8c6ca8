import { useEffect, useRef, useState } from 'preact/hooks'
import { api } from './api'
import { formatBytes, formatTime, parseSize } from './format'
import { Confirm, DataTable, ErrorText, TextField, useAction } from './ui'
import { BucketBrowser } from './bucket-browser'

/** A workspace as the bucket it is on the S3 side: its slug is the bucket name. */
export interface Bucket {
  id: string
  name: string
  slug: string
  quotaBytes: number | null
  usedBytes: number
  fileCount: number
  createdAt: number
}

/** S3's bucket names that are also workspace slugs: 3-63 lowercase letters, digits and single hyphens. */
const BUCKET_NAME = /^(?=.{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*$/

/** "" → no limit (null), else a size; throws a readable error for anything else. */
function quotaOf(text: string): number | null {
  if (text.trim() === '') return null
  const bytes = parseSize(text)
  if (bytes === null) throw new Error(`“${text}” is not a size: write it like 500 MiB or 10 GiB, or leave it empty for no limit.`)
  return bytes
}

/** A bucket's display name and quota, edited in its row (the bucket name itself never changes). */
function EditRow(props: { apiKey: string; bucket: Bucket; onDone: (changed: boolean) => void }) {
  const [name, setName] = useState(props.bucket.name)
  const [quota, setQuota] = useState(props.bucket.quotaBytes === null ? '' : formatBytes(props.bucket.quotaBytes))
  const [error, run] = useAction()
  const save = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      await api(props.apiKey, 'PATCH', `/api/v1/workspaces/${encodeURIComponent(props.bucket.id)}`, { name: name.trim(), quotaBytes: quotaOf(quota) })
      props.onDone(true)
    })
  }
  return (
    <tr>
      <td colSpan={6}>
        <form class="toolbar" onSubmit={save} aria-label={`Settings of bucket ${props.bucket.slug}`}>
          <TextField label="Display name" required maxLength={255} value={name} onValue={setName} />
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

/**
 * The tenant's home: its buckets (a workspace is one), with their object count, size and quota.
 * A bucket's name opens it in the bucket browser; create one, set its quota, delete an empty one
 * (the server refuses one that is not, and says why).
 */
export function Buckets(props: { apiKey: string; onChanged: () => void }) {
  const key = props.apiKey
  const [buckets, setBuckets] = useState<Bucket[] | null>(null)
  const [name, setName] = useState('')
  const [open, setOpen] = useState<Bucket | null>(null)
  const [editing, setEditing] = useState<string | null>(null)
  const [deleting, setDeleting] = useState<Bucket | null>(null)
  const [reload, setReload] = useState(0)
  const [error, run] = useAction()
  const heading = useRef<HTMLHeadingElement>(null)
  const wasOpen = useRef(false)

  useEffect(() => {
    void run(async () => setBuckets((await api<{ workspaces: Bucket[] }>(key, 'GET', '/api/v1/workspaces')).workspaces))
  }, [reload])
  // Back from a bucket: the focus returns to the list's heading, not to the top of the page.
  useEffect(() => {
    if (!open && wasOpen.current) heading.current?.focus()
    wasOpen.current = open !== null
  }, [open])

  const changed = () => {
    setReload((n) => n + 1)
    props.onChanged()
  }
  const create = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      const slug = name.trim()
      if (!BUCKET_NAME.test(slug)) throw new Error(`“${slug}” is not a bucket name: 3 to 63 lowercase letters, digits and single hyphens between them.`)
      await api(key, 'POST', '/api/v1/workspaces', { name: slug, slug })
      setName('')
      changed()
    })
  }

  if (open) {
    return (
      <BucketBrowser
        apiKey={key}
        bucket={open}
        onBack={() => {
          setOpen(null)
          changed()
        }}
        onChanged={props.onChanged}
      />
    )
  }
  return (
    <section class="card" aria-labelledby="buckets-h">
      <h2 id="buckets-h" tabIndex={-1} ref={heading}>
        Buckets
      </h2>
      <ErrorText error={error} />
      <form class="toolbar" onSubmit={create}>
        <TextField label="New bucket name" value={name} onValue={setName} required maxLength={63} placeholder="photos-2026" />
        <button type="submit">Create bucket</button>
      </form>
      {buckets && buckets.length === 0 && <p class="muted">No buckets yet. Create one, then open it to upload files into it.</p>}
      {buckets && buckets.length > 0 && (
        <DataTable
          caption={`${buckets.length} bucket${buckets.length === 1 ? '' : 's'}`}
          columns={['Bucket', 'Objects', 'Size', 'Quota', 'Created', 'Actions']}
        >
          {buckets.map((b) =>
            editing === b.id ? (
              <EditRow
                key={b.id}
                apiKey={key}
                bucket={b}
                onDone={(edited) => {
                  setEditing(null)
                  if (edited) changed()
                }}
              />
            ) : (
              <tr key={b.id}>
                <th scope="row" data-label="Bucket" class="name">
                  <button type="button" class="link" aria-label={`Open bucket ${b.slug}`} onClick={() => setOpen(b)}>
                    {b.slug}
                  </button>
                  {b.name !== b.slug && <span class="muted subname">{b.name}</span>}
                </th>
                <td data-label="Objects">{b.fileCount.toLocaleString()}</td>
                <td data-label="Size">{formatBytes(b.usedBytes)}</td>
                <td data-label="Quota">{b.quotaBytes === null ? 'no limit' : formatBytes(b.quotaBytes)}</td>
                <td data-label="Created">{formatTime(b.createdAt)}</td>
                <td class="actions">
                  <button type="button" aria-label={`Settings of bucket ${b.slug}`} onClick={() => setEditing(b.id)}>
                    Settings
                  </button>
                  <button type="button" class="danger" aria-label={`Delete bucket ${b.slug}`} onClick={() => setDeleting(b)}>
                    Delete
                  </button>
                </td>
              </tr>
            ),
          )}
        </DataTable>
      )}
      {deleting && (
        <Confirm
          title="Delete bucket"
          message={`Delete the bucket ${deleting.slug}? Only an empty bucket can be deleted: one with objects, older versions or uploads in progress is kept.`}
          action="Delete bucket"
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api(key, 'DELETE', `/api/v1/workspaces/${encodeURIComponent(deleting.id)}?ifEmpty=true`)
            changed()
          }}
        />
      )}
    </section>
  )
}
