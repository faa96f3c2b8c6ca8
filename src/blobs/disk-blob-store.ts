import fs from 'node:fs'
import path from 'node:path'
import { createHash, randomUUID } from 'node:crypto'
import { finished, Transform, Writable, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fsyncDir, fsyncDirAsync } from '../lib/durable'
import { noteStreamed } from '../lib/heap-relief'
import { BlobNotFoundError, type BlobStore, type ByteRange, type ListedBlob, type OpenedBlob, type StagedBlob, type StageGuard } from './blob-store'
import { blobPath, SHA256_RE } from './layout'
import { WriteBehind } from './write-behind'
import type { InlineBlobsRepo } from '../db/repos/inline-blobs'

const HEAD_BYTES = 64

/**
 * While a body streams in, its staging file is flushed every this many bytes (write-behind), so
 * the fsync before the answer has at most this much left: the flush overlaps the transfer.
 */
export const WRITE_BEHIND_BYTES = 8 * 1024 * 1024

/**
 * Reads up to this size are done synchronously in one open/read/close (a few microseconds from
 * the page cache) instead of four thread-pool round trips (open, read, read to EOF, close), each
 * costing more main-thread time than the whole read: 4 KiB downloads/s went from about 0.2x to
 * about 0.9x of nginx's (#7). Like nginx, a cold-cache read blocks the loop briefly. It lives in
 * the disk store because it is a property of local files: a remote store streams everything.
 */
export const SMALL_READ_BYTES = 64 * 1024

/**
 * Content up to this size is kept in the database (table blob_inline) rather than in a file of its
 * own, when the store is given an inline repo: it is written inside the transaction that commits
 * the upload, so the group commit's one shared WAL flush makes it durable, where a file costs its
 * own fsync, possibly a new directory's, and the directory entry's (#15). Reads of it are one
 * indexed SELECT. SQLite's own measurements ("Internal Versus External BLOBs") put the crossover
 * for reads near 100 KiB at 4 KiB pages; every inline byte is also written twice (WAL, then the
 * checkpoint), so the limit stays below that. README: Performance and durability.
 */
export const INLINE_MAX_BYTES = 64 * 1024

/** removeSync unlinks a blob file up to this size where it is; a larger one is moved out and unlinked in the thread pool. */
export const UNLINK_IN_PLACE_BYTES = 1024 * 1024

/** Hashes, counts and inspects bytes on their way to disk. */
export class Inspector extends Transform {
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
    if (!this.guard.unhashed) this.hash.update(chunk)
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

/**
 * Where staged bytes go: memory while they fit `inlineMax` (undefined: never), then a staging file
 * opened on demand, written in batches and flushed behind the writes (write-behind), and fsynced
 * at the end so staged content is durable.
 */
class Spool extends Writable {
  private chunks: Buffer[] = []
  private size = 0
  private fh: fs.promises.FileHandle | undefined
  private opening: Promise<void> | undefined
  private behind: WriteBehind | undefined
  private bytesWritten = 0

  constructor(
    private readonly tmpPath: string,
    private readonly inlineMax: number | undefined,
  ) {
    super({ highWaterMark: 1024 * 1024 })
  }

  /** The whole content when it stayed in memory; undefined once it went to the staging file. */
  get inline(): Buffer | undefined {
    return this.fh || this.inlineMax === undefined ? undefined : Buffer.concat(this.chunks, this.size)
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this._writev([{ chunk }], cb)
  }

  override _writev(batch: { chunk: Buffer }[], cb: (err?: Error | null) => void): void {
    const bufs = batch.map((b) => b.chunk)
    const n = bufs.reduce((sum, b) => sum + b.length, 0)
    if (!this.fh && this.inlineMax !== undefined && this.size + n <= this.inlineMax) {
      this.chunks.push(...bufs)
      this.size += n
      return cb()
    }
    this.spill(bufs).then(() => cb(), cb)
  }

