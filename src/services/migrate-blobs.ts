import { Readable } from 'node:stream'
import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import { BlobsRepo } from '../db/repos/blobs'
import { BlobNotFoundError, type BlobStore } from '../blobs/blob-store'

export interface MigrateReport {
  /** Blob records walked. */
  checked: number
  /** Copied now. */
  copied: number
  bytesCopied: number
  /** Already in the target at the recorded size (an earlier, interrupted run; or identical content). */
  present: number
  /** Recorded but absent from the source (collected meanwhile, or lost: see coffer verify). */
  missing: string[]
  /** Read from the source but not hashing to their name or not of the recorded size: not copied. */
  corrupt: string[]
}

/**
 * Copies every blob the database records from one store to the other (disk to S3 or back),
 * re-hashing each on the way and writing only content that hashes to its name. Resumable: what the
 * target already holds at the recorded size is skipped (one listing of the target), so a run cut
 * short is simply run again. The server may keep running on the source meanwhile: content uploaded
 * during the run is copied by the next run, content collected meanwhile is reported missing (its
 * copy, if made, is an orphan the target's `coffer gc` sweeps). The source is never modified.
 */
export async function migrateBlobs(deps: { db: DB | Engine; from: BlobStore; to: BlobStore }): Promise<MigrateReport> {
  const { from, to } = deps
  const blobs = new BlobsRepo(deps.db)
  const report: MigrateReport = { checked: 0, copied: 0, bytesCopied: 0, present: 0, missing: [], corrupt: [] }
  const inTarget = new Map<string, number>()
  for await (const b of to.list()) inTarget.set(b.sha256, b.size)
  for (let after = ''; ;) {
    const rows = blobs.sizesAfter(after, 500)
    for (const { sha256, size } of rows) {
      report.checked++
      if (inTarget.get(sha256) === size) {
        report.present++
        continue
      }
      let body: Readable
      try {
        const opened = await from.open(sha256)
        body = Buffer.isBuffer(opened.body) ? Readable.from([opened.body]) : opened.body
      } catch (err) {
        if (!(err instanceof BlobNotFoundError)) throw err
        report.missing.push(sha256)
        continue
      }
      let longer = false
      const staged = await to
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
        await to.place(staged)
        // What a commit does: the disk store writes content it keeps inline here, durably. Safe to
        // run twice (a PostgreSQL retry): ensurePlaced writes nothing that is there already.
        engineOf(deps.db).transaction(() => to.ensurePlaced(staged))
        report.copied++
        report.bytesCopied += size
      } finally {
        await to.discard(staged)
      }
    }
    if (rows.length < 500) break
    after = rows.at(-1)!.sha256
  }
  return report
}
