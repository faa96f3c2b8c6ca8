import { Readable } from 'node:stream'
import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import { BlobsRepo } from '../db/repos/blobs'
import { EncryptionRepo } from '../db/repos/encryption'
import { BlobNotFoundError } from '../blobs/blob-store'
import type { EncryptedBlobStore } from '../blobs/encrypted-blob-store'

export interface EncryptReport {
  /** Blob records walked. */
  checked: number
  /** Sealed now (and their copy in the clear removed). */
  sealed: number
  bytesSealed: number
  /** Sealed already (an earlier, interrupted run, or content uploaded since encryption was on). */
  present: number
  /** Recorded but stored neither sealed nor in the clear (collected meanwhile, or lost: coffer verify). */
  missing: string[]
  /** In the clear but not hashing to their name or not of the recorded size: left as they are. */
  corrupt: string[]
  /** True once nothing is left in the clear: the store stops reading content in the clear. */
  done: boolean
}

/**
 * Turning encryption on for a data dir that has content (#27), in the shape of `coffer
 * migrate-blobs`: every recorded blob still stored in the clear (under its SHA-256) is read,
 * re-hashed, sealed under its name, committed like an upload (ensurePlaced), and only then its
 * copy in the clear removed. Resumable: what is sealed already is skipped, so a run cut short is
 * simply run again. When a run finds nothing missing or corrupt, the data dir is marked sealed and
 * content in the clear is never read again. The server may keep running meanwhile.
 */
export async function encryptBlobs(deps: { db: DB | Engine; store: EncryptedBlobStore }): Promise<EncryptReport> {
  const { db, store } = deps
  const engine = engineOf(db)
  const { inner } = store
  const blobs = new BlobsRepo(db)
  const repo = new EncryptionRepo(db)
  const report: EncryptReport = { checked: 0, sealed: 0, bytesSealed: 0, present: 0, missing: [], corrupt: [], done: false }
  const removePlain = async (sha256: string) => {
    if (inner.remote) await inner.remove(sha256)
    // In a write transaction: on SQLite its lock orders it with an upload's ensurePlaced of the
    // same hash. Idempotent, so a run again (PostgreSQL's retry, #30) finds it done.
    else engine.transaction(() => inner.removeSync(sha256))
  }
  for (let after = ''; ;) {
    const rows = blobs.sizesAfter(after, 500)
    for (const { sha256, size } of rows) {
      report.checked++
      if (await store.sealedExists(sha256)) {
        // Content uploaded again after encryption was turned on: its copy in the clear goes too.
        await removePlain(sha256)
        report.present++
        continue
      }
      let body: Readable
      try {
        const opened = await inner.open(sha256)
        body = Buffer.isBuffer(opened.body) ? Readable.from([opened.body]) : opened.body
      } catch (err) {
        if (!(err instanceof BlobNotFoundError)) throw err
        report.missing.push(sha256)
        continue
      }
      let longer = false
      const staged = await store
        .stage(body, {
          maxBytes: size,
          expectedBytes: size,
          onOverflow: () => {
            longer = true
            return new Error(`blob ${sha256} is longer than its recorded ${size} bytes`)
          },
        })
        .catch((err: unknown) => {
          if (longer) return undefined
          throw err
        })
      if (staged === undefined) {
        report.corrupt.push(sha256)
        continue
      }
      try {
        if (staged.sha256 !== sha256 || staged.size !== size) {
          report.corrupt.push(sha256)
          continue
        }
        await store.place(staged)
        engine.transaction(() => store.ensurePlaced(staged))
      } finally {
        await store.discard(staged)
      }
      await removePlain(sha256)
      report.sealed++
      report.bytesSealed += size
    }
    if (rows.length < 500) break
    after = rows.at(-1)!.sha256
  }
  if (report.missing.length + report.corrupt.length === 0) {
    repo.markSealedAll()
    report.done = true
  }
  return report
}
