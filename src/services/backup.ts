import path from 'node:path'
import { randomBytes } from 'node:crypto'
import type { DB } from '../db/database'
import { readCopy, snapshotInto, blobShas } from '../db/backup'
import { DiskBlobBackup } from '../blobs/disk-backup'
import { EncryptedBlobStore } from '../blobs/encrypted-blob-store'
import { InlineBlobsRepo } from '../db/repos/inline-blobs'
import { dataDirPaths, type DataDir, makeWorkDir, publishWorkDir, discardDir, copySecret } from '../lib/data-dir'
import { fsyncFile } from '../lib/durable'
import type { BlobStore } from '../blobs/blob-store'

export interface BackupResult {
  dest: string
  /** File rows in the copy (any status, deleted ones within their retention too). */
  files: number
  blobs: number
  bytes: number
  /** Blobs hard-linked (DEST on the data dir's filesystem) and copied (elsewhere). */
  linked: number
  copied: number
  /** Blobs whose content the database itself holds (the disk store's inline blobs): copied with it. */
  inline: number
  /** Blobs the database lists that were already missing from the live data dir (see coffer verify). */
  missing: string[]
  /**
   * Set when the content lives in a remote store (S3): the backup holds the metadata only and
   * its records refer to the objects there, which stay where they are (its description).
   */
  contentStaysIn?: string
}

/** Why a data dir whose metadata is in PostgreSQL is not backed up here (#30). */
export const METADATA_IN_POSTGRES =
  'the metadata is in PostgreSQL, not in the data dir: back it up with pg_dump (e.g. pg_dump --format=custom), ' +
  "and copy the data dir's blobs/ and secret yourself (or the S3 bucket with its own tools); coffer backup copies a data dir whose metadata is its SQLite file"

export interface BackupHooks {
  /** Runs once the snapshot is taken and its blobs are pinned: lets a test change the live data meanwhile. */
  afterSnapshot?: () => void | Promise<void>
}

/**
 * A consistent online copy of a data dir into `dest` (which must not exist, or be empty), that
 * `coffer serve --data-dir dest` serves as it is. The server may keep running throughout.
 *
 * Consistency: the database copy is one snapshot, and every blob it references is in the copy,
 * even one that garbage collection removes from the live data dir while the backup runs:
 * 1. every blob is pinned (blobs/disk-backup.ts) holding no lock: the bulk of the work;
 * 2. under the database write lock (so no commit and no collection runs), the snapshot's read
 *    transaction starts and the blobs that appeared since step 1 are pinned: a short pause;
 * 3. the database pages are copied from that snapshot, with the server writing freely (db/backup.ts);
 * 4. the pinned blobs the snapshot references are linked into the copy, or copied when `dest` is on
 *    another filesystem.
 * Everything is built in `<dest>.tmp-<id>` beside `dest`, fsynced, and renamed into place last:
 * a backup cut short is never mistaken for one, and is recognisable by that name.
 */
export async function backupDataDir(
  source: { sqlite: DB | undefined; dataDir: DataDir; store?: BlobStore },
  dest: string,
  hooks: BackupHooks = {},
): Promise<BackupResult> {
  const { sqlite: db, dataDir, store } = source
  // The snapshot is SQLite's own (db/backup.ts); PostgreSQL's metadata is not in the data dir (#30).
  if (db === undefined) throw new Error(METADATA_IN_POSTGRES)
  const id = randomBytes(6).toString('hex')
  const work = dataDirPaths(`${dest}.tmp-${id}`)
  if (store?.remote) return backupMetadata({ db, dataDir }, work, dest, store, hooks)
  const staging = path.join(dataDir.tmp, `backup-${id}`)
  makeWorkDir(work.root)
  makeWorkDir(staging)
  try {
    const pins = new DiskBlobBackup(dataDir.blobs, staging)
    // An encrypted data dir (#27) keeps a blob under its stored name, a file or an inline row (in
    // the copied database already); content from before encryption was on, under its SHA-256.
    const sealed = store instanceof EncryptedBlobStore ? store : undefined
    const inlineRows = new InlineBlobsRepo(db)
    const pinnedAs = new Map<string, string>()
    const pin = (sha256: string): boolean => {
      if (pinnedAs.has(sha256)) return true
      const name = sealed?.storedName(sha256)
      if (name !== undefined && inlineRows.exists(name)) return true
      for (const key of name !== undefined ? [name, sha256] : [sha256]) {
        if (pins.pin(key)) return (pinnedAs.set(sha256, key), true)
      }
      return false
    }
    for (const sha256 of blobShas(db)) pin(sha256)
    const missing: string[] = []
    await snapshotInto(db, dataDir.db, dataDir.root, work.db, (shas) => {
      for (const sha256 of shas) if (!pin(sha256)) missing.push(sha256)
    })
    await hooks.afterSnapshot?.()
    const absent = new Set(missing)
    const out = { files: 0, blobs: 0, bytes: 0 }
    let inlined = 0
    makeWorkDir(work.blobs)
    out.files = readCopy(work.db, dataDir.root, ({ sha256, size, inline }) => {
      if (absent.has(sha256)) return
      // Content kept inline is in the copied database already.
      const key = pinnedAs.get(sha256)
      if (inline || key === undefined) inlined++
      else pins.transfer(key, work.blobs)
      out.blobs++
      out.bytes += size
    }).files
    fsyncFile(work.db)
    pins.sync(work.blobs)
    makeWorkDir(work.tmp)
    copySecret(dataDir, work)
    publishWorkDir(work.root, dest)
    return { dest, ...out, linked: pins.linked, copied: pins.copied, inline: inlined, missing }
  } catch (err) {
    discardDir(work.root)
    throw err
  } finally {
    discardDir(staging)
  }
}

/**
 * The backup of a data dir whose content is in a remote store: the database snapshot and the
 * secret only. The objects stay in the store; the copy's records point at them. (The store's own
 * durability and, ideally, bucket versioning protect them: a collector run after the backup may
 * delete content that only the backup still references, once its retention has passed.)
 */
async function backupMetadata(source: { db: DB; dataDir: DataDir }, work: DataDir, dest: string, store: BlobStore, hooks: BackupHooks): Promise<BackupResult> {
  const { db, dataDir } = source
  makeWorkDir(work.root)
  try {
    // Nothing to pin (the objects stay in the store), but the statement must run to its end.
    await snapshotInto(db, dataDir.db, dataDir.root, work.db, (shas) => Array.from(shas))
    await hooks.afterSnapshot?.()
    const out = { files: 0, blobs: 0, bytes: 0 }
    out.files = readCopy(work.db, dataDir.root, ({ size }) => {
      out.blobs++
      out.bytes += size
    }).files
    fsyncFile(work.db)
    makeWorkDir(work.blobs)
    makeWorkDir(work.tmp)
    copySecret(dataDir, work)
    publishWorkDir(work.root, dest)
    return { dest, ...out, linked: 0, copied: 0, inline: 0, missing: [], contentStaysIn: store.description }
  } catch (err) {
    discardDir(work.root)
    throw err
  }
}
