import { useEffect, useRef, useState } from 'preact/hooks'
import { api } from './api'
import { formatBytes, formatTime } from './format'
import { Confirm, DataTable, ErrorText, TextField, useAction } from './ui'
import { BucketBrowser } from './bucket-browser'

/** A workspace as a bucket (buckets are workspaces): its slug is the bucket name. */
export interface Bucket {
  id: string
  name: string
  slug: string
  usedBytes: number
  fileCount: number
  createdAt: number
}

/** S3's bucket names that are also workspace slugs: 3-63 lowercase letters, digits and single hyphens. */
const BUCKET_NAME = /^(?=.{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*$/

/**
 * The tenant's buckets with their object count and size; create one, delete an empty one (the
 * server refuses one that is not, and says why), open one in the bucket browser.
 */
export function Buckets(props: { apiKey: string; refresh: number; onChanged: () => void }) {
  const key = props.apiKey
  const [buckets, setBuckets] = useState<Bucket[] | null>(null)
  const [name, setName] = useState('')
  const [open, setOpen] = useState<Bucket | null>(null)
  const [deleting, setDeleting] = useState<Bucket | null>(null)
  const [reload, setReload] = useState(0)
  const [error, run] = useAction()
  const heading = useRef<HTMLHeadingElement>(null)
  const wasOpen = useRef(false)

  useEffect(() => {
    void run(async () => setBuckets((await api<{ workspaces: Bucket[] }>(key, 'GET', '/api/v1/workspaces')).workspaces))
  }, [reload, props.refresh])
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
      {buckets && buckets.length === 0 && <p class="muted">No buckets yet.</p>}
      {buckets && buckets.length > 0 && (
        <DataTable caption={`${buckets.length} bucket${buckets.length === 1 ? '' : 's'}`} columns={['Bucket', 'Objects', 'Size', 'Created', 'Actions']}>
          {buckets.map((b) => (
            <tr key={b.id}>
              <th scope="row" data-label="Bucket" class="name">
                {b.slug}
              </th>
              <td data-label="Objects">{b.fileCount.toLocaleString()}</td>
              <td data-label="Size">{formatBytes(b.usedBytes)}</td>
              <td data-label="Created">{formatTime(b.createdAt)}</td>
              <td class="actions">
                <button type="button" aria-label={`Open bucket ${b.slug}`} onClick={() => setOpen(b)}>
                  Open
                </button>
                <button type="button" class="danger" aria-label={`Delete bucket ${b.slug}`} onClick={() => setDeleting(b)}>
                  Delete
                </button>
              </td>
            </tr>
          ))}
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