  override _final(cb: (err?: Error | null) => void): void {
    const done = async () => {
      // Without inlining, even empty content is a file: a store places what it staged from there.
      if (!this.fh && this.inlineMax === undefined) await this.spill([])
      if (!this.fh) return
      await this.behind!.finish()
      await this.fh.datasync()
      const fh = this.fh
      await fh.close()
    }
    done().then(() => cb(), cb)
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    const closing = async () => {
      // A staging file still being opened is closed (and removed, by spill) once it is.
      await this.opening?.catch(() => undefined)
      await this.behind?.finish().catch(() => undefined)
      await this.fh?.close().catch(() => undefined)
    }
    closing().then(
      () => cb(err),
      () => cb(err),
    )
  }

  private async spill(bufs: Buffer[]): Promise<void> {
    if (!this.fh) {
      this.opening = fs.promises.open(this.tmpPath, 'wx', 0o600).then(async (fh) => {
        if (!this.destroyed) return void (this.fh = fh)
        // Destroyed while it opened (the client went away): the stage's clean-up may have run already.
        await fh.close()
        await fs.promises.rm(this.tmpPath, { force: true })
        throw new Error('the staging stream was destroyed')
      })
      await this.opening
      if (!this.fh) return
      // At most one flush at a time, in the thread pool beside the writes.
      this.behind = new WriteBehind(this.fh, WRITE_BEHIND_BYTES)
      bufs = [...this.chunks, ...bufs]
      this.chunks = []
    }
    let pending = bufs.filter((b) => b.length > 0)
    while (pending.length > 0) {
      const { bytesWritten } = await this.fh.writev(pending, this.bytesWritten)
      this.bytesWritten += bytesWritten
      pending = skip(pending, bytesWritten)
    }
    this.behind!.written(this.bytesWritten)
  }
}

/**
 * `from` piped into `to`: resolves once `to` has finished (its _final done); on an error or a
 * premature close of either, both are destroyed and it rejects with that error. What
 * stream/promises' pipeline does for two streams, without the AbortController pipeline makes and
 * aborts on every call: the abort builds a DOMException, stack trace and all, which with the
 * controller was 4% of the CPU of a 4 KiB PutObject (#29, scripts/bench/README.md).
 */
export function pipeInto(from: Readable, to: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false
    const fail = (err: Error) => {
      if (settled) return
      settled = true
      from.destroy(err)
      to.destroy(err)
      reject(err)
    }
    // finished() keeps its error listeners on both streams: a later error is never unhandled.
    finished(from, (err) => {
      if (err) fail(err)
    })
    finished(to, (err) => {
      if (err) return fail(err)
      if (settled) return
      settled = true
      resolve()
    })
    from.pipe(to)
  })
}

/** `bufs` without their first `n` bytes (what a short write left). */
function skip(bufs: Buffer[], n: number): Buffer[] {
  const out: Buffer[] = []
  for (const b of bufs) {
    if (n >= b.length) {
      n -= b.length
      continue
    }
    out.push(n > 0 ? b.subarray(n) : b)
    n = 0
  }
  return out
}

/**
 * Blobs under `root` (layout.ts); staging files under `tmpDir` on the same filesystem. Given an
 * inline repo, content up to INLINE_MAX_BYTES lives in the database instead (blob_inline): it is
 * staged in memory, `place` has nothing to do for it, and `ensurePlaced`, which every commit calls
 * inside its transaction, writes the row, so the commit's WAL flush makes it durable. A hash is
 * stored one way or the other, never both: each way checks the other first.
 */
export class DiskBlobStore implements BlobStore {
  readonly remote = false
  readonly description: string

  constructor(
    private readonly root: string,
    private readonly tmpDir: string,
    /** Absent: every blob is a file (the staging store of a remote store, which uploads files). */
    private readonly inline?: InlineBlobsRepo,
    /**
     * Starts the name of each file this store makes in `tmpDir`: a server's node id and a dot
     * (`<id>.upload-…`), so that a server starting on a data dir path others share removes only
     * what a server that is gone left there (services/node-tmp.ts, #30).
     */
    private readonly tmpPrefix = '',
  ) {
    this.description = `disk ${root}`
  }

