import { createHash } from 'node:crypto'
import { Worker } from 'node:worker_threads'

/**
 * MD5 of a stream of chunks, computed on a second thread once the stream is large.
 *
 * S3's ETag is the MD5 of the object, on top of the SHA-256 that addresses the content. Both on
 * the main thread made a 100 MiB PutObject about 0.6x an API PUT of the same bytes (MD5 runs at
 * roughly the speed SHA-NI hashes here). The first SWITCH_BYTES are kept; a body that ends
 * within them is hashed at once on the main thread (no thread hop for small objects). Past
 * them, the bytes are copied into BATCH_BYTES buffers that are transferred (not cloned) to one
 * shared worker thread, which hashes while the main thread goes on with the SHA-256 and the
 * disk writes, and hands each buffer back for reuse. At most MAX_IN_FLIGHT_BYTES wait in the
 * worker per stream, and TOTAL_IN_FLIGHT_BYTES for all streams together: `update` returns a
 * promise to wait on when either is over (backpressure), so memory stays bounded whatever the
 * number of uploads (eight parts in flight, as `aws s3 cp` sends them, held 64 MiB of batches where
 * the pool keeps 16, the rest garbage; #29) and no garbage piles up in the worker. The worker is
 * one thread: more bytes waiting for it would not hash sooner.
 *
 * Once no large body has been hashed for IDLE_MS, the pooled buffers are dropped and the thread
 * stops (the next large body starts it again): RSS returns toward idle after a load (#29).
 */
const SWITCH_BYTES = 1024 * 1024
const BATCH_BYTES = 1024 * 1024
const MAX_IN_FLIGHT_BYTES = 8 * 1024 * 1024
const TOTAL_IN_FLIGHT_BYTES = 16 * 1024 * 1024
const IDLE_MS = 10_000

