import { ping, type DB } from '../db/database'
import { probeWritable, type DataDir } from '../lib/data-dir'
import type { BlobStore } from '../blobs/blob-store'

export interface Readiness {
  ready: boolean
  /** `blobStore` only with a remote store (the disk store is the data dir, checked by `storage`). */
  checks: { database: string; storage: string; blobStore?: string }
}

/** Readiness: the database answers, the data dir accepts a write, and a remote blob store answers. */
export async function readiness(db: DB, dataDir: DataDir, store: BlobStore): Promise<Readiness> {
  const checks: Readiness['checks'] = { database: 'ok', storage: 'ok' }
  try {
    ping(db)
  } catch {
    checks.database = 'failed'
  }
  try {
    probeWritable(dataDir)
  } catch (err) {
    checks.storage = `failed: ${(err as NodeJS.ErrnoException).code ?? 'error'}`
  }
  if (store.remote) {
    try {
      await store.probe()
      checks.blobStore = 'ok'
    } catch (err) {
      checks.blobStore = `failed: ${(err as { code?: string }).code ?? 'error'}`
    }
  }
  return { ready: Object.values(checks).every((c) => c === 'ok'), checks }
}
