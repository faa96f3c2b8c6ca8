import type { ComponentChildren } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { messageOf } from './api'

/** A modal dialog: focus is trapped inside, Escape closes it (the browser's <dialog>). */
export function Modal(props: { title: string; onClose: () => void; children: ComponentChildren; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    ref.current?.showModal()
  }, [])
  return (
    <dialog ref={ref} class={props.wide ? 'wide' : ''} aria-label={props.title} onClose={props.onClose}>
      <h2>{props.title}</h2>
      {props.children}
    </dialog>
  )
}

/** "Are you sure?" with the action's own name on the button. */
export function Confirm(props: { title: string; message: string; action: string; onConfirm: () => Promise<void>; onClose: () => void }) {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const confirm = async () => {
    setBusy(true)
    try {
      await props.onConfirm()
      props.onClose()
    } catch (err) {
      setError(messageOf(err))
      setBusy(false)
    }
  }
  return (
    <Modal title={props.title} onClose={props.onClose}>
      <p>{props.message}</p>
      <ErrorText error={error} />
      <div class="buttons">
        <button type="button" class="danger" disabled={busy} onClick={() => void confirm()}>
          {props.action}
        </button>
        <button type="button" onClick={props.onClose}>
          Cancel
        </button>
      </div>
    </Modal>
  )
}

export function ErrorText(props: { error: string | null }) {
  return props.error ? (
    <p class="error" role="alert">
      {props.error}
    </p>
  ) : null
}

/** A secret shown once (a new API key), ready to copy. */
export function SecretBox(props: { label: string; value: string }) {
  return (
    <label class="secret">
      {props.label}
      <input readOnly value={props.value} onFocus={(e) => e.currentTarget.select()} />
    </label>
  )
}

export function Header(props: { title: string; subtitle: string; onSignOut: () => void }) {
  return (
    <header class="top">
      <div>
        <h1>{props.title}</h1>
        <p class="muted">{props.subtitle}</p>
      </div>
      <button type="button" onClick={props.onSignOut}>
        Sign out
      </button>
    </header>
  )
}

/** Runs an action, showing its error (or clearing the last one); for buttons and forms. */
export function useAction(): [string | null, (fn: () => Promise<void>) => Promise<void>, (e: string | null) => void] {
  const [error, setError] = useState<string | null>(null)
  const run = async (fn: () => Promise<void>) => {
    try {
      setError(null)
      await fn()
    } catch (err) {
      setError(messageOf(err))
    }
  }
  return [error, run, setError]
}
