import { useEffect, useState } from 'preact/hooks'
import { api } from './api'
import { formatBytes, formatTime } from './format'
import { ErrorText, Modal, useAction } from './ui'
import { VersionsDialog } from './versions'

/** An object as GET /api/v1/workspaces/:id/objects lists it. */
export interface ObjectEntry {
  key: string
  fileId: string
  sizeBytes: number
  contentType: string
  etag: string
  lastModified: string
}

/** GET /api/v1/workspaces/:id/objects/details (#31): the listing's fields and the rest. */
export interface ObjectDetailsInfo extends ObjectEntry {
  sha256: string | null
  metadata: Record<string, string>
  tags: Record<string, string>
  versionId: string | null
  versioning: 'Enabled' | 'Suspended' | null
  lock: { mode: 'GOVERNANCE' | 'COMPLIANCE' | null; retainUntil: string | null; legalHold: boolean }
  acl: string
  public: boolean
}

function Pairs(props: { label: string; pairs: Record<string, string>; none: string }) {
  const entries = Object.entries(props.pairs)
  if (entries.length === 0) return <dd class="muted">{props.none}</dd>
  return (
    <dd>
      <table class="pairs" aria-label={props.label}>
        <tbody>
          {entries.map(([k, v]) => (
            <tr key={k}>
              <th scope="row">{k}</th>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </dd>
  )
}

/**
 * One object's details: size, type, ETag, SHA-256, user metadata, tags, version, lock state and
 * whether it is public, with its versions (and their restore) a click away. Tags, locks and ACLs
 * are shown, not edited: the API has no route to change them yet (S3 does).
 */
export function ObjectDetails(props: { apiKey: string; workspaceId: string; objectKey: string; onClose: () => void; onChanged: () => void }) {
  const [info, setInfo] = useState<ObjectDetailsInfo | null>(null)
  const [versions, setVersions] = useState(false)
  const [reload, setReload] = useState(0)
  const [error, run] = useAction()
  useEffect(() => {
    const q = new URLSearchParams({ key: props.objectKey })
    void run(async () => setInfo(await api(props.apiKey, 'GET', `/api/v1/workspaces/${encodeURIComponent(props.workspaceId)}/objects/details?${q}`)))
  }, [reload])
  const lock = info?.lock
  return (
    <Modal title={`Details of ${props.objectKey}`} onClose={props.onClose} wide>
      <ErrorText error={error} />
      {info && lock && (
        <dl class="details">
          <dt>Key</dt>
          <dd class="name">{info.key}</dd>
          <dt>Size</dt>
          <dd>
            {formatBytes(info.sizeBytes)} ({info.sizeBytes.toLocaleString()} bytes)
          </dd>
          <dt>Content type</dt>
          <dd>{info.contentType}</dd>
          <dt>Last modified</dt>
          <dd>{formatTime(info.lastModified)}</dd>
          <dt>ETag</dt>
          <dd class="hash">
            <code>{info.etag}</code>
          </dd>
          <dt>SHA-256</dt>
          <dd class="hash">{info.sha256 ? <code>{info.sha256}</code> : <span class="muted">not recorded (sealed with a key of its own)</span>}</dd>
          <dt>Metadata</dt>
          <Pairs label="User metadata" pairs={info.metadata} none="none" />
          <dt>Tags</dt>
          <Pairs label="Tags" pairs={info.tags} none="none" />
          <dt>Version</dt>
          <dd>{info.versioning ? `${info.versionId ?? '—'} (versioning ${info.versioning.toLowerCase()})` : 'Versioning not enabled'}</dd>
          <dt>Retention</dt>
          <dd>{lock.mode ? `${lock.mode} until ${lock.retainUntil ? formatTime(lock.retainUntil) : '—'}` : 'None'}</dd>
          <dt>Legal hold</dt>
          <dd>{lock.legalHold ? 'On' : 'Off'}</dd>
          <dt>Access</dt>
          <dd>
            {info.public ? 'Public' : 'Private'} (ACL {info.acl})
          </dd>
        </dl>
      )}
      <p class="muted">Tags, locks and access are shown here and changed through S3.</p>
      <div class="buttons">
        {info && (
          <button type="button" onClick={() => setVersions(true)}>
            Versions
          </button>
        )}
        <button type="button" onClick={props.onClose}>
          Close
        </button>
      </div>
      {versions && info && (
        <VersionsDialog
          apiKey={props.apiKey}
          fileId={info.fileId}
          name={info.key}
          onClose={() => setVersions(false)}
          onRestored={() => {
            setReload((n) => n + 1)
            props.onChanged()
          }}
        />
      )}
    </Modal>
  )
}
