import { useEffect, useRef, useState } from 'preact/hooks'
import { api, copyText, fetchContent, messageOf, putObject } from './api'
import { formatBytes, formatTime, percent } from './format'
import { Confirm, ErrorText, LifetimeSelect, LinkNotice, Modal, Pager, TextField, useAction } from './ui'
import { ObjectDetails, type ObjectEntry } from './object-details'
import type { Bucket } from './buckets'
import { useUploads } from './uploads'

interface Page {
  prefixes: string[]
  objects: ObjectEntry[]
  nextAfter: string | null
}
type SortBy = 'name' | 'size' | 'date'
type Preview =
  | { entry: ObjectEntry; kind: 'image' | 'audio' | 'video'; url: string }
  | { entry: ObjectEntry; kind: 'pdf'; url: string }
  | { entry: ObjectEntry; kind: 'text'; text: string }

const PAGE_SIZE = 100
/** A text preview reads at most this much (one Range request): a log of gigabytes stays on the server. */
const TEXT_CAP = 64 * 1024

function previewKind(type: string): Preview['kind'] | null {
  if (type.startsWith('image/')) return 'image'
  if (type.startsWith('audio/')) return 'audio'
  if (type.startsWith('video/')) return 'video'
  if (type === 'application/pdf') return 'pdf'
  if (type.startsWith('text/') || /^application\/(json|xml|javascript|x-ndjson|yaml)$/.test(type)) return 'text'
  return null
}

/** The folders from the bucket's root to `prefix`: "a/b/" → ["a/", "a/b/"]. */
function crumbs(prefix: string): string[] {
  const out: string[] = []
  let i = prefix.indexOf('/')
  while (i >= 0) {
    out.push(prefix.slice(0, i + 1))
    i = prefix.indexOf('/', i + 1)
  }
  return out
}

/**
 * A folder's mark, drawn rather than the 📁 emoji: a system without a colour emoji font (Debian's
 * chromium on a server, many Linux desktops) shows the emoji as an empty box. Decorative: the
 * button's name says "Open folder" and the Type column says "Folder".
 */
function FolderIcon() {
  return (
    <svg class="icon" viewBox="0 0 16 16" aria-hidden="true" focusable="false">
      <path fill="currentColor" d="M1 3.5C1 2.7 1.7 2 2.5 2h3.6l1.5 1.5h5.9c.8 0 1.5.7 1.5 1.5v7.5c0 .8-.7 1.5-1.5 1.5h-11C1.7 14 1 13.3 1 12.5z" />
    </svg>
  )
}

/**
 * A PDF in a frame of its dialog, where Escape still closes the dialog. Keys pressed in the frame's
 * document (a blob: URL of this page, so same-origin) are heard there; but chromium's PDF viewer is
 * a plugin inside it that keeps every key to itself, so when the focus goes into the frame (a
 * click on the PDF) it comes back to the dialog's first button: the PDF still scrolls, zooms and
 * prints by pointer, and Escape closes the dialog. "Open in a new tab" gives the viewer the keyboard.
 */
function PdfFrame(props: { url: string; title: string }) {
  const ref = useRef<HTMLIFrameElement>(null)
  useEffect(() => {
    const frame = ref.current
    if (!frame) return
    const dialog = frame.closest('dialog')
    const back = () => dialog?.querySelector<HTMLElement>('.buttons button')?.focus()
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape') return
      e.preventDefault()
      back()
      dialog?.close()
    }
    const listen = () => {
      try {
        frame.contentWindow?.addEventListener('keydown', onKey)
      } catch {
        // Not readable: the focus guard below still applies.
      }
    }
    const onBlur = () =>
      setTimeout(() => {
        if (document.activeElement === frame) back()
      })
    frame.addEventListener('load', listen)
    window.addEventListener('blur', onBlur)
    listen()
    return () => {
      frame.removeEventListener('load', listen)
      window.removeEventListener('blur', onBlur)
    }
  }, [])
  return <iframe ref={ref} class="preview" src={props.url} title={props.title} />
}

const lastSegment = (path: string) => path.replace(/\/$/, '').split('/').at(-1) ?? path

/**
 * One bucket, browsed by prefix: its folders (common prefixes for "/") and objects, keyset-paged
 * in key order; sorting by size or date orders the page shown (README: Bucket browser). Select
 * several to delete them together; upload files and folders into the current folder; preview,
 * download, share a link, see an object's details and versions.
 */
