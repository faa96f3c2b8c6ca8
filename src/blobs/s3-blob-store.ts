import fs from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import { createHash } from 'node:crypto'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  S3Client,
  type GetObjectCommandOutput,
} from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { storeUnavailable } from '../errors'
import type { StoreMeter } from '../lib/metrics'
import { BlobNotFoundError, type BlobStore, type ByteRange, type ListedBlob, type OpenedBlob, type StagedBlob, type StageGuard } from './blob-store'
import type { DiskBlobStore } from './disk-blob-store'
import { SHA256_RE } from './layout'

export interface S3BlobStoreOptions {
  /** e.g. http://127.0.0.1:7480; undefined: AWS S3 for the region. */
  endpoint?: string
  bucket: string
  region: string
  /** Undefined: the SDK's default credential chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string }
  /** Key prefix, empty or ending in `/`. */
  prefix: string
  forcePathStyle: boolean
  /** Longest wait on one call, or per part of a large upload; also the socket idle timeout. */
  timeoutMs: number
  meter?: StoreMeter
  /** Stages uploads in the data dir's tmp/ while they are hashed (bounded memory), before they go to the store. */
  staging: DiskBlobStore
}

/** Multipart parts: 8 MiB each, 4 in flight (lib-storage buffers at most queueSize x partSize per upload). */
const PART_SIZE = 8 * 1024 * 1024
const QUEUE_SIZE = 4

/** Errors the store answers that mean "no such object" rather than "the store is failing". */
const NOT_FOUND_NAMES: ReadonlySet<string> = new Set(['NoSuchKey', 'NotFound'])

/**
 * Content on an S3-compatible object store (AWS S3, Ceph RGW, Garage, SeaweedFS, R2, B2), keyed
 * `<prefix>sha256/aa/bb/<hex>` like the disk layout. An upload is staged on local disk while it
 * is hashed, then written to the store (multipart with parallel parts when large) and confirmed
 * before the commit. Every call has a deadline; a store that is down, slow or refusing turns into
 * STORE_UNAVAILABLE (503 with Retry-After), never a hang. Deletions are ordered against uploads by
 * services/remote-blobs.ts, so `removeSync` does not exist here and `ensurePlaced` has nothing to do.
 */
export class S3BlobStore implements BlobStore {
  readonly remote = true
  readonly description: string
  private readonly client: S3Client
  private readonly bucket: string
  private readonly prefix: string
  private readonly timeoutMs: number

  constructor(private readonly options: S3BlobStoreOptions) {
    this.bucket = options.bucket
    this.prefix = options.prefix
    this.timeoutMs = options.timeoutMs
    this.description = `s3 ${options.endpoint ?? `aws:${options.region}`}/${options.bucket}/${options.prefix}`
    const agentOptions = { keepAlive: true, maxSockets: 64 }
    this.client = new S3Client({
      region: options.region,
      ...(options.endpoint !== undefined ? { endpoint: options.endpoint } : {}),
      ...(options.credentials !== undefined ? { credentials: options.credentials } : {}),
      forcePathStyle: options.forcePathStyle,
      // Ceph 16 answers 411 to the SDK's default streaming trailer checksums: send and check them
      // only where the API requires them. Integrity is ours anyway: the content is its SHA-256.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
      // connectionTimeout: a store that does not accept; requestTimeout: a socket idle that long
      // (a full Ceph OSD makes writes hang without an answer).
      requestHandler: {
        connectionTimeout: Math.min(options.timeoutMs, 5000),
        requestTimeout: options.timeoutMs,
        httpAgent: new http.Agent(agentOptions),
        httpsAgent: new https.Agent(agentOptions),
      },
    })
  }

  /** The object key of a blob: `<prefix>sha256/aa/bb/<hex>`. */
  key(sha256: string): string {
    if (!SHA256_RE.test(sha256)) throw new Error(`not a sha256: ${JSON.stringify(sha256).slice(0, 80)}`)
    return `${this.prefix}sha256/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}`
  }

  stage(source: Readable, guard: StageGuard): Promise<StagedBlob> {
    return this.options.staging.stage(source, guard)
  }

  discard(staged: StagedBlob): Promise<void> {
    return this.options.staging.discard(staged)
  }

  /** Writes the staged content unless an object of that size is there already; resolves once the store confirmed it. */
  async place(staged: StagedBlob): Promise<void> {
    const key = this.key(staged.sha256)
    const existing = await this.head(key)
    if (existing === staged.size) return
    const parts = Math.max(1, Math.ceil(staged.size / PART_SIZE))
    await this.call('put', this.timeoutMs * (parts + 1), async (signal) => {
      const abortController = new AbortController()
      signal.addEventListener('abort', () => abortController.abort(signal.reason), { once: true })
      const upload = new Upload({
        client: this.client,
        params: {
          Bucket: this.bucket,
          Key: key,
          Body: fs.createReadStream(staged.tmpPath),
          ContentLength: staged.size,
          ContentType: 'application/octet-stream',
        },
        partSize: PART_SIZE,
        queueSize: QUEUE_SIZE,
        leavePartsOnError: false,
        abortController,
      })
      await upload.done()
    })
    // Ceph answers CompleteMultipartUpload with an empty ETag (an RGW bug), so the upload's own
    // answer proves little: the object is acknowledged once the store shows it at its full size.
    if (parts > 1 && (await this.head(key)) !== staged.size) throw storeUnavailable('put', new Error('the store does not show the uploaded object at its size'))
  }

