import fs from 'node:fs'
import path from 'node:path'
import { copyDurable, fsyncDir } from '../lib/durable'
import { blobPath } from './layout'

/**
 * The blob half of `coffer backup` for the disk store. Blobs are immutable, so a hard link is as
 * good as a copy, and the garbage collector only unlinks names: a second name keeps the content.
 * Pins are hard links in a staging dir on the data dir's filesystem; the copy then links (or,
 * across filesystems, copies) each pinned blob into the destination's blob tree.
 */
export class DiskBlobBackup {
  private readonly pinned = new Set<string>()
  private readonly dirs = new Set<string>()
  private canLink = true
  linked = 0
  copied = 0

  constructor(
    private readonly blobRoot: string,
    private readonly staging: string,
  ) {}

  /** Pins a stored blob; false when it is missing. */
  pin(sha256: string): boolean {
    if (this.pinned.has(sha256)) return true
    try {
      fs.linkSync(blobPath(this.blobRoot, sha256), path.join(this.staging, sha256))
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    this.pinned.add(sha256)
    return true
  }

  /** Puts a pinned blob into the destination blob tree `destRoot` (same layout as the store). */
  transfer(sha256: string, destRoot: string): void {
    const to = blobPath(destRoot, sha256)
    const dir = path.dirname(to)
    if (!this.dirs.has(dir)) fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    this.dirs.add(dir)
    const from = path.join(this.staging, sha256)
    if (this.canLink) {
      try {
        fs.linkSync(from, to)
        this.linked++
        return
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err
        this.canLink = false
      }
    }
    copyDurable(from, to, 0o600)
    this.copied++
  }

  /** Makes the destination tree's new entries durable: every directory written into, up to `destRoot`'s parent. */
  sync(destRoot: string): void {
    const parents = new Set([...this.dirs].map((d) => path.dirname(d)))
    for (const d of [...this.dirs, ...parents, destRoot, path.dirname(destRoot)]) fsyncDir(d)
  }
}
