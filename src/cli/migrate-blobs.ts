import { createDiskStore, createS3Store } from '../core'
import { DiskBlobStore } from '../blobs/disk-blob-store'
import type { BlobStore } from '../blobs/blob-store'
import { migrateBlobs } from '../services/migrate-blobs'
import { EncryptedBlobStore } from '../blobs/encrypted-blob-store'
import { DATA_DIR_OPTION, parse, println, UsageError, withCore, type CliIO } from './io'

export const MIGRATE_HELP = `Usage: coffer migrate-blobs --to s3|disk [--data-dir DIR] [--json]

Copies every blob the database records from the other store into the one named by --to: from the
data dir into the S3 bucket (--to s3, with the COFFER_BLOB_S3_* settings), or back (--to disk).
Each blob is re-hashed on the way; only content that hashes to its name is written. The source is
never modified. Resumable: blobs already in the target at their size are skipped, so an interrupted
run is simply started again. The server may keep running on the source meanwhile. To switch:
run it, stop the server, run it again (it copies only what arrived since), then start the server
with COFFER_BLOB_STORE set to the target, and check with coffer verify. Exits 1 when a blob was
missing or corrupt in the source.`

export async function migrateBlobsCommand(args: string[], io: CliIO): Promise<number> {
  const { values } = parse(args, { ...DATA_DIR_OPTION, to: { type: 'string' }, json: { type: 'boolean' } })
  if (values.help) return (println(io.stdout, MIGRATE_HELP), 0)
  const to = values.to
  if (to !== 's3' && to !== 'disk') throw new UsageError('migrate-blobs needs --to s3 or --to disk')
  return withCore(io, values['data-dir'], async (core) => {
    // The disk side keeps small blobs inline in the database; the S3 store stages in plain files.
    const disk = createDiskStore(core.db, core.dataDir)
    const s3 = createS3Store(core.config, new DiskBlobStore(core.dataDir.blobs, core.dataDir.tmp))
    // An encrypted data dir (#27): both sides are sealed as the served store is, so content is
    // opened from the source and sealed again into the target, never copied in the clear.
    const seal = (s: BlobStore) => (core.store instanceof EncryptedBlobStore ? core.store.over(s) : s)
    const [from, target]: [BlobStore, BlobStore] = to === 's3' ? [seal(disk), seal(s3)] : [seal(s3), seal(disk)]
    try {
      const started = Date.now()
      const r = await migrateBlobs({ db: core.db, from, to: target })
      const seconds = (Date.now() - started) / 1000
      if (values.json) println(io.stdout, JSON.stringify({ to, ...r, seconds }))
      else {
        println(
          io.stdout,
          `migrate-blobs to ${target.description}: ${r.checked} blob(s) checked, ${r.copied} copied (${r.bytesCopied} bytes), ${r.present} already there, ` +
            `${r.missing.length} missing, ${r.corrupt.length} corrupt in the source, in ${seconds.toFixed(1)} s`,
        )
      }
      for (const sha of r.missing) println(io.stderr, `coffer: blob ${sha} is recorded but missing from ${from.description}`)
      for (const sha of r.corrupt) println(io.stderr, `coffer: blob ${sha} in ${from.description} does not hash to its name; not copied`)
      return r.missing.length + r.corrupt.length === 0 ? 0 : 1
    } finally {
      s3.close()
    }
  })
}
