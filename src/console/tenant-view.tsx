import { useEffect, useState } from 'preact/hooks'
import { api } from './api'
import { ErrorText, Header, Usage, useAction } from './ui'
import { Deliveries } from './deliveries'
import { DeletedFiles, VersionsDialog } from './versions'
import { AccessKeys } from './access-keys'
import { Buckets } from './buckets'

/** The tenant's places, one per thing: its buckets (home), what was deleted, webhooks, S3 access keys. */
const SECTIONS = [
  { id: 'buckets', label: 'Buckets' },
  { id: 'deleted', label: 'Deleted files' },
  { id: 'webhooks', label: 'Webhooks' },
  { id: 'keys', label: 'Access keys' },
] as const
type Section = (typeof SECTIONS)[number]['id']

/** The section the address names (#keys), so that a reload or a bookmark lands where it was. */
const sectionOf = (hash: string): Section => SECTIONS.find((s) => `#${s.id}` === hash)?.id ?? 'buckets'

/**
 * A tenant's console: its name and storage used on top, a small navigation, and one section at a
 * time, the buckets first (a workspace is shown as the bucket it is on the S3 side). A bucket's
 * name opens it in the bucket browser, where files of any type are uploaded, browsed and shared.
 */
export function TenantView(props: { apiKey: string; onSignOut: () => void }) {
  const key = props.apiKey
  const [name, setName] = useState('')
  const [quota, setQuota] = useState<{ quotaBytes?: number | null; usedBytes: number } | null>(null)
  const [section, show] = useState<Section>(() => sectionOf(location.hash))
  const [version, setVersion] = useState(0)
  const [versionsOf, setVersionsOf] = useState<{ fileId: string; name: string } | null>(null)
  const [error, run] = useAction()
  const refresh = () => setVersion((v) => v + 1)

  useEffect(() => {
    void run(async () => setName((await api<{ name: string }>(key, 'GET', '/api/v1/tenant/info')).name))
  }, [])
  useEffect(() => {
    void run(async () => setQuota(await api(key, 'GET', '/api/v1/tenant/quota')))
  }, [version, section])

  const setSection = (s: Section) => {
    history.replaceState(null, '', s === 'buckets' ? location.pathname : `#${s}`)
    show(s)
  }

  return (
    <div class="view">
      <Header title="Coffer" subtitle={name ? `Tenant: ${name}` : 'Tenant'} onSignOut={props.onSignOut} />
      <ErrorText error={error} />
      {quota && (
        <p class="gauge storage">
          <span>Storage</span>
          <Usage id="quota" used={quota.usedBytes} quota={quota.quotaBytes ?? null} label="Storage used" />
        </p>
      )}
      <nav class="sections" aria-label="Sections">
        {SECTIONS.map((s) => (
          <button key={s.id} type="button" class="tab" aria-current={section === s.id ? 'page' : undefined} onClick={() => setSection(s.id)}>
            {s.label}
          </button>
        ))}
      </nav>

      {section === 'buckets' && <Buckets apiKey={key} onChanged={refresh} />}
      {section === 'deleted' && <DeletedFiles apiKey={key} refresh={version} onVersions={(f) => setVersionsOf({ fileId: f.fileId, name: f.originalName })} />}
      {section === 'webhooks' && <Deliveries apiKey={key} />}
      {section === 'keys' && <AccessKeys apiKey={key} />}

      {versionsOf && <VersionsDialog apiKey={key} fileId={versionsOf.fileId} name={versionsOf.name} onClose={() => setVersionsOf(null)} onRestored={refresh} />}
    </div>
  )
}