// Evaluated as the worker's source, so the bundle and the executable stay one file. Messages:
// {id, buf, len} hashes buf's first len bytes into job id's MD5 and hands buf back in the
// acknowledgement {id, buf} (the same memory goes back and forth: the worker makes no garbage);
// {id, end} answers {id, hex} and forgets the job; {id, drop} forgets it.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads')
const { createHash } = require('node:crypto')
const jobs = new Map()
parentPort.on('message', (m) => {
  if (m.buf) {
    let h = jobs.get(m.id)
    if (!h) jobs.set(m.id, (h = createHash('md5')))
    h.update(new Uint8Array(m.buf, 0, m.len))
    parentPort.postMessage({ id: m.id, buf: m.buf }, [m.buf])
  } else if (m.end) {
    const h = jobs.get(m.id) || createHash('md5')
    jobs.delete(m.id)
    parentPort.postMessage({ id: m.id, hex: h.digest('hex') })
  } else if (m.drop) jobs.delete(m.id)
})
`

interface Job {
  /** A batch buffer is back from the worker, hashed. */
  acked: (buf: ArrayBuffer) => void
  done: (hex: string) => void
  fail: (err: Error) => void
}

/** The one worker thread every large MD5 shares, started on first use and restarted after a failure. */
class Md5Thread {
  private worker: Worker | undefined
  private readonly jobs = new Map<number, Job>()
  private nextId = 1

  open(job: Job): number {
    clearTimeout(this.idleTimer)
    this.idleTimer = undefined
    const id = this.nextId++
    this.jobs.set(id, job)
    return id
  }

  post(id: number, message: { buf: ArrayBuffer; len: number } | { end: true } | { drop: true }): void {
    const worker = this.start()
    if ('buf' in message) worker.postMessage({ id, buf: message.buf, len: message.len }, [message.buf])
    else worker.postMessage({ id, ...message })
    if ('drop' in message) this.forget(id)
    // The thread keeps the process alive exactly while some job waits on it.
    else worker.ref()
  }

  private forget(id: number): void {
    this.jobs.delete(id)
    if (this.jobs.size === 0) {
      this.worker?.unref()
      this.idleTimer ??= setTimeout(() => this.rest(), IDLE_MS).unref()
    }
  }

  private idleTimer: NodeJS.Timeout | undefined

  /** Idle for IDLE_MS: the pool's memory and the thread go (started again on the next large body). */
  private rest(): void {
    this.idleTimer = undefined
    if (this.jobs.size > 0) return
    pool.length = 0
    const worker = this.worker
    this.worker = undefined
    void worker?.terminate()
  }

  /** Whether the thread is running (tests). */
  get running(): boolean {
    return this.worker !== undefined
  }

  private start(): Worker {
    if (this.worker) return this.worker
    const worker = new Worker(WORKER_SOURCE, { eval: true, name: 'coffer-md5' })
    worker.on('message', (m: { id: number; buf?: ArrayBuffer; hex?: string }) => {
      const job = this.jobs.get(m.id)
      if (!job) return
      if (m.buf !== undefined) job.acked(m.buf)
      if (m.hex !== undefined) {
        this.forget(m.id)
        job.done(m.hex)
      }
    })
    const failAll = (err: Error) => {
      if (this.worker !== worker) return
      this.worker = undefined
      const jobs = [...this.jobs.values()]
      this.jobs.clear()
      for (const job of jobs) job.fail(err)
    }
    worker.on('error', failAll)
    worker.on('exit', (code) => failAll(new Error(`the MD5 worker thread exited (${code})`)))
    // Idle, it never keeps the process alive (unref after the listeners: adding a 'message'
    // listener refs the worker again); `post` refs it while jobs wait.
    worker.unref()
    this.worker = worker
    return worker
  }
}

const thread = new Md5Thread()

/** Hands out BATCH_BYTES buffers and takes them back, so that hashing a body makes no garbage. */
const pool: ArrayBuffer[] = []
const POOL_MAX = TOTAL_IN_FLIGHT_BYTES / BATCH_BYTES + 1

/** Bytes sent to the worker and not yet hashed, all streams together. */
let totalInFlight = 0
/** Streams waiting for the total to fall under TOTAL_IN_FLIGHT_BYTES. */
const waiting = new Set<ParallelMd5>()

/** For tests: the thread's state and the memory held for it. */
export const md5ThreadState = () => ({ running: thread.running, pooledBuffers: pool.length, totalInFlight })
const takeBuffer = () => pool.pop() ?? new ArrayBuffer(BATCH_BYTES)
const giveBack = (buf: ArrayBuffer) => {
  if (pool.length < POOL_MAX && buf.byteLength === BATCH_BYTES) pool.push(buf)
}

export class ParallelMd5 {
  /** Chunks kept until the body is known to be large (SWITCH_BYTES). */
  private head: Buffer[] = []
  private headBytes = 0
  /** Once on the worker: the batch being filled. */
  private batch: Uint8Array | undefined
  private filled = 0
  private id: number | undefined
  private inFlight = 0
  private waiter: { resolve: () => void; reject: (err: Error) => void } | undefined
  private result: Promise<string> | undefined
  private failure: Error | undefined
  private settle: { resolve: (hex: string) => void; reject: (err: Error) => void } | undefined

  /** Adds a chunk. Returns a promise when the caller should wait before the next one (the worker is behind). */
  update(chunk: Buffer): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure)
    if (this.id === undefined) {
      this.head.push(chunk)
      this.headBytes += chunk.length
      if (this.headBytes < SWITCH_BYTES) return undefined
      this.open()
      const head = this.head
      this.head = []
      this.headBytes = 0
      for (const b of head) this.fill(b)
    } else this.fill(chunk)
    if (!this.behind()) return undefined
    waiting.add(this)
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }))
  }

  /** Over its own share of the worker's queue, or the queue is full. */
  private behind(): boolean {
    return this.inFlight > MAX_IN_FLIGHT_BYTES || totalInFlight > TOTAL_IN_FLIGHT_BYTES
  }

  /** Lets a waiting update go on once under both limits (called on every acknowledgement). */
  private wake(): void {
    if (!this.waiter || this.behind()) return
    const w = this.waiter
    this.waiter = undefined
    waiting.delete(this)
    w.resolve()
  }

  /** The hex digest of everything added. Call once, after the last update. */
  digest(): Promise<string> {
    if (this.result) return this.result
    if (this.id === undefined) {
      const local = createHash('md5')
      for (const b of this.head) local.update(b)
      this.head = []
      return (this.result = Promise.resolve(local.digest('hex')))
    }
    if (this.failure) return (this.result = Promise.reject(this.failure))
    this.result = new Promise<string>((resolve, reject) => (this.settle = { resolve, reject }))
    if (this.filled > 0) this.send()
    thread.post(this.id, { end: true })
    return this.result
  }

  /** Forgets the job (the body failed): the worker drops its state. */
  drop(): void {
    waiting.delete(this)
    if (this.id !== undefined && !this.result) {
      // Its batches' acknowledgements will not reach it (the job is forgotten): no longer counted.
      totalInFlight -= this.inFlight
      this.inFlight = 0
      for (const stream of [...waiting]) stream.wake()
      thread.post(this.id, { drop: true })
      this.result = Promise.reject(new Error('the MD5 of a dropped body'))
      this.result.catch(() => undefined)
    }
    this.head = []
  }

  private open(): void {
    this.id = thread.open({
      acked: (buf) => {
        this.inFlight -= BATCH_BYTES
        totalInFlight -= BATCH_BYTES
        giveBack(buf)
        for (const stream of [...waiting]) stream.wake()
      },
      done: (hex) => this.settle?.resolve(hex),
      fail: (err) => {
        // What it had sent will never be acknowledged.
        totalInFlight -= this.inFlight
        this.inFlight = 0
        this.failure = err
        waiting.delete(this)
        this.waiter?.reject(err)
        this.waiter = undefined
        this.settle?.reject(err)
        for (const stream of [...waiting]) stream.wake()
      },
    })
  }

  /** Copies `chunk` into batches, sending each as it fills. */
  private fill(chunk: Buffer): void {
    let offset = 0
    while (offset < chunk.length) {
      this.batch ??= new Uint8Array(takeBuffer())
      const n = Math.min(chunk.length - offset, BATCH_BYTES - this.filled)
      this.batch.set(chunk.subarray(offset, offset + n), this.filled)
      this.filled += n
      offset += n
      if (this.filled === BATCH_BYTES) this.send()
    }
  }

  /** Transfers the batch (not a copy) to the worker, which hands it back once hashed. */
  private send(): void {
    const batch = this.batch!
    this.inFlight += BATCH_BYTES
    totalInFlight += BATCH_BYTES
    thread.post(this.id!, { buf: batch.buffer as ArrayBuffer, len: this.filled })
    this.batch = undefined
    this.filled = 0
  }
}
