import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { isDiskFull } from '../errors'
import { fsyncDir } from './durable'

const CHUNK = 64 * 1024

export type ReserveState = 'held' | 'released' | 'off'

/**
 * Disk space set aside in `<data-dir>/reserve` that only operations freeing space may use. On a
 * full disk SQLite cannot grow its WAL, so without it a DELETE (and the GC run that would remove
 * the content) answers 507 too and the disk can never be emptied again (#24: the disk-full test
 * failed on main once migrations 12–14 left fewer free pages after the fill). A space-freeing
 * transaction that fails with SQLITE_FULL / ENOSPC unlinks the reserve and runs again, once;
 * uploads never do. The reserve is written again when there is room for it and as much again.
 *
 * The file is written with data (not ftruncate'd, which would be sparse and hold nothing), from a
 * random chunk rather than zeros so that a compressing file system (ZFS, btrfs) stores real blocks.
 */
export class DiskReserve {
  private readonly chunk: Buffer

  constructor(
    readonly file: string,
    readonly bytes: number,
    private readonly log: FastifyBaseLogger,
  ) {
    this.chunk = bytes > 0 ? randomBytes(Math.min(CHUNK, bytes)) : Buffer.alloc(0)
  }

  /** Whether the reserve holds its space now ('off' when COFFER_DISK_RESERVE_BYTES is 0). */
  state(): ReserveState {
    if (this.bytes === 0) return 'off'
    return this.size() >= this.bytes ? 'held' : 'released'
  }

  /**
   * Makes sure the reserve holds its space: at start and after space was freed (GC). Writes it
   * only while the disk has room for the reserve and as much again left for ordinary writes, so
   * writing it never fills a disk that is nearly full. Never throws: a reserve it cannot write is
   * logged at debug and tried again next time. With the setting at 0 a reserve left by an earlier
   * configuration is removed.
   */
  ensure(): ReserveState {
    try {
      if (this.bytes === 0) {
        fs.rmSync(this.file, { force: true })
        return 'off'
      }
      const have = this.size()
      if (have > this.bytes) fs.truncateSync(this.file, this.bytes)
      if (have >= this.bytes) return 'held'
      const s = fs.statfsSync(path.dirname(this.file))
      if (s.bavail * s.bsize < 2 * this.bytes - have) return 'released'
      this.write(have)
      this.log.info({ bytes: this.bytes }, 'disk reserve in place')
      return 'held'
    } catch (err) {
      this.log.debug({ code: (err as NodeJS.ErrnoException).code }, 'disk reserve not written')
      fs.rmSync(this.file, { force: true })
      return 'released'
    }
  }

  /**
   * Runs a transaction of an operation that frees space (a delete, an abort, GC's bookkeeping).
   * If it fails because the disk is full and the reserve is held, the reserve is released and the
   * transaction runs once more. Only for operations that free space: a write that could use the
   * released space would leave the next delete without it.
   */
  freeing<T>(run: () => T): T {
    try {
      return run()
    } catch (err) {
      if (!isDiskFull(err) || !this.release()) throw err
      return run()
    }
  }

  /** Unlinks the reserve; true when there was one to give back. */
  private release(): boolean {
    if (this.bytes === 0 || this.size() === 0) return false
    fs.rmSync(this.file, { force: true })
    this.log.warn({ bytes: this.bytes }, 'the disk is full: released the disk reserve so that deletes can free space; it is written again once space is freed')
    return true
  }

  private size(): number {
    try {
      return fs.statSync(this.file).size
    } catch {
      return 0
    }
  }

  private write(from: number): void {
    // At explicit offsets, not appended: with --workers N two workers may write it at once (one
    // starting, one after a GC), and appends would make it twice as large (#29).
    const fd = fs.openSync(this.file, fs.constants.O_WRONLY | fs.constants.O_CREAT, 0o600)
    try {
      for (let at = from; at < this.bytes;) {
        const n = Math.min(this.chunk.length, this.bytes - at)
        at += fs.writeSync(fd, this.chunk, 0, n, at)
      }
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    fsyncDir(path.dirname(this.file))
  }
}
