import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import type { Core } from '../core'
import { openConnection, type DB } from '../db/database'
import { fsyncDir } from '../lib/data-dir'

export interface BackupResult {
  dest: string
  /** File rows in the copy (any status, deleted ones within their retention too). */
  files: number
  blobs: number
  bytes: number
  /** Blobs hard-linked (DEST on the data dir's filesystem) and copied (elsewhere). */
  linked: number
  copied: number
  /** Blobs the database lists that were already missing from the live data dir (see coffer verify). */
  missing: string[]
}

export interface BackupHooks {
  /** Runs once the snapshot is taken and its blobs are pinned: lets a test change the live data meanwhile. */
  afterSnapshot?: () => void | Promise<void>
}

/**
 * A consistent online copy of a data dir into `dest` (which must not exist, or be empty), that
 * `coffer serve --data-dir dest` serves as it is. The server may keep running throughout.
 *
 * Consistency: the database copy is one snapshot (SQLite's online backup API, read inside one read
 * transaction), and every blob it references is in the copy, even one that garbage collection
 * removes from the live data dir while the backup runs. Blobs are immutable, so a hard link is as
 * good as a copy; the garbage collector only unlinks names, so a second name keeps the content:
 * 1. every blob is hard-linked into a staging dir inside the data dir's tmp/ (same filesystem),
 *    holding no lock: the bulk of the work;
 * 2. under the database write lock (so no commit and no collection runs), the snapshot's read
 *    transaction starts and the blobs that appeared since step 1 are pinned: a short pause;
 * 3. the database pages are copied from that snapshot, with the server writing freely;
 * 4. the pinned blobs the snapshot references are linked into the copy, or copied when `dest` is on
 *    another filesystem (EXDEV).
 * Everything is built in `<dest>.tmp-<id>` beside `dest`, fsynced, and renamed into place last:
 * a backup cut short is never mistaken for one, and is recognisable by that name.
 */
export async function backupDataDir(core: Core, dest: string, hooks: BackupHooks = {}): Promise<BackupResult> {
  const id = randomBytes(6).toString('hex')
  const work = `${dest}.tmp-${id}`
  const staging = path.join(core.dataDir.tmp, `backup-${id}`)
  fs.mkdirSync(work, { mode: 0o700 })
  fs.mkdirSync(staging, { mode: 0o700 })
  try {
    const { missing } = await snapshot(core, staging, path.join(work, 'coffer.db'))
    await hooks.afterSnapshot?.()
    const result = transferBlobs(core, staging, work, new Set(missing))
    fs.mkdirSync(path.join(work, 'tmp'), { mode: 0o700 })
    if (fs.existsSync(core.dataDir.secret)) copyDurable(core.dataDir.secret, path.join(work, 'secret'), 0o600)
    fsyncDir(work)
    fs.renameSync(work, dest)
    fsyncDir(path.dirname(dest))
    return { dest, ...result, missing }
  } catch (err) {
    fs.rmSync(work, { recursive: true, force: true })
    throw err
  } finally {
    fs.rmSync(staging, { recursive: true, force: true })
  }
}

/** Steps 1-3: pins every blob the snapshot references and writes the snapshot to `dbCopy`. */
async function snapshot(core: Core, staging: string, dbCopy: string): Promise<{ missing: string[] }> {
  const pinned = new Set<string>()
  const pin = (sha256: string): boolean => {
    try {
      fs.linkSync(core.store.pathOf(sha256), path.join(staging, sha256))
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    pinned.add(sha256)
    return true
  }
  const shas = (db: DB) => db.prepare<[], string>('SELECT sha256 FROM blobs').pluck().iterate()
  for (const sha256 of shas(core.db)) pin(sha256)

  const missing: string[] = []
  const reader = openConnection(core.dataDir.db, core.dataDir.root)
  try {
    core.db.exec('BEGIN IMMEDIATE')
    try {
      reader.exec('BEGIN')
      // The first read starts the snapshot; nothing can commit until the write lock is released.
      for (const sha256 of shas(reader)) if (!pinned.has(sha256) && !pin(sha256)) missing.push(sha256)
    } finally {
      core.db.exec('ROLLBACK')
    }
    // Read inside the open transaction, the copy is that snapshot: the backup API only starts a
    // read transaction of its own when none is open, and never restarts while this one holds.
    await reader.backup(dbCopy)
    reader.exec('COMMIT')
  } finally {
    reader.close()
  }
  return { missing }
}

/** Step 4: links (or copies) into `work` each blob the copied database references. */
function transferBlobs(core: Core, staging: string, work: string, missing: ReadonlySet<string>) {
  const copy = openConnection(path.join(work, 'coffer.db'), core.dataDir.root)
  const out = { files: 0, blobs: 0, bytes: 0, linked: 0, copied: 0 }
  const dirs = new Set<string>()
  let canLink = true
  fs.mkdirSync(path.join(work, 'blobs', 'sha256'), { recursive: true, mode: 0o700 })
  try {
    const check = copy.pragma('quick_check', { simple: true })
    if (check !== 'ok') throw new Error(`the database copy failed its integrity check: ${String(check)}`)
    out.files = copy.prepare<[], number>('SELECT count(*) FROM files').pluck().get()!
    const rows = copy.prepare<[], { sha256: string; size: number }>('SELECT sha256, size_bytes AS size FROM blobs').iterate()
    for (const { sha256, size } of rows) {
      if (missing.has(sha256)) continue
      const dir = path.join(work, 'blobs', 'sha256', sha256.slice(0, 2), sha256.slice(2, 4))
      if (!dirs.has(dir)) fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
      dirs.add(dir)
      const from = path.join(staging, sha256)
      const to = path.join(dir, sha256)
      out.blobs++
      out.bytes += size
      if (canLink) {
        try {
          fs.linkSync(from, to)
          out.linked++
          continue
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err
          canLink = false
        }
      }
      copyDurable(from, to, 0o600)
      out.copied++
    }
  } finally {
    // Closing the last connection checkpoints the copy and removes its -wal and -shm files.
    copy.close()
  }
  fsyncFile(path.join(work, 'coffer.db'))
  // New directory entries survive a crash only once their directories are fsynced.
  const parents = new Set([...dirs].map((d) => path.dirname(d)))
  for (const d of [...dirs, ...parents, path.join(work, 'blobs', 'sha256'), path.join(work, 'blobs')]) fsyncDir(d)
  return out
}

function copyDurable(from: string, to: string, mode: number): void {
  fs.copyFileSync(from, to, fs.constants.COPYFILE_EXCL)
  fs.chmodSync(to, mode)
  fsyncFile(to)
}

function fsyncFile(file: string): void {
  const fd = fs.openSync(file, 'r')
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}