  ensurePlaced(): void {
    // The upload's lease kept the object from deletion since place(): nothing to redo.
  }

  async open(sha256: string, range?: ByteRange): Promise<OpenedBlob> {
    const key = this.key(sha256)
    if (range !== undefined && range.end < range.start) {
      // No bytes wanted (HEAD): the object must exist all the same.
      if ((await this.head(key)) === undefined) throw new BlobNotFoundError(sha256)
      return { length: 0, body: Buffer.alloc(0) }
    }
    const res = await this.get(key, range)
    if (res === undefined) throw new BlobNotFoundError(sha256)
    const body = res.Body as Readable
    const length = res.ContentLength ?? (range ? range.end - range.start + 1 : 0)
    return { length, body }
  }

  removeSync(): void {
    throw new Error('a remote blob store deletes asynchronously (S3BlobStore.remove, ordered by services/remote-blobs.ts)')
  }

  async remove(sha256: string): Promise<void> {
    const key = this.key(sha256)
    await this.call('delete', this.timeoutMs, (abortSignal) => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal }))
  }

  async *list(): AsyncIterable<ListedBlob> {
    const prefix = `${this.prefix}sha256/`
    let token: string | undefined
    do {
      const page = await this.call('list', this.timeoutMs, (abortSignal) =>
        this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token, MaxKeys: 1000 }), { abortSignal }),
      )
      for (const o of page.Contents ?? []) {
        const name = o.Key?.slice(o.Key.lastIndexOf('/') + 1) ?? ''
        if (!SHA256_RE.test(name) || o.Key !== this.key(name)) continue
        yield { sha256: name, mtimeMs: o.LastModified?.getTime() ?? 0, size: o.Size ?? 0 }
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token !== undefined)
  }

  async hash(sha256: string): Promise<string | undefined> {
    const res = await this.get(this.key(sha256))
    if (res === undefined) return undefined
    const h = createHash('sha256')
    try {
      await pipeline(res.Body as Readable, h)
    } catch (err) {
      throw storeUnavailable('get', err)
    }
    return h.digest('hex')
  }

  /** Readiness: the bucket answers within 2 s (probes are polled and must not hang on a slow store). */
  async probe(): Promise<void> {
    await this.call('probe', Math.min(this.timeoutMs, 2000), (abortSignal) => this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal }))
  }

  /**
   * A presigned GET URL of a blob valid for `expiresInSeconds`, answering with the given
   * Content-Type and Content-Disposition (signed-URL downloads redirected to the store).
   */
  async presign(sha256: string, expiresInSeconds: number, contentType: string, disposition: string): Promise<string> {
    const command = new GetObjectCommand({
      Bucket: this.bucket,
      Key: this.key(sha256),
      ResponseContentType: contentType,
      ResponseContentDisposition: disposition,
    })
    return getSignedUrl(this.client, command, { expiresIn: expiresInSeconds })
  }

  /** Closes the client's kept-alive sockets. */
  close(): void {
    this.client.destroy()
  }

  /** The object's size, or undefined when there is none. */
  private async head(key: string): Promise<number | undefined> {
    const res = await this.call(
      'head',
      this.timeoutMs,
      (abortSignal) => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal }),
      true,
    )
    return res === undefined ? undefined : (res.ContentLength ?? 0)
  }

  /** A GET whose deadline covers the answer's headers; the body then streams under the socket idle timeout. */
  private get(key: string, range?: ByteRange): Promise<GetObjectCommandOutput | undefined> {
    return this.call(
      'get',
      this.timeoutMs,
      (abortSignal) =>
        this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }), {
          abortSignal,
        }),
      true,
    )
  }

  /**
   * Runs one store call under a deadline of `deadlineMs`, records its duration and
   * outcome, and turns every failure into STORE_UNAVAILABLE. With `missingOk`, "no such key"
   * resolves to undefined instead.
   */
  private async call<T>(operation: string, deadlineMs: number, fn: (signal: AbortSignal) => Promise<T>, missingOk: true): Promise<T | undefined>
  private async call<T>(operation: string, deadlineMs: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T>
  private async call<T>(operation: string, deadlineMs: number, fn: (signal: AbortSignal) => Promise<T>, missingOk = false): Promise<T | undefined> {
    const started = performance.now()
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new Error(`no answer from the store within ${deadlineMs} ms`)), deadlineMs)
    const seconds = () => (performance.now() - started) / 1000
    try {
      const out = await fn(controller.signal)
      this.options.meter?.storeCall(operation, seconds())
      return out
    } catch (err) {
      if (missingOk && isMissing(err)) {
        this.options.meter?.storeCall(operation, seconds())
        return undefined
      }
      this.options.meter?.storeCall(operation, seconds(), controller.signal.aborted ? 'timeout' : errorKind(err))
      throw storeUnavailable(operation, controller.signal.aborted ? controller.signal.reason : err)
    } finally {
      clearTimeout(timer)
    }
  }
}

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } }
  return NOT_FOUND_NAMES.has(e.name ?? '') || (e.$metadata?.httpStatusCode === 404 && e.name !== 'NoSuchBucket')
}

/** A bounded label for a failed call: timeout, unreachable (no connection), server (5xx), refused (4xx: credentials, bucket). */
function errorKind(err: unknown): string {
  const e = err as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } }
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || e.code === 'ETIMEDOUT') return 'timeout'
  const status = e.$metadata?.httpStatusCode
  if (status !== undefined && status >= 500) return 'server'
  if (status !== undefined && status >= 400) return 'refused'
  return 'unreachable'
}
