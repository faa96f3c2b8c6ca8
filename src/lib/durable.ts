import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'

/**
 * Durability on a local filesystem: a new file or directory entry survives a crash only once its
 * data and its directory are fsynced. Every such write in Coffer goes through these helpers.
 */

/** fsync a directory so that a rename, link or create inside it survives a crash. */
export function fsyncDir(dir: string): void {
  fsyncPath(dir)
}

/** fsync a file's data, by path. */
export function fsyncFile(file: string): void {
  fsyncPath(file)
}

function fsyncPath(p: string): void {
  const fd = fs.openSync(p, 'r')
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** fsyncDir for the async paths (uploads), off the event loop. */
export function fsyncDirAsync(dir: string): Promise<void> {
  return syncAsync(dir, 'sync')
}

/**
 * fdatasync through the thread pool. fdatasync is what SQLite itself uses on Linux for the WAL:
 * it also flushes the file size, which reading the appended frames back needs.
 */
export function datasyncFile(file: string): Promise<void> {
  return syncAsync(file, 'datasync')
}

/**
 * fdatasync of one file kept open between calls, for the WAL that every group commit flushes: one
 * thread-pool round trip a flush where open, fdatasync and close were three, each costing the event
 * loop more than the flush's own dispatch (#29). Reopened when the file was removed meanwhile (its
 * link count is 0), so a flush never goes to a file SQLite no longer writes. `close` waits for a
 * flush in flight before it closes the descriptor, which could otherwise be reused under it.
 */
export class KeptOpenSync {
  private fd: number | undefined
  private inFlight = 0
  private closed = false

  constructor(private readonly file: string) {}

  async datasync(): Promise<void> {
    if (this.closed) throw new Error(`${this.file}: closed`)
    if (this.fd !== undefined && fs.fstatSync(this.fd).nlink === 0) this.closeFd()
    this.fd ??= fs.openSync(this.file, 'r')
    const fd = this.fd
    this.inFlight++
    try {
      await new Promise<void>((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())))
    } finally {
      this.inFlight--
      if (this.closed && this.inFlight === 0) this.closeFd()
    }
  }

  close(): void {
    this.closed = true
    if (this.inFlight === 0) this.closeFd()
  }

  private closeFd(): void {
    if (this.fd === undefined) return
    fs.closeSync(this.fd)
    this.fd = undefined
  }
}

async function syncAsync(p: string, how: 'sync' | 'datasync'): Promise<void> {
  const fh = await fs.promises.open(p, 'r')
  try {
    await (how === 'sync' ? fh.sync() : fh.datasync())
  } finally {
    await fh.close()
  }
}

/**
 * Writes `data` to a temporary name beside `target`, fsyncs it, then publishes it under `target`
 * and fsyncs the directory. `exclusive` publishes with link(2), which fails when `target` exists:
 * the first writer wins and the call returns false (the secret: two processes starting at once
 * must agree on one); otherwise rename(2) replaces `target` atomically. Either way `target` only
 * ever names a complete file, and a crash mid-write leaves at most a stray temporary file.
 */
export function publishFileSync(target: string, data: string | Uint8Array, opts: { mode: number; exclusive: boolean }): boolean {
  const tmp = `${target}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  const fd = fs.openSync(tmp, 'wx', opts.mode)
  try {
    try {
      const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data
      for (let off = 0; off < bytes.length;) off += fs.writeSync(fd, bytes, off, bytes.length - off)
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    if (opts.exclusive) {
      try {
        fs.linkSync(tmp, target)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
        throw err
      }
    } else {
      fs.renameSync(tmp, target)
    }
    fsyncDir(path.dirname(target))
    return true
  } finally {
    fs.rmSync(tmp, { force: true })
  }
}

/** Copies a file (never over an existing one), sets its mode and fsyncs it. */
export function copyDurable(from: string, to: string, mode: number): void {
  fs.copyFileSync(from, to, fs.constants.COPYFILE_EXCL)
  fs.chmodSync(to, mode)
  fsyncFile(to)
}
