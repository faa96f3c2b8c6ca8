// The console's only way to the server: the public API, with the key as a Bearer header.
// No cookies are ever set or sent, so there is nothing for another site to ride on (no CSRF).

/** An API error as the user should read it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

export type Role = 'tenant' | 'admin'
export interface Session {
  key: string
  role: Role
}

const SESSION = 'coffer.session'

/** sessionStorage: the key lives as long as the tab and is never written to disk by us. */
export function loadSession(): Session | null {
  try {
    const s = JSON.parse(sessionStorage.getItem(SESSION) ?? 'null') as Session | null
    return s && typeof s.key === 'string' && (s.role === 'tenant' || s.role === 'admin') ? s : null
  } catch {
    return null
  }
}
export const saveSession = (s: Session): void => sessionStorage.setItem(SESSION, JSON.stringify(s))
export const clearSession = (): void => sessionStorage.removeItem(SESSION)

interface Envelope {
  error?: { code?: unknown; message?: unknown; details?: { errors?: { path: string; message: string }[] } }
}

/** The contract's `{error: {code, message, details}}`, or a plain sentence for anything else. */
function errorOf(status: number, text: string): ApiError {
  let body: Envelope | undefined
  try {
    body = JSON.parse(text) as Envelope
  } catch {
    body = undefined
  }
  const e = body?.error
  if (e && typeof e.message === 'string' && typeof e.code === 'string') {
    const more = (e.details?.errors ?? []).slice(1).map((x) => `${x.path}: ${x.message}`)
    return new ApiError(status, e.code, [e.message, ...more].join('; '))
  }
  return new ApiError(status, `HTTP_${status}`, `The server answered HTTP ${status} without an explanation.`)
}

const unreachable = () => new ApiError(0, 'NETWORK', 'Cannot reach the Coffer server. Is it running? Try again.')

function headers(key: string, json: boolean): Record<string, string> {
  return { authorization: `Bearer ${key}`, ...(json ? { 'content-type': 'application/json' } : {}) }
}

export async function api<T>(key: string, method: string, path: string, body?: unknown): Promise<T> {
  let res: Response
  try {
    res = await fetch(path, {
      method,
      headers: headers(key, body !== undefined),
      body: body === undefined ? null : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
    })
  } catch {
    throw unreachable()
  }
  const text = await res.text()
  if (!res.ok) throw errorOf(res.status, text)
  return (text ? JSON.parse(text) : undefined) as T
}

/** A file's content, fetched with the key, for a preview shown from a blob: URL. */
export async function fetchContent(key: string, fileId: string): Promise<Blob> {
  let res: Response
  try {
    res = await fetch(`/api/v1/files/${encodeURIComponent(fileId)}/download?disposition=inline`, { headers: headers(key, false), credentials: 'omit' })
  } catch {
    throw unreachable()
  }
  if (!res.ok) throw errorOf(res.status, await res.text())
  return res.blob()
}

/**
 * One file into a bucket at `objectKey`, as an S3 PutObject stores it (whatever its type), with the
 * key as a Bearer header; by XHR, the one browser API that reports upload progress. Resolves with
 * the object as the bucket lists it.
 */
export function putObject(
  key: string,
  workspaceId: string,
  objectKey: string,
  file: File,
  onProgress: (loaded: number, total: number) => void,
): Promise<{ key: string; fileId: string; sizeBytes: number; contentType: string }> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('PUT', `/api/v1/workspaces/${encodeURIComponent(workspaceId)}/objects?${new URLSearchParams({ key: objectKey })}`)
    xhr.setRequestHeader('authorization', `Bearer ${key}`)
    // A browser gives an empty type for an extension it does not know: stored as bytes of no particular type, as S3 does.
    xhr.setRequestHeader('content-type', file.type || 'application/octet-stream')
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size)
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(file.size, file.size)
        resolve(JSON.parse(xhr.responseText) as { key: string; fileId: string; sizeBytes: number; contentType: string })
      } else reject(errorOf(xhr.status, xhr.responseText))
    }
    xhr.onerror = () => reject(unreachable())
    xhr.send(file)
  })
}

/** Puts text on the clipboard; false where the browser refuses (plain http on a LAN address). */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text)
    return true
  } catch {
    return false
  }
}

export const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err))
