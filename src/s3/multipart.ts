import { createHash, randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { MultipartUpload, Part } from '../db/repos/multipart'
import type { ChecksumType, ObjectInfo, ObjectRow } from '../db/repos/objects'
import type { BucketWorkspace as Workspace } from '../services/bucket-cache'
import { AppError } from '../errors'
import { S3Error, fromAppError } from './errors'
import { concatenate, ingest, type BodySpec } from './ingest'
import { SigningKey } from './sigv4'
import { checkKey, checkWriteConditions, etagOf, openPlain, type ObjectInput, type S3Objects, type WriteConditions } from './objects'
import { openedAlongside, sealStream, sealedObjectSize, type ObjectKey } from './sealed-objects'
import type { SseKey } from './sse'
import type { S3Buckets, S3Deps } from './buckets'
import type { StagedBlob } from '../blobs/blob-store'
import { engineOf } from '../db/engine'
import { rollupPage, type KeysetSource, type ListResult } from './listing'
import { BlobWrites } from '../services/blob-writes'
import { crashPoint } from '../lib/crash-points'
import { compositeChecksum, fullObjectCrc, isCombinable, type ChecksumAlgorithm } from './checksums'

export const MIN_PART_BYTES = 5 * 1024 * 1024
export const MAX_PART_BYTES = 5 * 1024 ** 3
export const MAX_PARTS = 10_000

const noSuchUpload = () =>
  new S3Error('NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.')

/**
 * Multipart uploads (S3 reference: CreateMultipartUpload … CompleteMultipartUpload). Parts are
 * blobs placed durably before they are acknowledged and charged to the quotas while the upload
 * lives; completion streams the parts into one new blob (never held in memory) and, in one
 * transaction, releases the parts and makes the object.
 */
/**
 * 32 characters of base64url (24 random bytes) that never start with `-` or `_`: command-line
 * clients read a value starting with `-` as an option (the AWS CLI's `--upload-id -x…` fails with
 * "expected one argument"), which the CLI test met once in 64 runs.
 */
export function newUploadId(): string {
  for (;;) {
    const id = randomBytes(24).toString('base64url')
    if (/^[A-Za-z0-9]/.test(id)) return id
  }
}

export class S3Multipart {
  /**
   * The completion of each upload running in this process, by tenant and upload id: a second
   * Complete of the same upload waits for it instead of assembling a copy of its own (#24: 40
   * concurrent Completes of a 20 MiB upload staged 712 MiB and read parts another one had dropped).
   */
  private readonly completions = new Map<string, Promise<unknown>>()
  /**
   * The answer of the last committed UploadPart of each part, by upload id and part number: a
   * commit's answer waits for the one committed before it, so the part answered last is the part
   * stored (#24: two concurrent UploadParts of one part number, Complete with the later ETag).
   */
  private readonly partAnswers = new Map<string, Promise<void>>()

  constructor(
    private readonly deps: S3Deps,
    private readonly buckets: S3Buckets,
    private readonly objects: S3Objects,
  ) {}

  create(
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    input: ObjectInput,
    checksum?: { algorithm: ChecksumAlgorithm; type: ChecksumType },
  ): MultipartUpload {
    checkKey(key)
    const w = this.buckets.resolve(tenant, bucket)
    const now = this.deps.clock.now()
    const upload: MultipartUpload = {
      id: newUploadId(),
      tenantId: tenant.id,
      workspaceId: w.id,
      key,
      info: checksum ? { ...input, checksumAlgorithm: checksum.algorithm, ...(checksum.type === 'FULL_OBJECT' ? { checksumType: checksum.type } : {}) } : input,
      createdAt: now,
      expiresAt: now + this.deps.multipartTtlMs,
    }
    engineOf(this.deps.db).transaction(() => this.deps.multipart.insert(upload))
    return upload
  }

  /** What an upload in progress was created with (its SSE key's record, #27); NoSuchUpload when there is none. */
  uploadInfo(tenant: AuthenticatedTenant, bucket: string, key: string, uploadId: string): MultipartUpload['info'] {
    return this.upload(tenant, bucket, key, uploadId).upload.info
  }

  private upload(tenant: AuthenticatedTenant, bucket: string, key: string, uploadId: string): { w: Workspace; upload: MultipartUpload } {
    const w = this.buckets.resolve(tenant, bucket)
    const upload = this.deps.multipart.get(w.id, uploadId)
    if (!upload || upload.key !== key || upload.tenantId !== tenant.id) throw noSuchUpload()
    return { w, upload }
  }

  /** UploadPart: the body streamed and hashed to a durable blob, then recorded (replacing a retried part). */
  async uploadPart(
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    body: BodySpec,
    /** The key of the upload's object for an SSE-C or SSE-KMS upload (#27), checked by the caller against the upload's. */
    sse?: SseKey,
  ): Promise<{ etag: string; checksum?: { algorithm: string; value: string } }> {
    const { w, upload } = this.upload(tenant, bucket, key, uploadId)
    const algorithm = checksumAlgorithmOf(upload)
    if (algorithm) checkPartAlgorithm(algorithm, sentChecksumAlgorithm(body.headers))
    const replaced = this.deps.multipart.part(upload.id, partNumber)?.size ?? 0
    const charge = this.objects.charge(tenant, w, replaced)
    let ingested
    let checksum: string | undefined
    try {
      ingested = await ingest(
        this.deps.store,
        body,
        this.objects.writeLimit(tenant, w, replaced, MAX_PART_BYTES),
        charge.onChunk,
        algorithm,
        sse ? () => sealStream(sse) : undefined,
      )
      // The upload's checksum of the part: the one the client sent (verified), else computed here.
      checksum = algorithm && ingested.digests.checksums[algorithm]
      if (algorithm && ingested.checksum && ingested.checksum.algorithm !== algorithm) {
        await this.deps.store.discard(ingested.staged)
        checkPartAlgorithm(algorithm, ingested.checksum.algorithm)
      }
      await this.commitPart(tenant, w, upload, partNumber, ingested.staged, ingested.digests.md5Hex, checksum, charge.release, ingested.digests.size)
    } finally {
      charge.release()
    }
    if (algorithm && checksum !== undefined) return { etag: `"${ingested.digests.md5Hex}"`, checksum: { algorithm, value: checksum } }
    return { etag: `"${ingested.digests.md5Hex}"`, ...(ingested.checksum ? { checksum: ingested.checksum } : {}) }
  }

  /** UploadPartCopy: a byte range of an object of the tenant becomes a part. */
  async uploadPartCopy(
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    uploadId: string,
    partNumber: number,
    source: ObjectRow,
    range: { start: number; end: number } | undefined,
    /** The key that opens the source, when it is sealed under one (#27). */
    sourceKey?: SseKey,
    /** The upload's key, for an SSE-C or SSE-KMS upload. */
    sse?: SseKey,
  ) {
    const { w, upload } = this.upload(tenant, bucket, key, uploadId)
    const algorithm = checksumAlgorithmOf(upload)
    const replaced = this.deps.multipart.part(upload.id, partNumber)?.size ?? 0
    // The copied bytes count against the quotas as they are staged, as UploadPart's do: concurrent
    // copies and writes together stage at most the free room.
    const charge = this.objects.charge(tenant, w, replaced)
    try {
      const stream = source.size === 0 ? emptyStream() : await openPlain(this.deps.store, source, sourceKey, range ?? { start: 0, end: source.size - 1 })
      const ingested = await ingest(
        this.deps.store,
        {
          source: stream,
          payload: { kind: 'unsigned' },
          signing: { key: new SigningKey(Buffer.alloc(0)), amzDate: '', scope: '', seedSignature: '' },
          headers: {},
        },
        this.objects.writeLimit(tenant, w, replaced, MAX_PART_BYTES),
        charge.onChunk,
        algorithm,
        sse ? () => sealStream(sse) : undefined,
      )
      const checksum = algorithm && ingested.digests.checksums[algorithm]
      await this.commitPart(tenant, w, upload, partNumber, ingested.staged, ingested.digests.md5Hex, checksum, charge.release, ingested.digests.size)
      return {
        etag: `"${ingested.digests.md5Hex}"`,
        lastModified: this.deps.clock.now(),
        ...(algorithm && checksum !== undefined ? { checksum: { algorithm, value: checksum } } : {}),
      }
    } finally {
      charge.release()
    }
  }

  private async commitPart(
    tenant: AuthenticatedTenant,
    w: Workspace,
    upload: MultipartUpload,
    partNumber: number,
    staged: StagedBlob,
    md5: string,
    checksum: string | undefined,
    releaseInFlight: () => void = () => {},
    /** The part's plaintext size, when the staged blob is sealed (#27). */
    size = staged.size,
  ): Promise<void> {
    const { db, store, writes, multipart, clock, quotas } = this.deps
    let replaced: string | undefined
    const slot = `${upload.id}:${partNumber}`
    let answered: (() => void) | undefined
    let before: Promise<void> | undefined
    try {
      // The part row, written with the blob's, keeps the content from collection until the
      // upload completes, aborts or expires (BlobsRepo.sizeIfUnreferenced counts parts).
      await writes.write(BlobWrites.writerId(), staged, (settle) => {
        // Safe to run twice (a PostgreSQL retry, #30): releasing the bytes in flight and settling
        // are idempotent, the replaced part is read again, and its content is only tombstoned
        // (remote store; deleted by the drain below) or unlinked (disk, which a second run skips).
        engineOf(db).transaction(() => {
          replaced = undefined
          if (!multipart.get(w.id, upload.id)) throw noSuchUpload()
          const old = multipart.part(upload.id, partNumber)
          releaseInFlight()
          try {
            quotas.assertFits(tenant.id, w.id, size - (old?.size ?? 0))
          } catch (err) {
            throw err instanceof AppError ? fromAppError(err) : err
          }
          settle()
          multipart.putPart(upload.id, { partNumber, size, md5, sha256: staged.sha256, checksum: checksum ?? null, createdAt: clock.now() })
          if (old && old.sha256 !== staged.sha256) {
            this.buckets.dropBlobs([old.sha256])
            replaced = old.sha256
          }
        })
        // Committed: this is the part now, and it answers after the commit before it did.
        before = this.partAnswers.get(slot)
        const mine = new Promise<void>((resolve) => (answered = resolve))
        this.partAnswers.set(slot, mine)
        void mine.then(() => {
          if (this.partAnswers.get(slot) === mine) this.partAnswers.delete(slot)
        })
      })
    } finally {
      try {
        await store.discard(staged)
        // The replaced part's content, tombstoned on a remote store, is deleted now the new part is recorded.
        if (replaced !== undefined) await writes.drainQuietly()
        if (before) {
          await before
          // One turn of the event loop: the earlier commit's answer is written before this one.
          await new Promise<void>((resolve) => setImmediate(resolve))
        }
      } finally {
        answered?.()
      }
    }
  }

  /**
   * CompleteMultipartUpload: S3's part checks, then the parts streamed into one object. One
   * completion of an upload runs at a time: a concurrent one waits for it and then finds the
   * upload completed (answered as a retry: 200 with the same ETag) or, if it failed, goes on.
   */
  async complete(
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    uploadId: string,
    declared: { partNumber: number; etag: string; checksums: Partial<Record<ChecksumAlgorithm, string>> }[],
    /** The whole object's checksum the request expects (its x-amz-checksum-<algorithm> header). */
    expected?: { algorithm: string; value: string },
    /** The key the upload's parts are sealed under (SSE-C, SSE-KMS, SSE-S3; #27), which opens them to hash the plaintext. */
    sealKey?: ObjectKey,
    /** If-Match / If-None-Match against the key's current object, as PutObject's (objects.ts checkWriteConditions). */
    conditions: WriteConditions = {},
  ): Promise<ObjectRow> {
    const slot = `${tenant.id}:${uploadId}`
    for (let running = this.completions.get(slot); running; running = this.completions.get(slot)) {
      await running.catch(() => undefined)
    }
    const completion = this.claimed(uploadId, () => this.completeNow(tenant, bucket, key, uploadId, declared, expected, sealKey, conditions))
    this.completions.set(slot, completion)
    try {
      return await completion
    } finally {
      if (this.completions.get(slot) === completion) this.completions.delete(slot)
    }
  }

  /**
   * Runs `fn` holding the upload's completion lease (migration 15): with `coffer serve --workers N`
   * a Complete of the same upload on another worker waits for this one as one in this process does
   * (the map above), then finds it completed. A worker that dies completing leaves the lease to
   * expire (30 s, renewed while the assembly runs), and a waiting Complete goes on.
   */
  private async claimed<T>(uploadId: string, fn: () => Promise<T>): Promise<T> {
    const claim = await this.deps.leases.claim(`s3-complete:${uploadId}`)
    try {
      return await fn()
    } finally {
      claim.release()
    }
  }

  private async completeNow(
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    uploadId: string,
    declared: { partNumber: number; etag: string; checksums: Partial<Record<ChecksumAlgorithm, string>> }[],
    expected: { algorithm: string; value: string } | undefined,
    sealKey: ObjectKey | undefined,
    conditions: WriteConditions,
  ): Promise<ObjectRow> {
    const w = this.buckets.resolve(tenant, bucket)
    const found = this.deps.multipart.get(w.id, uploadId)
    // A Complete retried after its upload completed is answered as before: its conditions held then.
    if (!found || found.key !== key || found.tenantId !== tenant.id) return this.completedBefore(w, key, uploadId, declared)
    const upload = found
    // Conditional completion: checked now, before the parts are assembled, and again in the commit's
    // transaction under the key's lock (a failed one leaves the upload in progress, as AWS does).
    const conditional = conditions.ifMatch !== undefined || conditions.ifNoneMatch !== undefined
    const check = () => {
      if (conditional) checkWriteConditions(conditions, this.deps.objects.get(w.id, key))
    }
    check()
    if (declared.length === 0) throw new S3Error('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema.')
    const stored = new Map(this.deps.multipart.parts(upload.id).map((p) => [p.partNumber, p]))
    const chosen: Part[] = []
    let previous = 0
    for (const d of declared) {
      if (d.partNumber <= previous) throw new S3Error('InvalidPartOrder', 'The list of parts was not in ascending order. Parts must be ordered by part number.')
      previous = d.partNumber
      const p = stored.get(d.partNumber)
      if (!p || normalizeEtag(d.etag) !== p.md5) {
        throw new S3Error(
          'InvalidPart',
          "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not have matched the part's entity tag.",
        )
      }
      checkDeclaredChecksums(upload, p, d.checksums)
      chosen.push(p)
    }
    for (const p of chosen.slice(0, -1)) {
      if (p.size < MIN_PART_BYTES)
        throw new S3Error('EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed object size.', { PartNumber: String(p.partNumber) })
    }
    // The object's checksum follows from the parts' checksums (and sizes): a wrong expectation is
    // refused before assembly.
    const algorithm = checksumAlgorithmOf(upload)
    const unsummed = algorithm ? chosen.find((p) => p.checksum === null) : undefined
    if (unsummed) throw new S3Error('InvalidPart', `Part ${unsummed.partNumber} has no ${algorithm!.toUpperCase()} checksum: upload it again`)
    const full = upload.info.checksumType === 'FULL_OBJECT'
    const checksum = algorithm && {
      algorithm,
      type: full ? ('FULL_OBJECT' as const) : ('COMPOSITE' as const),
      value:
        full && isCombinable(algorithm)
          ? fullObjectCrc(
              algorithm,
              chosen.map((p) => ({ checksum: p.checksum!, size: p.size })),
            )
          : compositeChecksum(
              algorithm,
              chosen.map((p) => p.checksum!),
            ),
    }
    if (expected) checkExpectedChecksum(expected, checksum)
    const etag = `"${createHash('md5')
      .update(Buffer.concat(chosen.map((p) => Buffer.from(p.md5, 'hex'))))
      .digest('hex')}-${chosen.length}"`
    const total = chosen.reduce((n, p) => n + p.size, 0)
    // An SSE-C, SSE-KMS or SSE-S3 upload's parts are sealed each on its own: joined as they are,
    // one segment each (sealed-objects.ts). The plaintext's SHA-256, which the Storage Brain API
    // reports as it does a plain object's (whose assembly hashes it), is hashed in the same pass:
    // each part is opened on the side as it is copied, so the cost is CPU (AES-GCM and SHA-256 of
    // the plaintext), no second read (README "Encryption at rest").
    const sse = upload.info.sse
    const segments = chosen.map((p) => p.size)
    const sealedTotal = sse ? sealedObjectSize(segments) : total
    const plainHash = sse && sealKey ? createHash('sha256') : undefined
    const body = concatenate(
      async (sha) => {
        const part = (await this.deps.store.open(sha)).body
        return plainHash ? Readable.from(openedAlongside(part as Buffer | AsyncIterable<Buffer>, sealKey!, (b) => plainHash.update(b))) : part
      },
      chosen.map((p) => p.sha256),
    )
    // The assembled object takes no more room than its parts, which are charged already.
    let staged: StagedBlob
    try {
      staged = await this.deps.store.stage(body, {
        maxBytes: sealedTotal,
        expectedBytes: sealedTotal,
        onOverflow: () => new S3Error('InternalError', 'parts changed during completion'),
      })
    } catch (err) {
      // An abort, or an UploadPart replacing a declared part, released a part while it was read
      // (BlobNotFoundError, or a remote read cut off): the client's answer is that of a Complete
      // arriving just after it, never a 500 (#24).
      throw this.partsGone(w, upload.id, chosen) ?? err
    }
    if (staged.size !== sealedTotal) {
      await this.deps.store.discard(staged)
      throw new Error(`assembled ${staged.size} bytes from parts totalling ${sealedTotal}`)
    }
    const { checksumAlgorithm: _algorithm, checksumType: _type, sse: _sse, ...input } = upload.info
    const info: ObjectInfo = {
      ...input,
      etag,
      parts: chosen.length,
      ...(checksum ? { checksum } : {}),
      ...(sse ? { sse: { ...sse, segments, ...(plainHash ? { sha256: plainHash.digest('hex') } : {}) } } : {}),
    }

    let released: string[] = []
    const { clock, multipart, blobs } = this.deps
    const row = await this.objects.commitStaged(
      tenant,
      w,
      key,
      staged,
      info,
      () => {
        // Still the same upload: a concurrent abort wins cleanly.
        if (!multipart.get(w.id, upload.id)) throw noSuchUpload()
        check()
        released = multipart.delete(upload.id)
        // The parts' content goes once this commit is durable; recorded now, so that a crash
        // before it is removed leaves work the server finishes, not blobs only `coffer gc` finds.
        for (const sha of new Set(released)) blobs.deferRelease(sha, clock.now())
      },
      (made) => {
        // A retried Complete answers with this object while it is the key's (completedBefore).
        multipart.insertCompleted(upload.id, w.id, made.fileId, clock.now() + this.deps.multipartTtlMs)
        // Its part layout, for partNumber reads and GetObjectAttributes.
        this.deps.objects.insertParts(
          made.fileId,
          chosen.map((p) => ({ partNumber: p.partNumber, size: p.size, checksum: p.checksum ?? undefined })),
        )
      },
      total,
    )
    crashPoint('s3-complete-committed')
    // Part blobs are removed once the object is committed (never inside a transaction that could
    // still roll back); one the object itself shares stays referenced and is kept.
    try {
      await this.deps.writes.releaseDeferred([...new Set(released)])
    } catch {
      // Recorded: the periodic collection (or the next start) finishes it.
    }
    return row
  }

  /**
   * A Complete of an upload that is no longer in progress. Answered as AWS and RGW answer a
   * Complete retried after its answer was lost: 200 with the object it made, when the upload was
   * completed within the multipart TTL, that object is still its key's current one, and the part
   * list makes the same ETag (RGW's check_previously_completed); otherwise NoSuchUpload.
   */
  private completedBefore(w: Workspace, key: string, uploadId: string, declared: { partNumber: number; etag: string }[]): ObjectRow {
    const fileId = this.deps.multipart.completedFile(w.id, uploadId, this.deps.clock.now())
    const current = fileId === undefined ? undefined : this.deps.objects.get(w.id, key)
    if (!current || current.fileId !== fileId || multipartEtag(declared) !== etagOf(current)) throw noSuchUpload()
    return current
  }

  /** Why a completion's part could not be read, when the upload changed under it (undefined: it did not). */
  private partsGone(w: Workspace, uploadId: string, chosen: Part[]): S3Error | undefined {
    if (!this.deps.multipart.get(w.id, uploadId)) return noSuchUpload()
    const now = new Map(this.deps.multipart.parts(uploadId).map((p) => [p.partNumber, p.sha256]))
    if (chosen.some((p) => now.get(p.partNumber) !== p.sha256)) {
      return new S3Error(
        'InvalidPart',
        "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not have matched the part's entity tag.",
      )
    }
    return undefined
  }

  /** AbortMultipartUpload: the parts' content is released (deleted from a remote store once tombstoned). */
  async abort(tenant: AuthenticatedTenant, bucket: string, key: string, uploadId: string): Promise<void> {
    // Not under a completion assembling the parts: after it, the upload is completed (NoSuchUpload).
    await this.completions.get(`${tenant.id}:${uploadId}`)?.catch(() => undefined)
    // One on another worker is not waited for (that would take a lease, a write a full disk may
    // refuse): its commit finds the upload gone and answers NoSuchUpload, as after any abort.
    this.deps.reserve.freeing(() =>
      engineOf(this.deps.db).transaction(() => {
        const { upload } = this.upload(tenant, bucket, key, uploadId)
        this.buckets.dropBlobs(this.deps.multipart.delete(upload.id))
      }),
    )
    await this.deps.writes.drainQuietly()
  }

  listParts(tenant: AuthenticatedTenant, bucket: string, key: string, uploadId: string, after: number, maxParts: number) {
    const { upload } = this.upload(tenant, bucket, key, uploadId)
    const rows = this.deps.multipart.partsPage(upload.id, after, maxParts + 1)
    return { upload, parts: rows.slice(0, maxParts), truncated: rows.length > maxParts }
  }

  /**
   * ListMultipartUploads: uploads in (key, upload id) order, keys rolled up into common prefixes
   * at the delimiter, after the key marker (and, for that key, the upload id marker), keyset as
   * the object listing.
   */
  listUploads(
    tenant: AuthenticatedTenant,
    bucket: string,
    q: { prefix: string; delimiter: string; keyMarker: string | undefined; uploadIdMarker: string | undefined; maxUploads: number },
  ): ListResult<MultipartUpload> {
    const w = this.buckets.resolve(tenant, bucket)
    const source: KeysetSource<MultipartUpload, { key: string; id: string }> = {
      fetch: (range, limit) => this.deps.multipart.list(w.id, range, limit),
      key: (u) => u.key,
      cursor: (u) => ({ key: u.key, id: u.id }),
    }
    // Without an upload id marker, listing starts after every upload of the marker's key; upload
    // ids are base64url, so U+FFFF sorts after all of them.
    const after = q.keyMarker === undefined ? undefined : { key: q.keyMarker, cursor: { key: q.keyMarker, id: q.uploadIdMarker ?? '\uffff' } }
    return rollupPage(source, { prefix: q.prefix, delimiter: q.delimiter, after, maxKeys: q.maxUploads })
  }

  /**
   * Inside the caller's write transaction: the upload goes and its parts' content is released, as
   * an AbortMultipartUpload's (lifecycle's AbortIncompleteMultipartUpload, #25).
   */
  abortInTx(uploadId: string): void {
    this.buckets.dropBlobs(this.deps.multipart.delete(uploadId))
  }

  /**
   * Uploads past their TTL, or whose workspace was deleted, are aborted: their parts' bytes are
   * released (on a remote store tombstoned, and deleted by the next GC run's drain).
   */
  reclaim(): number {
    const { multipart, clock } = this.deps
    const engine = engineOf(this.deps.db)
    let reclaimed = 0
    for (const u of [...multipart.expired(clock.now(), 200), ...multipart.orphaned(200)]) {
      engine.transaction(() => {
        this.buckets.dropBlobs(multipart.delete(u.id))
      })
      reclaimed++
    }
    // Completed uploads are remembered for a retried Complete until their time is up.
    engine.transaction(() => multipart.forgetCompleted(clock.now(), 1000))
    return reclaimed
  }
}

/** The ETag a completion of `declared` makes: the MD5 of the parts' MD5s, then `-<count>` (undefined if one is not an MD5). */
function multipartEtag(declared: { etag: string }[]): string | undefined {
  const md5s = declared.map((d) => normalizeEtag(d.etag))
  if (md5s.length === 0 || md5s.some((m) => !/^[0-9a-f]{32}$/.test(m))) return undefined
  const hash = createHash('md5')
  for (const m of md5s) hash.update(Buffer.from(m, 'hex'))
  return `"${hash.digest('hex')}-${md5s.length}"`
}

/** The upload's ChecksumAlgorithm, when it was created with one. */
function checksumAlgorithmOf(upload: MultipartUpload): ChecksumAlgorithm | undefined {
  return upload.info.checksumAlgorithm as ChecksumAlgorithm | undefined
}

/** The algorithm of the checksum an UploadPart carries, from its header or its announced trailer. */
function sentChecksumAlgorithm(headers: BodySpec['headers']): string | undefined {
  for (const name of Object.keys(headers)) {
    const m = /^x-amz-checksum-(.+)$/.exec(name)
    if (m && m[1] !== 'mode' && m[1] !== 'type' && m[1] !== 'algorithm') return m[1]
  }
  const trailer = headers['x-amz-trailer']
  const m = /^\s*x-amz-checksum-([a-z0-9]+)\s*$/i.exec(Array.isArray(trailer) ? trailer.join(',') : (trailer ?? ''))
  return m?.[1]?.toLowerCase()
}

/** A part of an upload created with a checksum algorithm carries a checksum of that algorithm or none (S3). */
function checkPartAlgorithm(expected: ChecksumAlgorithm, sent: string | undefined): void {
  if (sent !== undefined && sent !== expected) {
    throw new S3Error('InvalidRequest', `Checksum Type mismatch occurred, expected checksum Type: ${expected}, actual checksum Type: ${sent}`)
  }
}

/**
 * The checksums CompleteMultipartUpload declares for a part must be the part's. A declared
 * checksum is checked only for an upload created with a checksum algorithm (the only parts whose
 * checksum is kept); one of another algorithm does not match. A part declared without one is
 * accepted: its checksum was verified or computed when it was uploaded (README, S3 front).
 */
function checkDeclaredChecksums(upload: MultipartUpload, part: Part, declared: Partial<Record<ChecksumAlgorithm, string>>): void {
  const algorithm = checksumAlgorithmOf(upload)
  if (!algorithm) return
  for (const [name, value] of Object.entries(declared)) {
    if (name !== algorithm || value.trim() !== part.checksum) {
      throw new S3Error(
        'InvalidPart',
        `One or more of the specified parts could not be found. The part may not have been uploaded, or the specified ${name.toUpperCase()} checksum may not have matched the part's (part ${part.partNumber}).`,
      )
    }
  }
}

/** CompleteMultipartUpload's expected whole-object checksum against the composite (S3 answers BadDigest). */
function checkExpectedChecksum(expected: { algorithm: string; value: string }, actual: { algorithm: ChecksumAlgorithm; value: string } | undefined): void {
  if (!actual)
    throw new S3Error('InvalidRequest', `The upload was created without a checksum algorithm: its ${expected.algorithm.toUpperCase()} cannot be checked`)
  if (expected.algorithm !== actual.algorithm) {
    throw new S3Error(
      'InvalidRequest',
      `Checksum Type mismatch occurred, expected checksum Type: ${actual.algorithm}, actual checksum Type: ${expected.algorithm}`,
    )
  }
  if (expected.value.trim() !== actual.value) {
    throw new S3Error('BadDigest', `The ${actual.algorithm.toUpperCase()} you specified did not match the calculated checksum.`)
  }
}

function normalizeEtag(etag: string): string {
  return etag.trim().replace(/^W\//, '').replace(/^"|"$/g, '').toLowerCase()
}

function emptyStream(): Readable {
  return Readable.from([])
}