  async stage(source: Readable, guard: StageGuard): Promise<StagedBlob> {
    const tmpPath = path.join(this.tmpDir, `${this.tmpPrefix}upload-${randomUUID()}`)
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
    const small = this.inline && guard.expectedBytes !== undefined && guard.expectedBytes <= INLINE_MAX_BYTES
    const spool = new Spool(tmpPath, small ? INLINE_MAX_BYTES : undefined)
    try {
      await pipeInto(inspector, spool)
    } catch (err) {
      source.unpipe(inspector)
      inspector.destroy()
      await fs.promises.rm(tmpPath, { force: true })
      throw err
    } finally {
      source.off('error', onSourceError)
      source.off('close', onSourceClose)
    }
    let inline = spool.inline
    if (!inline && this.inline && inspector.size <= INLINE_MAX_BYTES) {
      // Small after all (its length was not announced): stored inline like any content this size,
      // so content is stored one way whichever front or encoding brought it.
      inline = await fs.promises.readFile(tmpPath)
      await fs.promises.rm(tmpPath, { force: true })
    }
    return { sha256: guard.unhashed ? '' : inspector.hash.digest('hex'), size: inspector.size, tmpPath, ...(inline ? { inline } : {}) }
  }

  async place(staged: StagedBlob): Promise<void> {
    // Inline content is written by ensurePlaced, in the commit's own transaction.
    // Stored inline already (content of this size was inlined under a larger limit): kept there.
    if (staged.inline || this.inline?.exists(staged.sha256)) return
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
    if (this.inline?.exists(staged.sha256)) return
    const final = this.pathOf(staged.sha256)
    if (fs.existsSync(final)) return
    if (staged.inline) {
      this.inline!.insertIfMissing(staged.sha256, staged.inline, Date.now())
      return
    }
    fs.mkdirSync(path.dirname(final), { recursive: true })
    fs.linkSync(staged.tmpPath, final)
    fsyncDir(path.dirname(final))
  }

  async discard(staged: StagedBlob): Promise<void> {
    if (staged.inline) return
    await fs.promises.rm(staged.tmpPath, { force: true })
  }

  async open(sha256: string, range?: ByteRange): Promise<OpenedBlob> {
    const inline = this.inline?.get(sha256)
    if (inline) {
      const { start, end } = range ?? { start: 0, end: inline.length - 1 }
      if (end >= inline.length) throw new Error(`stored content ${sha256} is shorter than its record`)
      return { length: end - start + 1, body: inline.subarray(start, end + 1) }
    }
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
    this.inline?.delete(sha256)
    const file = this.pathOf(sha256)
    let size: number
    try {
      size = fs.statSync(file).size
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
      throw err
    }
    if (size <= UNLINK_IN_PLACE_BYTES) return fs.rmSync(file, { force: true })
    // Unlinking a large file frees its extents and drops its cached pages: ~5 ms for 8 MiB here,
    // so 0.6 s of event loop, inside the write transaction, for the 128 parts of a 1 GiB multipart
    // upload that its completion releases (#29). The caller's transaction needs the blob gone
    // from its path, which a rename does in microseconds; the bytes go in the thread pool after.
    // A crash between the two leaves the file in tmp/, which a server removes at start (node-tmp.ts).
    const doomed = path.join(this.tmpDir, `${this.tmpPrefix}removed-${randomUUID()}`)
    try {
      fs.renameSync(file, doomed)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return
      // tmp/ on another filesystem (a test's layout): deleted in place, as before.
      if (code === 'EXDEV') return fs.rmSync(file, { force: true })
      throw err
    }
    const unlinking = fs.promises.rm(doomed, { force: true }).catch(() => undefined)
    this.unlinking.add(unlinking)
    void unlinking.finally(() => this.unlinking.delete(unlinking))
  }

  private readonly unlinking = new Set<Promise<void>>()

  /** Resolves once the files removeSync handed to the thread pool are deleted. */
  async removalsDone(): Promise<void> {
    while (this.unlinking.size > 0) await Promise.all([...this.unlinking])
  }

  async remove(sha256: string): Promise<void> {
    this.inline?.delete(sha256)
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
    if (!this.inline) return
    for (let after = ''; ;) {
      const rows = this.inline.after(after, 500)
      for (const r of rows) yield { sha256: r.sha256, mtimeMs: r.createdAt, size: r.size }
      if (rows.length < 500) break
      after = rows.at(-1)!.sha256
    }
  }

  async hash(sha256: string): Promise<string | undefined> {
    const inline = this.inline?.get(sha256)
    if (inline) return createHash('sha256').update(inline).digest('hex')
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
