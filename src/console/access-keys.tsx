import { useEffect, useState } from 'preact/hooks'
import { api, ApiError } from './api'
import { formatTime } from './format'
import { Confirm, DataTable, ErrorText, Modal, SecretBox, useAction } from './ui'

interface Credential {
  accessKeyId: string
  createdAt: string
}
interface Created extends Credential {
  secretAccessKey: string
}

/**
 * The tenant's S3 access keys (#31): list, create (the secret shown once, to copy), revoke after a
 * confirmation. When the admin has turned self-service off, the API answers 403
 * SELF_SERVICE_DISABLED and the card says so instead of offering what would be refused.
 */
export function AccessKeys(props: { apiKey: string }) {
  const key = props.apiKey
  const [keys, setKeys] = useState<Credential[] | null>(null)
  const [disabled, setDisabled] = useState(false)
  const [created, setCreated] = useState<Created | null>(null)
  const [revoking, setRevoking] = useState<Credential | null>(null)
  const [notice, setNotice] = useState<string | null>(null)
  const [error, run, setError] = useAction()

  const load = () =>
    run(async () => {
      try {
        setKeys((await api<{ credentials: Credential[] }>(key, 'GET', '/api/v1/tenant/s3-credentials')).credentials)
        setDisabled(false)
      } catch (err) {
        if (err instanceof ApiError && err.code === 'SELF_SERVICE_DISABLED') return setDisabled(true)
        throw err
      }
    })
  useEffect(() => void load(), [])

  const create = () =>
    run(async () => {
      setNotice(null)
      try {
        setCreated(await api<Created>(key, 'POST', '/api/v1/tenant/s3-credentials'))
      } catch (err) {
        if (err instanceof ApiError && err.code === 'SELF_SERVICE_DISABLED') return setDisabled(true)
        throw err
      }
      await load()
    })

  return (
    <section class="card" aria-labelledby="keys-h">
      <h2 id="keys-h">Access keys</h2>
      <p class="muted">S3 credentials of this tenant, for the AWS CLI, SDKs, rclone and other S3 tools.</p>
      <ErrorText error={error} />
      {disabled ? (
        <p class="notice off" role="status">
          Self-service access keys are turned off for this tenant by the administrator. Ask them to create or revoke S3 keys for you.
        </p>
      ) : (
        <>
          {notice && (
            <p class="notice" role="status">
              {notice}
            </p>
          )}
          {keys && keys.length === 0 && <p class="muted">No access keys yet.</p>}
          {keys && keys.length > 0 && (
            <DataTable caption={`${keys.length} access key${keys.length === 1 ? '' : 's'}`} columns={['Access key ID', 'Created', 'Actions']}>
              {keys.map((k) => (
                <tr key={k.accessKeyId}>
                  <th scope="row" data-label="Access key ID" class="name">
                    <code>{k.accessKeyId}</code>
                  </th>
                  <td data-label="Created">{formatTime(k.createdAt)}</td>
                  <td class="actions">
                    <button type="button" class="danger" aria-label={`Revoke access key ${k.accessKeyId}`} onClick={() => setRevoking(k)}>
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </DataTable>
          )}
          <div class="buttons">
            <button type="button" class="primary" onClick={() => void create()}>
              Create access key
            </button>
          </div>
        </>
      )}
      {created && (
        <Modal title="New access key" onClose={() => setCreated(null)}>
          <p>
            <strong>Copy the secret access key now: you will not see it again.</strong> Coffer keeps it sealed and never shows it twice; if you lose it, revoke
            this key and create another.
          </p>
          <SecretBox label="Access key ID" value={created.accessKeyId} />
          <SecretBox label="Secret access key" value={created.secretAccessKey} />
          <div class="buttons">
            <button type="button" class="primary" onClick={() => setCreated(null)}>
              Done
            </button>
          </div>
        </Modal>
      )}
      {revoking && (
        <Confirm
          title="Revoke access key"
          message={`Revoke ${revoking.accessKeyId}? Every S3 request signed with it is refused from now on.`}
          action="Revoke"
          onClose={() => setRevoking(null)}
          onConfirm={async () => {
            setError(null)
            await api(key, 'DELETE', `/api/v1/tenant/s3-credentials/${encodeURIComponent(revoking.accessKeyId)}`)
            setNotice(`Access key ${revoking.accessKeyId} revoked.`)
            await load()
          }}
        />
      )}
    </section>
  )
}
