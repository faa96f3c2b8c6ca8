import type { ComponentChildren } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { copyText, messageOf } from './api'
import { formatBytes, formatTime, percent } from './format'

/**
 * A modal dialog: focus is trapped inside, Escape closes it (the browser's <dialog>). When it goes,
 * the focus goes back to what had it before (the button that opened it), whether it was closed by
 * Escape or by one of its buttons, so a keyboard user carries on where they were (#31).
 */
export function Modal(props: { title: string; onClose: () => void; children: ComponentChildren; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null)
  const gone = useRef(false)
  useEffect(() => {
    const opener = document.activeElement
    const dialog = ref.current
    dialog?.showModal()
    return () => {
      // Closed by one of its buttons, the dialog is still modal here, the page behind it inert, and
      // focus() there would do nothing (the focus then fell to the body once the dialog was removed,
      // depending on timing): close it first. Its `close` event comes later and must not call
      // onClose a second time.
      gone.current = true
      if (dialog?.open) dialog.close()
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus()
    }
  }, [])
  const closed = () => {
    if (!gone.current) props.onClose()
  }
  return (
    <dialog ref={ref} class={props.wide ? 'wide' : ''} aria-label={props.title} onClose={closed}>
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

/**
 * A secret shown once (a new API key), ready to copy: a read-only field that selects itself on
 * focus, and a Copy button that says whether the copy worked (the text, not a colour, tells).
 */
export function SecretBox(props: { label: string; value: string }) {
  const [copied, setCopied] = useState<boolean | null>(null)
  return (
    <div class="secret">
      <label>
        {props.label}
        <input readOnly value={props.value} spellcheck={false} onFocus={(e) => e.currentTarget.select()} />
      </label>
      <button type="button" aria-label={`Copy ${props.label}`} onClick={() => void copyText(props.value).then(setCopied)}>
        Copy
      </button>
      <span role="status" class="muted">
        {copied === true ? 'Copied' : copied === false ? 'Copy refused by the browser: select the field and copy it by hand' : ''}
      </span>
    </div>
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

/** A text input inside its label (the label names it for screen readers and tests); `onValue` gets each edit. */
export function TextField(props: {
  label: string
  value: string
  onValue: (value: string) => void
  required?: boolean
  maxLength?: number
  placeholder?: string
  pattern?: string
}) {
  const { label, value, onValue, ...input } = props
  return (
    <label>
      {label}
      <input {...input} value={value} onInput={(e) => onValue(e.currentTarget.value)} />
    </label>
  )
}

/** A list of records as a table that stacks into labelled cards on narrow screens (`table.stack`). */
export function DataTable(props: { columns: string[]; caption?: ComponentChildren; children: ComponentChildren }) {
  return (
    <table class="stack">
      {props.caption !== undefined && <caption>{props.caption}</caption>}
      <thead>
        <tr>
          {props.columns.map((c) => (
            <th key={c} scope="col">
              {c}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{props.children}</tbody>
    </table>
  )
}

/**
 * Previous and next over a cursor-paginated list (the API's `nextCursor`): `cursors` is the path
 * to the page shown, empty on the first one; going back drops the last.
 */
export function Pager(props: { cursors: string[]; nextCursor: string | null | undefined; onChange: (cursors: string[]) => void }) {
  const { cursors, nextCursor } = props
  return (
    <div class="buttons">
      <button type="button" disabled={cursors.length === 0} onClick={() => props.onChange(cursors.slice(0, -1))}>
        Previous page
      </button>
      <button type="button" disabled={!nextCursor} onClick={() => nextCursor && props.onChange([...cursors, nextCursor])}>
        Next page
      </button>
    </div>
  )
}

/**
 * Storage used against a quota: a meter (high from 90%) and "1.5 MiB of 500 MiB used (0%)"; with
 * no quota (null: unlimited), the amount used and "no limit", and no meter (there is nothing to fill).
 */
export function Usage(props: { used: number; quota: number | null; label: string; id?: string }) {
  const { used, quota } = props
  if (quota === null) {
    return (
      <span class="usage" id={props.id}>
        {formatBytes(used)} used (no limit)
      </span>
    )
  }
  return (
    <>
      <meter id={props.id} min={0} max={Math.max(quota, 1)} high={quota * 0.9} value={used} aria-label={props.label} />
      <span class="usage">
        {/* An unlimited quota is stored as the largest safe integer. */}
        {quota >= Number.MAX_SAFE_INTEGER
          ? `${formatBytes(used)} used (no limit)`
          : `${formatBytes(used)} of ${formatBytes(quota)} used (${percent(used, quota)})`}
      </span>
    </>
  )
}

/** A signed link just made: announced, with the URL in a field to copy from when the clipboard refused. */
export function LinkNotice(props: { link: { url: string; expiresAt: string; copied: boolean }; name: string; label: string }) {
  const { link } = props
  return (
    <div class="notice" role="status">
      <p>
        {link.copied ? 'Link copied' : 'Link ready (copy it from the field)'} for {props.name}, valid until {formatTime(link.expiresAt)}.
      </p>
      <input readOnly aria-label={props.label} value={link.url} onFocus={(e) => e.currentTarget.select()} />
    </div>
  )
}

/** How long a signed link made in the console lasts (the API allows 60 s to 1 day). */
const LIFETIMES = [
  { seconds: 300, label: '5 minutes' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 86400, label: '1 day' },
]

/** The "Link lifetime" choice of the views that make signed links, in seconds. */
export function LifetimeSelect(props: { value: number; onValue: (seconds: number) => void }) {
  return (
    <label>
      Link lifetime
      <select value={props.value} onChange={(e) => props.onValue(Number(e.currentTarget.value))}>
        {LIFETIMES.map((l) => (
          <option key={l.seconds} value={l.seconds}>
            {l.label}
          </option>
        ))}
      </select>
    </label>
  )
}
