import { render } from 'preact'
import { useState } from 'preact/hooks'
import { api, ApiError, clearSession, loadSession, saveSession, type Session } from './api'
import { ErrorText } from './ui'
import { TenantView } from './tenant-view'
import { AdminView } from './admin-view'
import './console.css'

/** Which kind of key this is: a tenant's (its profile answers) or the admin key (the tenant list answers). */
async function roleOf(key: string): Promise<Session['role']> {
  try {
    await api(key, 'GET', '/api/v1/tenant/info')
    return 'tenant'
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) throw err
  }
  try {
    await api(key, 'GET', '/api/v1/admin/tenants?limit=1')
    return 'admin'
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) throw new ApiError(401, 'UNAUTHORIZED', 'This key is neither a tenant API key nor the admin key.')
    throw err
  }
}

function SignIn(props: { onSignedIn: (s: Session) => void }) {
  const [key, setKey] = useState('')
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    try {
      const k = key.trim()
      props.onSignedIn({ key: k, role: await roleOf(k) })
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err))
      setBusy(false)
    }
  }
  return (
    <form class="card sign-in" onSubmit={(e) => void submit(e)}>
      <h1>Coffer</h1>
      <p class="muted">Sign in with a tenant API key or the admin key. It is kept in this tab only.</p>
      <label>
        API key
        <input type="password" name="key" required autoFocus autoComplete="off" spellcheck={false} value={key} onInput={(e) => setKey(e.currentTarget.value)} />
      </label>
      <ErrorText error={error} />
      <button type="submit" class="primary" disabled={busy || key.trim() === ''}>
        Sign in
      </button>
    </form>
  )
}

function App() {
  const [session, setSession] = useState(loadSession)
  if (!session) {
    return (
      <SignIn
        onSignedIn={(s) => {
          saveSession(s)
          setSession(s)
        }}
      />
    )
  }
  const signOut = () => {
    clearSession()
    setSession(null)
  }
  return session.role === 'admin' ? <AdminView apiKey={session.key} onSignOut={signOut} /> : <TenantView apiKey={session.key} onSignOut={signOut} />
}

render(<App />, document.getElementById('app')!)
