import { useState } from 'preact/hooks'
import { messageOf } from './api'

/** One file's row in a view's upload list: its name, how far it got, how it ended. */
export interface UploadRow {
  id: number
  name: string
  loaded: number
  total: number
  error: string | null
  done: boolean
}

/** Parallel PUTs per batch: enough to fill a link, few enough to keep each bar moving. */
const PARALLEL_UPLOADS = 3
let uploadSeq = 0

/** How a view sends one file: under `name`, reporting its progress. */
export type SendFile = (file: File, name: string, onProgress: (loaded: number, total: number) => void) => Promise<unknown>

/**
 * The upload queue of the files table and the bucket browser (#31): `uploadAll` lists every file at
 * once (named by `nameOf`), then sends them PARALLEL_UPLOADS at a time, each with its own progress;
 * a failure shows on its row and the others go on. `afterEach` runs as each file ends; the promise
 * resolves once all have.
 */
export function useUploads(): [UploadRow[], (files: File[], nameOf: (f: File) => string, send: SendFile, afterEach?: () => void) => Promise<void>] {
  const [uploads, setUploads] = useState<UploadRow[]>([])
  const patch = (id: number, change: Partial<UploadRow>) => setUploads((list) => list.map((u) => (u.id === id ? { ...u, ...change } : u)))
  const uploadAll = async (files: File[], nameOf: (f: File) => string, send: SendFile, afterEach?: () => void) => {
    const queued = files.map((file) => ({ file, row: { id: ++uploadSeq, name: nameOf(file), loaded: 0, total: file.size, error: null, done: false } }))
    setUploads((list) => [...queued.map((q) => q.row), ...list])
    const next = async (): Promise<void> => {
      const item = queued.shift()
      if (!item) return
      try {
        await send(item.file, item.row.name, (loaded, total) => patch(item.row.id, { loaded, total }))
        patch(item.row.id, { done: true })
      } catch (err) {
        patch(item.row.id, { error: messageOf(err) })
      }
      afterEach?.()
      return next()
    }
    await Promise.all(Array.from({ length: Math.min(PARALLEL_UPLOADS, queued.length) }, next))
  }
  return [uploads, uploadAll]
}
