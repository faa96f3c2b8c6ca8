import { keepPrivate, openConnection, type DB } from './database'

/**
 * The database half of `coffer backup` (services/backup.ts has the whole procedure):
 * a snapshot taken while the live database's write lock is held for a moment, copied with
 * SQLite's online backup API while the server writes freely.
 */

/**
 * Every blob hash the live database lists whose content is a file (read without a lock: the pass
 * that does the bulk). Content stored inline (blob_inline) is in the database snapshot itself.
 */
export function blobShas(db: DB): IterableIterator<string> {
  return db.prepare<[], string>('SELECT b.sha256 FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM blob_inline i WHERE i.sha256 = b.sha256)').pluck().iterate()
}

/**
 * Copies the database at `file` into `dest` as one snapshot. The snapshot's read transaction
 * starts under the write lock of `live` (so no commit and no collection runs meanwhile), and
 * `whileLocked` sees the snapshot's blob hashes then, to pin what appeared since the first pass.
 * Read inside that open transaction, the copy is that snapshot: the backup API only starts a read
 * transaction of its own when none is open, and never restarts while this one holds.
 */
export async function snapshotInto(live: DB, file: string, dataDir: string, dest: string, whileLocked: (shas: Iterable<string>) => void): Promise<void> {
  const reader = openConnection(file, dataDir)
  try {
    live.exec('BEGIN IMMEDIATE')
    try {
      reader.exec('BEGIN')
      // The first read starts the snapshot; nothing can commit until the write lock is released.
      whileLocked(blobShas(reader))
    } finally {
      live.exec('ROLLBACK')
    }
    // The copy holds what the live database holds: 0600 like it (#24).
    keepPrivate(dest)
    await reader.backup(dest)
    reader.exec('COMMIT')
  } finally {
    reader.close()
  }
}

/**
 * Opens a copied database, checks its integrity, and hands over its file count and blob rows.
 * Closing the last connection checkpoints the copy and removes its -wal and -shm files.
 */
export function readCopy(file: string, dataDir: string, each: (blob: { sha256: string; size: number; inline: boolean }) => void): { files: number } {
  const copy = openConnection(file, dataDir)
  try {
    const check = copy.pragma('quick_check', { simple: true })
    if (check !== 'ok') throw new Error(`the database copy failed its integrity check: ${String(check)}`)
    const files = copy.prepare<[], number>('SELECT count(*) FROM files').pluck().get()!
    const rows = copy.prepare<[], { sha256: string; size: number; inline: number }>(
      'SELECT b.sha256, b.size_bytes AS size, EXISTS (SELECT 1 FROM blob_inline i WHERE i.sha256 = b.sha256) AS inline FROM blobs b',
    )
    for (const row of rows.iterate()) each({ sha256: row.sha256, size: row.size, inline: row.inline === 1 })
    return { files }
  } finally {
    copy.close()
  }
}
