import { useEffect, useState } from 'preact/hooks'
import { api, copyText, fetchContent, uploadFile, type FileInfo } from './api'
import { formatBytes, formatTime, percent } from './format'
import { Confirm, DataTable, ErrorText, Header, LifetimeSelect, LinkNotice, Modal, Pager, TextField, Usage, useAction } from './ui'
import { Workspaces, type Workspace } from './workspaces'
import { Deliveries } from './deliveries'
import { DeletedFiles, VersionsDialog } from './versions'
import { AccessKeys } from './access-keys'
import { Buckets } from './buckets'
import { useUploads } from './uploads'

interface Page {
  files: FileInfo[]
  nextCursor: string | null
  total: number
}
interface Link {
  name: string
  url: string
  expiresAt: string
  copied: boolean
}

const PAGE_SIZE = 20
const PREVIEWABLE = /^(image\/|application\/pdf$)/

export function TenantView(props: { apiKey: string; onSignOut: () => void }) {
  const key = props.apiKey
  const [name, setName] = useState('')
  const [quota, setQuota] = useState<{ quotaBytes: number; usedBytes: number } | null>(null)
  const [workspaces, setWorkspaces] = useState<Workspace[]>([])
  const [filter, setFilter] = useState({ workspaceId: '', context: '' })
  const [draft, setDraft] = useState(filter)
  const [cursors, setCursors] = useState<string[]>([])
  const [page, setPage] = useState<Page | null>(null)
  const [version, setVersion] = useState(0)
  const [uploads, startUploads] = useUploads()
  const [lifetime, setLifetime] = useState(3600)
  const [link, setLink] = useState<Link | null>(null)
  const [preview, setPreview] = useState<{ file: FileInfo; url: string } | null>(null)
  const [deleting, setDeleting] = useState<FileInfo | null>(null)
  const [versionsOf, setVersionsOf] = useState<{ fileId: string; name: string } | null>(null)
  const [dragging, setDragging] = useState(false)
  const [error, run] = useAction()
  const refresh = () => setVersion((v) => v + 1)

  const loadWorkspaces = () => run(async () => setWorkspaces((await api<{ workspaces: Workspace[] }>(key, 'GET', '/api/v1/workspaces')).workspaces))
  useEffect(() => {
    void run(async () => setName((await api<{ name: string }>(key, 'GET', '/api/v1/tenant/info')).name))
    void loadWorkspaces()
  }, [])
  useEffect(() => {
    void run(async () => setQuota(await api(key, 'GET', '/api/v1/tenant/quota')))
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) })
    const cursor = cursors.at(-1)
    if (cursor) q.set('cursor', cursor)
    if (filter.workspaceId) q.set('workspaceId', filter.workspaceId)
    if (filter.context) q.set('context', filter.context)
    void run(async () => setPage(await api<Page>(key, 'GET', `/api/v1/files?${q}`)))
  }, [filter, cursors, version])

  const wsName = (id: string | null) => (id === null ? '—' : (workspaces.find((w) => w.id === id)?.name ?? id))
  const uploadAll = async (files: File[]) => {
    await startUploads(
      files,
      (f) => f.name,
      (file, _name, onProgress) => uploadFile(key, file, { ...(filter.workspaceId ? { workspaceId: filter.workspaceId } : {}), onProgress }),
      refresh,
    )
    void loadWorkspaces()
  }

  const showPreview = (file: FileInfo) =>
    run(async () => {
      const blob = await fetchContent(key, file.id)
      setPreview({ file, url: URL.createObjectURL(blob) })
    })
  const closePreview = () => {
    if (preview) URL.revokeObjectURL(preview.url)
    setPreview(null)
  }
  const signedUrl = (file: FileInfo, seconds: number) =>
    api<{ url: string; expiresAt: string }>(key, 'GET', `/api/v1/files/${file.id}/signed-url?expiresIn=${seconds}`)
  const download = (file: FileInfo) =>
    run(async () => {
      // A one-minute signed URL: the browser streams the file to disk itself, with no key in the URL for long.
      const a = document.createElement('a')
      a.href = (await signedUrl(file, 60)).url
      a.download = file.originalName
      a.click()
    })
  const copyLink = (file: FileInfo) =>
    run(async () => {
      const s = await signedUrl(file, lifetime)
      setLink({ name: file.originalName, url: s.url, expiresAt: s.expiresAt, copied: await copyText(s.url) })
    })

  const applyFilter = (e: Event) => {
    e.preventDefault()
    setCursors([])
    setFilter({ workspaceId: draft.workspaceId, context: draft.context.trim() })
  }

  return (
    <div class="view">
      <Header title="Coffer" subtitle={name ? `Tenant: ${name}` : 'Tenant'} onSignOut={props.onSignOut} />
      <ErrorText error={error} />

      <section class="card" aria-labelledby="storage-h">
        <h2 id="storage-h">Storage</h2>
        {quota && (
          <p class="gauge">
            <Usage id="quota" used={quota.usedBytes} quota={quota.quotaBytes} label="Storage used" />
          </p>
        )}
      </section>

      <Buckets apiKey={key} refresh={version} onChanged={() => (void loadWorkspaces(), refresh())} />

      <section
        class={`card drop${dragging ? ' dragging' : ''}`}
        aria-labelledby="upload-h"
        onDragOver={(e) => {
          e.preventDefault()
          setDragging(true)
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(e) => {
          e.preventDefault()
          setDragging(false)
          void uploadAll([...(e.dataTransfer?.files ?? [])])
        }}
      >
        <h2 id="upload-h">Upload</h2>
        <label class="file-button">
          Upload files
          <input
            type="file"
            multiple
            accept="image/jpeg,image/png,image/webp,image/gif,image/avif,application/pdf"
            onChange={(e) => {
              const files = [...(e.currentTarget.files ?? [])]
              e.currentTarget.value = ''
              void uploadAll(files)
            }}
          />
        </label>
        <p class="muted">or drop files here. They go into {filter.workspaceId ? `the workspace “${wsName(filter.workspaceId)}”` : 'no workspace'}.</p>
        {uploads.length > 0 && (
          <ul class="uploads" aria-label="Uploads">
            {uploads.map((u) => (
              <li key={u.id}>
                <span class="name">{u.name}</span>
                <progress max={u.total || 1} value={u.loaded} aria-label={`Upload of ${u.name}`} />
                <span class={u.error ? 'error' : 'muted'}>{u.error ?? (u.done ? 'Uploaded' : `${percent(u.loaded, u.total || 1)}`)}</span>
              </li>
            ))}
          </ul>
        )}
      </section>

      <section class="card" aria-labelledby="files-h">
        <h2 id="files-h">Files</h2>
        <form class="toolbar" onSubmit={applyFilter}>
          <label>
            Workspace
            <select value={draft.workspaceId} onChange={(e) => setDraft({ ...draft, workspaceId: e.currentTarget.value })}>
              <option value="">All workspaces</option>
              {workspaces.map((w) => (
                <option key={w.id} value={w.id}>
                  {w.name}
                </option>
              ))}
            </select>
          </label>
          <TextField label="Context" value={draft.context} maxLength={100} onValue={(context) => setDraft({ ...draft, context })} />
          <button type="submit">Filter</button>
          <LifetimeSelect value={lifetime} onValue={setLifetime} />
        </form>
        {link && <LinkNotice link={link} name={link.name} label="Signed link" />}
        {page && (
          <DataTable
            caption={`${page.total} file${page.total === 1 ? '' : 's'}`}
            columns={['Name', 'Type', 'Size', 'Status', 'Created', 'Workspace', 'Actions']}
          >
            {page.files.map((f) => (
              <tr key={f.id}>
                <th scope="row" data-label="Name" class="name">
                  {f.originalName}
                </th>
                <td data-label="Type">{f.fileType}</td>
                <td data-label="Size">{formatBytes(f.sizeBytes)}</td>
                <td data-label="Status">
                  <span class={`status ${f.processingStatus}`}>{f.processingStatus}</span>
                </td>
                <td data-label="Created">{formatTime(f.createdAt)}</td>
                <td data-label="Workspace">{wsName(f.workspaceId)}</td>
                <td class="actions">
                  {f.processingStatus === 'completed' && PREVIEWABLE.test(f.fileType) && (
                    <button type="button" aria-label={`Preview ${f.originalName}`} onClick={() => void showPreview(f)}>
                      Preview
                    </button>
                  )}
                  {f.processingStatus === 'completed' && (
                    <>
                      <button type="button" aria-label={`Download ${f.originalName}`} onClick={() => void download(f)}>
                        Download
                      </button>
                      <button type="button" aria-label={`Copy link to ${f.originalName}`} onClick={() => void copyLink(f)}>
                        Copy link
                      </button>
                      <button type="button" aria-label={`Versions of ${f.originalName}`} onClick={() => setVersionsOf({ fileId: f.id, name: f.originalName })}>
                        Versions
                      </button>
                    </>
                  )}
                  <button type="button" class="danger" aria-label={`Delete ${f.originalName}`} onClick={() => setDeleting(f)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </DataTable>
        )}
        {page && page.files.length === 0 && <p class="muted">No files{filter.workspaceId || filter.context ? ' match the filter' : ' yet'}.</p>}
        <Pager cursors={cursors} nextCursor={page?.nextCursor} onChange={setCursors} />
      </section>

      <DeletedFiles
        apiKey={key}
        workspaceId={filter.workspaceId}
        refresh={version}
        wsName={wsName}
        onVersions={(f) => setVersionsOf({ fileId: f.fileId, name: f.originalName })}
      />

      <Workspaces apiKey={key} workspaces={workspaces} onChanged={() => (void loadWorkspaces(), refresh())} />
      <Deliveries apiKey={key} />
      <AccessKeys apiKey={key} />

      {preview && (
        <Modal title={preview.file.originalName} onClose={closePreview} wide>
          {preview.file.fileType === 'application/pdf' ? (
            <iframe class="preview" src={preview.url} title={`Preview of ${preview.file.originalName}`} />
          ) : (
            <img class="preview" src={preview.url} alt={`Preview of ${preview.file.originalName}`} />
          )}
          <div class="buttons">
            <button type="button" onClick={closePreview}>
              Close
            </button>
          </div>
        </Modal>
      )}
      {versionsOf && (
        <VersionsDialog
          apiKey={key}
          fileId={versionsOf.fileId}
          name={versionsOf.name}
          onClose={() => setVersionsOf(null)}
          onRestored={() => (refresh(), void loadWorkspaces())}
        />
      )}
      {deleting && (
        <Confirm
          title="Delete file"
          message={`Delete ${deleting.originalName}? It disappears from every listing and its space is released.`}
          action="Delete"
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api(key, 'DELETE', `/api/v1/files/${deleting.id}`)
            if (link?.name === deleting.originalName) setLink(null)
            refresh()
            void loadWorkspaces()
          }}
        />
      )}
    </div>
  )
}
