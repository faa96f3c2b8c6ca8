import fs from 'node:fs'
import path from 'node:path'
import { createHash, randomUUID } from 'node:crypto'
import { Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fsyncDir, fsyncDirAsync } from '../lib/durable'
import { noteStreamed } from '../lib/heap-relief'
import { BlobNotFoundError, type BlobStore, type ByteRange, type ListedBlob, type OpenedBlob, type StagedBlob, type StageGuard } from './blob-store'
import { blobPath, SHA256_RE } from './layout'

const HEAD_BYTES = 64

/**
 * Reads up to this size are done synchronously in one open/read/close (a few microseconds from
 * the page cache) instead of four thread-pool round trips (open, read, read to EOF, close), each
 * costing more main-thread time than the whole read: 4 KiB downloads/s went from about 0.2x to
 * about 0.9x of nginx's (#7). Like nginx, a cold-cache read blocks the loop briefly. It lives in
 * the disk store because it is a property of local files: a remote store streams everything.
 */
export const SMALL_READ_BYTES = 64 * 1024

/** Hashes, counts and inspects bytes on their way to disk. */
class Inspector extends Transform {
  readonly hash = createHash('sha256')
  size = 0
  private head: Buffer[] = []
  private headLength = 0
  private headChecked = false

  constructor(private readonly guard: StageGuard) {
    super()
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null, data?: Buffer) => void): void {
    this.size += chunk.length
    noteStreamed(chunk.length)
    if (this.size > this.guard.maxBytes) return cb(this.guard.onOverflow())
    try {
      this.guard.onChunk?.(chunk.length)
      if (!this.headChecked) {
        this.head.push(chunk)
        this.headLength += chunk.length
        if (this.headLength >= HEAD_BYTES) this.checkHead()
      }
    } catch (err) {
      return cb(err as Error)
    }
    this.hash.update(chunk)
    cb(null, chunk)
  }

  override _flush(cb: (err?: Error | null) => void): void {
    try {
      if (!this.headChecked) this.checkHead()
      cb()
    } catch (err) {
      cb(err as Error)
    }
  }

  private checkHead(): void {
    this.headChecked = true
    const head = Buffer.concat(this.head).subarray(0, HEAD_BYTES)
    this.head = []
    this.guard.checkHead?.(head)
  }
}

/** Blobs under `root` (layout.ts); staging files under `tmpDir` on the same filesystem. */
export class DiskBlobStore implements BlobStore {
  readonly remote = false
  readonly description: string

  constructor(
    private readonly root: string,
    private readonly tmpDir: string,
  ) {
    this.description = `disk ${root}`
  }

  async stage(source: Readable, guard: StageGuard): Promise<StagedBlob> {
    const tmpPath = path.join(this.tmpDir, `upload-${randomUUID()}`)
    const inspector = new Inspector(guard)
    // The source is piped rather than handed to pipeline(): on a refusal it must stay open, so the
    // caller can still answer on the same connection (pipeline would destroy the socket with it).
    const onSourceError = (err: Error) => inspector.destroy(err)
    const onSourceClose = () => {
      if (!source.readableEnded) inspector.destroy(Object.assign(new Error('the request body was cut off'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }))
    }
    source.once('error', onSourceError)
    source.once('close', onSourceClose)
    source.pipe(inspector)
    try {
      // flush: the file is fsynced before the stream closes, so staged content is durable.
      await pipeline(inspector, fs.createWriteStream(tmpPath, { flags: 'wx', mode: 0o600, flush: true, highWaterMark: 1024 * 1024 }))
    } catch (err) {
      source.unpipe(inspector)
      await fs.promises.rm(tmpPath, { force: true })
      throw err
    } finally {
      source.off('error', onSourceError)
      source.off('close', onSourceClose)
    }
    return { sha256: inspector.hash.digest('hex'), size: inspector.size, tmpPath }
  }

  async place(staged: StagedBlob): Promise<void> {
    const final = this.pathOf(staged.sha256)
    await this.mkdirDurable(path.dirname(final))
    try {
      await fs.promises.link(staged.tmpPath, final)
    } catch (err) {
      // EEXIST: identical content is stored already. The directory is synced all the same: a PUT
      // of content that someone (another tenant) stored before does the same durable work as any
      // other, so its timing does not tell that the content exists (#12 item 6, README: Threat model).
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    await fsyncDirAsync(path.dirname(final))
  }

  ensurePlaced(staged: StagedBlob): void {
    const final = this.pathOf(staged.sha256)
    if (fs.existsSync(final)) return
    fs.mkdirSync(path.dirname(final), { recursive: true })
    fs.linkSync(staged.tmpPath, final)
    fsyncDir(path.dirname(final))
  }

  async discard(staged: StagedBlob): Promise<void> {
    await fs.promises.rm(staged.tmpPath, { force: true })
  }

  async open(sha256: string, range?: ByteRange): Promise<OpenedBlob> {
    const file = this.pathOf(sha256)
    try {
      const { start, end } = range ?? { start: 0, end: (await fs.promises.stat(file)).size - 1 }
      const length = end - start + 1
      if (length <= SMALL_READ_BYTES) return { length, body: readSync(file, start, length) }
      const fh = await fs.promises.open(file, 'r')
      return { length, body: fh.createReadStream({ start, end, highWaterMark: 256 * 1024 }) }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobNotFoundError(sha256)
      throw err
    }
  }

  removeSync(sha256: string): void {
    fs.rmSync(this.pathOf(sha256), { force: true })
  }

  async remove(sha256: string): Promise<void> {
    await fs.promises.rm(this.pathOf(sha256), { force: true })
  }

  /** The data dir's own write probe (lib/data-dir) is the disk store's readiness check. */
  async probe(): Promise<void> {}

  private pathOf(sha256: string): string {
    return blobPath(this.root, sha256)
  }

  async *list(): AsyncIterable<ListedBlob> {
    for (const a of await readdirOrEmpty(this.root)) {
      for (const b of await readdirOrEmpty(path.join(this.root, a))) {
        const dir = path.join(this.root, a, b)
        for (const name of await readdirOrEmpty(dir)) {
          if (!SHA256_RE.test(name)) continue
          const st = await fs.promises.stat(path.join(dir, name)).catch(() => undefined)
          if (st) yield { sha256: name, mtimeMs: st.mtimeMs, size: st.size }
        }
      }
    }
  }

  async hash(sha256: string): Promise<string | undefined> {
    const h = createHash('sha256')
    try {
      await pipeline(fs.createReadStream(this.pathOf(sha256)), h)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
      throw err
    }
    return h.digest('hex')
  }

  /** mkdir -p, fsyncing each parent whose entry list changed so the new directories survive a crash. */
  private async mkdirDurable(dir: string): Promise<void> {
    if (fs.existsSync(dir)) return
    const parent = path.dirname(dir)
    await this.mkdirDurable(parent)
    try {
      await fs.promises.mkdir(dir, { mode: 0o700 })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      return
    }
    await fsyncDirAsync(parent)
  }
}

async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await fs.promises.readdir(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
}

/** `length` bytes of `file` from `start`: open, read, close. */
function readSync(file: string, start: number, length: number): Buffer {
  const fd = fs.openSync(file, 'r')
  try {
    const buf = Buffer.allocUnsafe(length)
    let got = 0
    while (got < length) {
      const n = fs.readSync(fd, buf, got, length - got, start + got)
      if (n === 0) break
      got += n
    }
    if (got !== length) throw new Error(`stored content ${path.basename(file)} is shorter than its record`)
    return buf
  } finally {
    fs.closeSync(fd)
  }
}
