import { useEffect, useState } from 'preact/hooks'
import { api } from './api'
import { formatBytes, formatTime } from './format'
import { Confirm, DataTable, ErrorText, Modal, Pager, useAction } from './ui'

/** One version of a file's key (GET /api/v1/files/:id/versions, #25). */
export interface FileVersion {
  versionId: string
  fileId: string | null
  isLatest: boolean
  isDeleteMarker: boolean
  sizeBytes: number
  sha256: string | null
  createdAt: string
}

interface Page {
  versions: FileVersion[]
  nextCursor: string | null
  total: number
}

/** A deleted file whose versions remain (GET /api/v1/files/deleted). */
export interface DeletedFile {
  fileId: string
  versionId: string
  originalName: string
  sizeBytes: number
  workspaceId: string
  deletedAt: string
}

const PAGE_SIZE = 20

/**
 * A file's versions, newest first: date, size, SHA-256, which one is current, delete markers; each
 * older version with content can be restored (copied over the current one) after a confirmation.
 * `fileId` is any version's file, so the dialog keeps working after a restore made a new current file.
 */
export function VersionsDialog(props: { apiKey: string; fileId: string; name: string; onClose: () => void; onRestored: () => void }) {
  const [cursors, setCursors] = useState<string[]>([])
  const [page, setPage] = useState<Page | null>(null)
  const [reload, setReload] = useState(0)
  const [restoring, setRestoring] = useState<FileVersion | null>(null)
  const [restored, setRestored] = useState<string | null>(null)
  const [error, run] = useAction()
  useEffect(() => {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) })
    const cursor = cursors.at(-1)
    if (cursor) q.set('cursor', cursor)
    void run(async () => setPage(await api<Page>(props.apiKey, 'GET', `/api/v1/files/${encodeURIComponent(props.fileId)}/versions?${q}`)))
  }, [cursors, reload])

  const when = (v: FileVersion) => formatTime(v.createdAt)
  return (
    <Modal title={`Versions of ${props.name}`} onClose={props.onClose} wide>
      <ErrorText error={error} />
      {restored && (
        <p class="notice" role="status">
          {restored}
        </p>
      )}
      {page && (
        <DataTable caption={`${page.total} version${page.total === 1 ? '' : 's'}`} columns={['Date', 'Size', 'SHA-256', 'State', 'Actions']}>
          {page.versions.map((v) => (
            <tr key={v.versionId} class={v.isLatest ? 'current' : ''}>
              <th scope="row" data-label="Date">
                {when(v)}
              </th>
              <td data-label="Size">{v.isDeleteMarker ? '—' : formatBytes(v.sizeBytes)}</td>
              <td data-label="SHA-256" class="hash">
                {v.sha256 ? <code title={v.sha256}>{v.sha256.slice(0, 16)}…</code> : '—'}
              </td>
              <td data-label="State">
                {v.isLatest && <span class="status completed">current</span>}
                {v.isDeleteMarker && <span class="status failed">delete marker</span>}
              </td>
              <td class="actions">
                {!v.isLatest && !v.isDeleteMarker && (
                  <button type="button" aria-label={`Restore the version of ${when(v)} (${v.versionId})`} onClick={() => setRestoring(v)}>
                    Restore
                  </button>
                )}
              </td>
            </tr>
          ))}
        </DataTable>
      )}
      <Pager cursors={cursors} nextCursor={page?.nextCursor} onChange={setCursors} />
      <div class="buttons">
        <button type="button" onClick={props.onClose}>
          Close
        </button>
      </div>
      {restoring && (
        <Confirm
          title="Restore version"
          message={`Restore the version of ${props.name} from ${when(restoring)} (${formatBytes(restoring.sizeBytes)})? It becomes the current version; every other version is kept.`}
          action="Restore"
          onClose={() => setRestoring(null)}
          onConfirm={async () => {
            await api(props.apiKey, 'POST', `/api/v1/files/${encodeURIComponent(props.fileId)}/versions/${encodeURIComponent(restoring.versionId)}/restore`)
            setRestored(`Restored the version of ${when(restoring)}: it is the current version now.`)
            setCursors([])
            setReload((n) => n + 1)
            props.onRestored()
          }}
        />
      )}
    </Modal>
  )
}

/** Deleted files that can be restored: keys of versioned buckets whose current version is a delete marker. */
export function DeletedFiles(props: { apiKey: string; refresh: number; onVersions: (file: DeletedFile) => void }) {
  const [cursors, setCursors] = useState<string[]>([])
  const [page, setPage] = useState<{ files: DeletedFile[]; nextCursor: string | null; total: number } | null>(null)
  const [buckets, setBuckets] = useState<Map<string, string>>(new Map())
  const [error, run] = useAction()
  useEffect(() => {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) })
    const cursor = cursors.at(-1)
    if (cursor) q.set('cursor', cursor)
    // The page and the bucket names together: a row never shows a bucket by its id.
    void run(async () => {
      const [deleted, list] = await Promise.all([
        api<{ files: DeletedFile[]; nextCursor: string | null; total: number }>(props.apiKey, 'GET', `/api/v1/files/deleted?${q}`),
        api<{ workspaces: { id: string; slug: string }[] }>(props.apiKey, 'GET', '/api/v1/workspaces'),
      ])
      setBuckets(new Map(list.workspaces.map((w) => [w.id, w.slug])))
      setPage(deleted)
    })
  }, [cursors, props.refresh])
  return (
    <section class="card" aria-labelledby="deleted-h">
      <h2 id="deleted-h">Deleted files</h2>
      <ErrorText error={error} />
      {page && page.files.length === 0 && <p class="muted">No deleted files with versions: deletes in versioned buckets can be undone here.</p>}
      {page && page.files.length > 0 && (
        <DataTable caption={`${page.total} deleted file${page.total === 1 ? '' : 's'}`} columns={['Name', 'Size', 'Deleted', 'Bucket', 'Actions']}>
          {page.files.map((f) => (
            <tr key={f.fileId}>
              <th scope="row" data-label="Name" class="name">
                {f.originalName}
              </th>
              <td data-label="Size">{formatBytes(f.sizeBytes)}</td>
              <td data-label="Deleted">{formatTime(f.deletedAt)}</td>
              <td data-label="Bucket">{buckets.get(f.workspaceId) ?? '—'}</td>
              <td class="actions">
                <button type="button" aria-label={`Versions of deleted ${f.originalName}`} onClick={() => props.onVersions(f)}>
                  Versions
                </button>
              </td>
            </tr>
          ))}
        </DataTable>
      )}
      <Pager cursors={cursors} nextCursor={page?.nextCursor} onChange={setCursors} />
    </section>
  )
}