export function BucketBrowser(props: { apiKey: string; bucket: Bucket; onBack: () => void; onChanged: () => void }) {
  const key = props.apiKey
  const ws = props.bucket
  const [prefix, setPrefix] = useState('')
  const [filter, setFilter] = useState('')
  const [cursors, setCursors] = useState<string[]>([])
  const [page, setPage] = useState<Page | null>(null)
  const [reload, setReload] = useState(0)
  const [sort, setSort] = useState<{ by: SortBy; desc: boolean }>({ by: 'name', desc: false })
  const [selected, setSelected] = useState<Map<string, string>>(new Map())
  const [deleting, setDeleting] = useState(false)
  const [report, setReport] = useState<{ deleted: number; failed: { key: string; message: string }[] } | null>(null)
  const [uploads, startUploads] = useUploads()
  const [lifetime, setLifetime] = useState(3600)
  const [link, setLink] = useState<{ key: string; url: string; expiresAt: string; copied: boolean } | null>(null)
  const [preview, setPreview] = useState<Preview | null>(null)
  const [details, setDetails] = useState<string | null>(null)
  const [dragging, setDragging] = useState(false)
  const [error, run] = useAction()
  const heading = useRef<HTMLHeadingElement>(null)
  const seq = useRef(0)

  useEffect(() => heading.current?.focus(), [prefix])
  useEffect(() => {
    const q = new URLSearchParams({ prefix: prefix + filter, delimiter: '/', limit: String(PAGE_SIZE) })
    const after = cursors.at(-1)
    if (after) q.set('after', after)
    // Typing a filter sends a request per keystroke: only the newest answer is shown.
    const mine = ++seq.current
    void run(async () => {
      const p = await api<Page>(key, 'GET', `/api/v1/workspaces/${encodeURIComponent(ws.id)}/objects?${q}`)
      if (mine === seq.current) setPage(p)
    })
  }, [prefix, filter, cursors, reload])

  const refresh = () => {
    setReload((n) => n + 1)
    props.onChanged()
  }
  const go = (next: string) => {
    setPrefix(next)
    setFilter('')
    setCursors([])
    setSelected(new Map())
    setReport(null)
  }

  const objects = [...(page?.objects ?? [])]
  const dir = sort.desc ? -1 : 1
  if (sort.by === 'size') objects.sort((a, b) => dir * (a.sizeBytes - b.sizeBytes) || (a.key < b.key ? -1 : 1))
  else if (sort.by === 'date') objects.sort((a, b) => dir * a.lastModified.localeCompare(b.lastModified) || (a.key < b.key ? -1 : 1))
  else if (sort.desc) objects.reverse()
  const folders = sort.by === 'name' && sort.desc ? [...(page?.prefixes ?? [])].reverse() : (page?.prefixes ?? [])

  const toggle = (e: ObjectEntry, on: boolean) =>
    setSelected((s) => {
      const next = new Map(s)
      if (on) next.set(e.fileId, e.key)
      else next.delete(e.fileId)
      return next
    })
  const allSelected = objects.length > 0 && objects.every((o) => selected.has(o.fileId))

  /**
   * Each file to `prefix + its path` (a folder's files keep their relative paths), three at a time,
   * each with its own progress bar: stored as S3's PutObject stores it, whatever its type.
   */
  const uploadAll = async (files: File[]) => {
    const base = prefix
    await startUploads(
      files,
      (f) => base + (f.webkitRelativePath || f.name),
      (file, objectKey, onProgress) => putObject(key, ws.id, objectKey, file, onProgress),
    )
    refresh()
  }

  const signedUrl = (e: ObjectEntry, seconds: number) =>
    api<{ url: string; expiresAt: string }>(key, 'GET', `/api/v1/files/${encodeURIComponent(e.fileId)}/signed-url?expiresIn=${seconds}`)
  const download = (e: ObjectEntry) =>
    run(async () => {
      const a = document.createElement('a')
      a.href = (await signedUrl(e, 60)).url
      a.download = lastSegment(e.key)
      a.click()
    })
  const share = (e: ObjectEntry) =>
    run(async () => {
      const s = await signedUrl(e, lifetime)
      setLink({ key: e.key, url: s.url, expiresAt: s.expiresAt, copied: await copyText(s.url) })
    })
  const showPreview = (e: ObjectEntry) =>
    run(async () => {
      const kind = previewKind(e.contentType)
      if (kind === 'pdf') {
        // The page's CSP frames only blob: URLs.
        setPreview({ entry: e, kind, url: URL.createObjectURL(await fetchContent(key, e.fileId)) })
      } else if (kind === 'text') {
        const res = await fetch((await signedUrl(e, 60)).url, { headers: { range: `bytes=0-${TEXT_CAP - 1}` }, credentials: 'omit' })
        if (!res.ok) throw new Error(`The preview could not be read (HTTP ${res.status}).`)
        setPreview({ entry: e, kind, text: await res.text() })
      } else if (kind) {
        // Images, audio and video stream from a signed URL (inline), not through memory.
        setPreview({ entry: e, kind, url: `${(await signedUrl(e, 3600)).url}&disposition=inline` })
      }
    })
  const closePreview = () => {
    if (preview?.kind === 'pdf') URL.revokeObjectURL(preview.url)
    setPreview(null)
  }

  const sortButton = (by: SortBy, label: string) => {
    const active = sort.by === by
    return (
      <th scope="col" aria-sort={active ? (sort.desc ? 'descending' : 'ascending') : 'none'}>
        <button type="button" class="sort" onClick={() => setSort({ by, desc: active ? !sort.desc : false })}>
          {label}
          {active ? (sort.desc ? ' ▼' : ' ▲') : ''}
          <span class="visually-hidden">{active ? `, sorted ${sort.desc ? 'descending' : 'ascending'}` : ', sort'}</span>
        </button>
      </th>
    )
  }
  const folderInput = { webkitdirectory: true } as Record<string, unknown>
  const empty = page && page.prefixes.length === 0 && page.objects.length === 0

  return (
    <section
      class={`card drop${dragging ? ' dragging' : ''}`}
      aria-labelledby="browser-h"
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
      <div class="top">
        <h2 id="browser-h" tabIndex={-1} ref={heading}>
          Bucket {ws.slug}
          {prefix ? `: ${prefix}` : ''}
        </h2>
        <button type="button" onClick={props.onBack}>
          All buckets
        </button>
      </div>
      <nav aria-label="Breadcrumb">
        <ol class="breadcrumbs">
          <li>
            {prefix === '' ? (
              <span aria-current="page">{ws.slug}</span>
            ) : (
              <button type="button" class="link" onClick={() => go('')}>
                {ws.slug}
              </button>
            )}
          </li>
          {crumbs(prefix).map((p) => (
            <li key={p}>
              {p === prefix ? (
                <span aria-current="page">{lastSegment(p)}</span>
              ) : (
                <button type="button" class="link" onClick={() => go(p)}>
                  {lastSegment(p)}
                </button>
              )}
            </li>
          ))}
        </ol>
      </nav>
      <ErrorText error={error} />
      <p class="muted">Upload files of any type here, or drop them on this card: they go into {prefix ? `the folder ${prefix}` : 'the bucket'}.</p>

      <div class="toolbar">
        <TextField
          label="Filter by name prefix"
          value={filter}
          maxLength={1024}
          onValue={(v) => {
            setFilter(v)
            setCursors([])
          }}
        />
        <label class="file-button">
          Upload files here
          <input
            type="file"
            multiple
            onChange={(e) => {
              const files = [...(e.currentTarget.files ?? [])]
              e.currentTarget.value = ''
              void uploadAll(files)
            }}
          />
        </label>
        <label class="file-button">
          Upload a folder here
          <input
            type="file"
            {...folderInput}
            onChange={(e) => {
              const files = [...(e.currentTarget.files ?? [])]
              e.currentTarget.value = ''
              void uploadAll(files)
            }}
          />
        </label>
        <LifetimeSelect value={lifetime} onValue={setLifetime} />
        <button type="button" class="danger" disabled={selected.size === 0} onClick={() => setDeleting(true)}>
          Delete selected ({selected.size})
        </button>
      </div>

      {uploads.length > 0 && (
        <ul class="uploads" aria-label="Uploads to this bucket">
          {uploads.map((u) => (
            <li key={u.id}>
              <span class="name">{u.name}</span>
              <progress max={u.total || 1} value={u.loaded} aria-label={`Upload of ${u.name}`} />
              <span class={u.error ? 'error' : 'muted'}>{u.error ? `Failed: ${u.error}` : u.done ? 'Uploaded' : percent(u.loaded, u.total || 1)}</span>
            </li>
          ))}
        </ul>
      )}
      {report && (
        <div class="notice" role="status">
          <p>
            Deleted {report.deleted} object{report.deleted === 1 ? '' : 's'}
            {report.failed.length > 0 ? `; ${report.failed.length} could not be deleted:` : '.'}
          </p>
          {report.failed.length > 0 && (
            <ul aria-label="Objects not deleted">
              {report.failed.map((f) => (
                <li key={f.key}>
                  <span class="name">{f.key}</span>: <span class="error">{f.message}</span>
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {link && <LinkNotice link={link} name={link.key} label="Share link" />}

      {page && !empty && (
        <table class="stack browser">
          <caption>
            {page.prefixes.length} folder{page.prefixes.length === 1 ? '' : 's'} and {page.objects.length} object{page.objects.length === 1 ? '' : 's'} on this
            page
            {sort.by !== 'name' ? ` (sorted by ${sort.by} within the page)` : ''}
          </caption>
          <thead>
            <tr>
              <th scope="col">
                <label class="check">
                  <input
                    type="checkbox"
                    checked={allSelected}
                    disabled={objects.length === 0}
                    onChange={(e) => objects.forEach((o) => toggle(o, e.currentTarget.checked))}
                  />
                  <span class="visually-hidden">Select all objects on this page</span>
                </label>
              </th>
              {sortButton('name', 'Name')}
              {sortButton('size', 'Size')}
              <th scope="col">Type</th>
              {sortButton('date', 'Last modified')}
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {folders.map((p) => (
              <tr key={p} class="folder">
                <td />
                <th scope="row" data-label="Name" class="name">
                  <button type="button" class="link" aria-label={`Open folder ${lastSegment(p)}`} onClick={() => go(p)}>
                    <FolderIcon />
                    {p.slice(prefix.length)}
                  </button>
                </th>
                <td data-label="Size">—</td>
                <td data-label="Type">Folder</td>
                <td data-label="Last modified">—</td>
                <td class="actions" />
              </tr>
            ))}
            {objects.map((o) => {
              const name = o.key.slice(prefix.length)
              return (
                <tr key={o.fileId} class={selected.has(o.fileId) ? 'selected' : ''}>
                  <td>
                    <label class="check">
                      <input type="checkbox" checked={selected.has(o.fileId)} onChange={(e) => toggle(o, e.currentTarget.checked)} />
                      <span class="visually-hidden">Select {name}</span>
                    </label>
                  </td>
                  <th scope="row" data-label="Name" class="name">
                    <button type="button" class="link" aria-label={`Details of ${name}`} onClick={() => setDetails(o.key)}>
                      {name}
                    </button>
                  </th>
                  <td data-label="Size">{formatBytes(o.sizeBytes)}</td>
                  <td data-label="Type">{o.contentType}</td>
                  <td data-label="Last modified">{formatTime(o.lastModified)}</td>
                  <td class="actions">
                    {previewKind(o.contentType) && (
                      <button type="button" aria-label={`Preview ${name}`} onClick={() => void showPreview(o)}>
                        Preview
                      </button>
                    )}
                    <button type="button" aria-label={`Download ${name}`} onClick={() => void download(o)}>
                      Download
                    </button>
                    <button type="button" aria-label={`Share link to ${name}`} onClick={() => void share(o)}>
                      Share link
                    </button>
                  </td>
                </tr>
              )
            })}
          </tbody>
        </table>
      )}
      {empty && <p class="muted">{filter ? `Nothing here starts with “${filter}”.` : 'This folder is empty.'}</p>}
      <Pager
        cursors={cursors}
        nextCursor={page?.nextAfter}
        onChange={(c) => {
          setCursors(c)
          setSelected(new Map())
        }}
      />

      {deleting && (
        <Confirm
          title="Delete objects"
          message={`Delete ${selected.size} object${selected.size === 1 ? '' : 's'}: ${[...selected.values()].map(lastSegment).join(', ')}?`}
          action="Delete"
          onClose={() => setDeleting(false)}
          onConfirm={async () => {
            const items = [...selected.entries()]
            const results = await Promise.allSettled(items.map(([fileId]) => api(key, 'DELETE', `/api/v1/files/${encodeURIComponent(fileId)}`)))
            const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [{ key: items[i]![1], message: messageOf(r.reason) }] : []))
            setReport({ deleted: items.length - failed.length, failed })
            setSelected(new Map(items.filter((_, i) => results[i]!.status === 'rejected')))
            refresh()
          }}
        />
      )}
      {details !== null && <ObjectDetails apiKey={key} workspaceId={ws.id} objectKey={details} onClose={() => setDetails(null)} onChanged={refresh} />}
      {preview && (
        <Modal title={`Preview of ${lastSegment(preview.entry.key)}`} onClose={closePreview} wide>
          {preview.kind === 'image' && <img class="preview" src={preview.url} alt={`Preview of ${preview.entry.key}`} />}
          {preview.kind === 'pdf' && <PdfFrame url={preview.url} title={`Preview of ${preview.entry.key}`} />}
          {preview.kind === 'audio' && <audio class="preview" controls src={preview.url} aria-label={`Preview of ${preview.entry.key}`} />}
          {preview.kind === 'video' && <video class="preview" controls src={preview.url} aria-label={`Preview of ${preview.entry.key}`} />}
          {preview.kind === 'text' && (
            <>
              <pre class="preview text" tabIndex={0} aria-label={`Preview of ${preview.entry.key}`}>
                {preview.text}
              </pre>
              {preview.entry.sizeBytes > TEXT_CAP && (
                <p class="muted">
                  The first {formatBytes(TEXT_CAP)} of {formatBytes(preview.entry.sizeBytes)}: download it for the rest.
                </p>
              )}
            </>
          )}
          <div class="buttons">
            <button type="button" onClick={closePreview}>
              Close
            </button>
            {preview.kind === 'pdf' && (
              <a class="button" href={preview.url} target="_blank" rel="noopener">
                Open in a new tab
              </a>
            )}
          </div>
        </Modal>
      )}
    </section>
  )
}
