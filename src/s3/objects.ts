import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { ObjectInfo, ObjectPart, ObjectRow } from '../db/repos/objects'
import type { BucketWorkspace as Workspace } from '../services/bucket-cache'
import { Readable } from 'node:stream'
import type { BlobStore, ByteRange, StagedBlob } from '../blobs/blob-store'
import { openSealedObject, sealStream } from './sealed-objects'
import { segmentsOf, type SseKey } from './sse'
import { uuidv7 } from '../lib/ids'
import { toFileName } from '../lib/text'
import { AppError } from '../errors'
import { BlobWrites } from '../services/blob-writes'
import { engineOf } from '../db/engine'
import { lockError } from './object-lock'
import { S3Error, fromAppError } from './errors'
import { ingest, type BodySpec } from './ingest'
import { isBucketName, type S3Buckets, type S3Deps } from './buckets'
import { checksumElement, type ChecksumAlgorithm } from './checksums'
import type { DeleteOutcome } from '../services/versions'
import type { XmlNode } from './xml'

/** The attributes GetObjectAttributes can be asked for (x-amz-object-attributes). */
const OBJECT_ATTRIBUTES = new Set(['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize'])

/** S3's key limit: 1–1024 bytes of UTF-8. */
export function checkKey(key: string): void {
  if (key.length === 0) throw new S3Error('InvalidArgument', 'An object key must not be empty')
  if (Buffer.byteLength(key) > 1024) throw new S3Error('KeyTooLongError', 'Your key is too long')
  if (key.includes('\u0000')) throw new S3Error('InvalidArgument', 'An object key must not contain NUL')
}

/**
 * The file name the Storage Brain API shows for the object at `key` (its id is `id`): the key's last
 * segment made a name the API's own handshake accepts (lib/text.ts toFileName, #24), so a key like
 * `x\x1b[31m\r\nX-Evil: 1`, `a/.` or `invoice\u202Efdp.exe` never reaches a listing, a terminal or
 * a downloaded file's name as is. The key itself is stored and answered unchanged.
 */
export function nameOfKey(key: string, id: string): string {
  return toFileName(key, id)
}

/** An entity tag as compared: without its quotes or weak marker, so `"abc"`, `abc` and `W/"abc"` agree. */
const bareTag = (t: string) =>
  t
    .trim()
    .replace(/^W\//, '')
    .replace(/^"(.*)"$/, '$1')

/** A write's If-Match / If-None-Match (PutObject, CopyObject's destination, CompleteMultipartUpload). */
export interface WriteConditions {
  ifMatch?: string | undefined
  ifNoneMatch?: string | undefined
}

/**
 * PutObject's conditional writes, as AWS answers them (#24): `If-None-Match` takes only `*` (any
 * other value is 501 NotImplemented, naming the header, as AWS answers it), and not together with
 * `If-Match`; `If-Match` compares entity tags with or without their quotes, as GetObject and
 * CopyObject's conditions do; on a missing key it is NoSuchKey.
 */
export function checkWriteConditions(c: WriteConditions, current: ObjectRow | undefined): void {
  const notImplemented = (header: string, additionalMessage: string) =>
    new S3Error('NotImplemented', 'A header you provided implies functionality that is not implemented', { Header: header, additionalMessage })
  const failed = (condition: string) =>
    new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', { Condition: condition })
  if (c.ifNoneMatch !== undefined && c.ifMatch !== undefined) {
    throw notImplemented('If-Match,If-None-Match', 'Multiple conditional request headers present in the request')
  }
  if (c.ifNoneMatch !== undefined && current) {
    // `*`: only if no object has the key (AWS). ETags: only if the current object has none of them,
    // as Ceph RGW and MinIO answer it; AWS answers 501 there, which no client relies on (#24).
    const tags = c.ifNoneMatch.split(',').map(bareTag)
    if (tags.includes('*') || tags.includes(bareTag(etagOf(current)))) throw failed('If-None-Match')
  }
  if (c.ifMatch !== undefined) {
    if (!current) throw new S3Error('NoSuchKey', 'The specified key does not exist.')
    const tags = c.ifMatch.split(',').map(bareTag)
    if (!tags.includes('*') && !tags.includes(bareTag(etagOf(current)))) throw failed('If-Match')
  }
}

/**
 * A versionId as S3 accepts it: `null` or an id of at most 1024 bytes of printable ASCII. Anything
 * else is AWS's 400 InvalidArgument "Invalid version id specified", not a 404.
 */
export function checkVersionId(versionId: string): void {
  if (versionId === '' || versionId.length > 1024 || !/^[\x21-\x7e]+$/.test(versionId)) {
    throw new S3Error('InvalidArgument', 'Invalid version id specified', { ArgumentName: 'versionId', ArgumentValue: versionId })
  }
}

/**
 * Conditional deletes (If-Match; RGW's x-amz-if-match-last-modified-time and x-amz-if-match-size,
 * which AWS has for directory buckets): as headers of DeleteObject, as `<ETag>`,
 * `<LastModifiedTime>`, `<Size>` of a DeleteObjects entry. Never ignored: a condition the server skipped would delete what the client meant to keep.
 */
export interface DeleteConditions {
  ifMatch?: string | undefined
  lastModified?: string | undefined
  size?: string | undefined
  /** x-amz-bypass-governance-retention: true (object lock, #25): a GOVERNANCE retention yields. */
  bypassGovernance?: boolean | undefined
}

/** The ETag of an object: S3 writes record theirs; API uploads are addressed by their SHA-256. */
export const etagOf = (o: ObjectRow): string => o.info?.etag ?? `"${o.sha256}"`

export type ObjectInput = Omit<ObjectInfo, 'etag' | 'checksum' | 'parts'>

/** Objects are files with a key: writes, reads, deletes and copies of one object. */
export class S3Objects {
  constructor(
    private readonly deps: S3Deps,
    private readonly buckets: S3Buckets,
  ) {}

  /** The room a write of `key` has: quotas (counting the bytes of the object it replaces) and the size limit. */
  writeLimit(tenant: AuthenticatedTenant, w: Workspace, replacedBytes: number, maxBytes: number) {
    const room = this.deps.quotas.room(tenant.id, w.id)
    const fits = room.bytes + replacedBytes
    if (fits >= maxBytes) {
      return { maxBytes, overflow: () => new S3Error('EntityTooLarge', `Your proposed upload exceeds the maximum allowed size of ${maxBytes} bytes`) }
    }
    return { maxBytes: fits, overflow: () => fromAppError(room.error(fits + 1)) }
  }

  /** How the object a file is is sealed under a key of its own (SSE-C, SSE-KMS; #27), if it is. */
  sealedInfo(fileId: string): ObjectInfo['sse'] {
    return this.deps.objects.byFile(fileId)?.info?.sse
  }

  /** PutObject: streams the body to the store, then replaces whatever the key held in one transaction. */
  async put(
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    body: BodySpec,
    input: ObjectInput,
    conditions: { ifMatch?: string | undefined; ifNoneMatch?: string | undefined } = {},
    /** SSE-C or SSE-KMS (#27): the key the object is sealed under (sealed-objects.ts). */
    sse?: SseKey,
  ) {
    checkKey(key)
    const w = this.buckets.resolve(tenant, bucket)
    // The bytes this write frees when it commits: the null version it replaces, none in a versioned bucket (#25).
    const replaced = this.deps.versions.replacedBytes(w.id, key)
    // Conditional writes (If-None-Match: * creates only; If-Match replaces only that version):
    // checked now, and again in the commit transaction, where a concurrent writer cannot slip in.
    // Without a condition there is nothing to read: two statements fewer per PutObject (#29).
    const conditional = conditions.ifMatch !== undefined || conditions.ifNoneMatch !== undefined
    const check = () => {
      if (conditional) checkWriteConditions(conditions, this.deps.objects.get(w.id, key))
    }
    check()
    const charge = this.charge(tenant, w, replaced)
    try {
      const limit = this.writeLimit(tenant, w, replaced, this.deps.maxObjectBytes)
      const ingested = await ingest(this.deps.store, body, limit, charge.onChunk, undefined, sse ? () => sealStream(sse) : undefined)
      const info: ObjectInfo = {
        ...input,
        etag: `"${ingested.digests.md5Hex}"`,
        ...(ingested.checksum ? { checksum: ingested.checksum } : {}),
        // The plaintext's SHA-256 beside the key: what the Storage Brain API reports of it (#27).
        ...(sse ? { sse: { ...sse.stored, ...(ingested.plainSha256 ? { sha256: ingested.plainSha256 } : {}) } } : {}),
      }
      const row = await this.commitStaged(
        tenant,
        w,
        key,
        ingested.staged,
        info,
        () => {
          check()
          // The bytes stop counting as in flight in the transaction that charges them as stored.
          charge.release()
        },
        undefined,
        ingested.digests.size,
      )
      return { etag: info.etag, checksum: ingested.checksum, row }
    } finally {
      charge.release()
    }
  }

  /**
   * Counts a write's bytes in flight against the quotas as they arrive (Quotas.stream, shared with
   * the API's PUT), so concurrent writes together stage at most the free room. The first
   * `replacedBytes` are not counted: the write frees them when it commits.
   */
  charge(tenant: AuthenticatedTenant, w: Workspace, replacedBytes: number): { onChunk: (bytes: number) => void; release: () => void } {
    const stream = this.deps.quotas.stream({ tenantId: tenant.id, workspaceId: w.id, declaredSize: null })
    let seen = 0
    return {
      onChunk: (bytes) => {
        const before = Math.max(0, seen - replacedBytes)
        seen += bytes
        const over = Math.max(0, seen - replacedBytes) - before
        if (over > 0) stream.add(over)
      },
      release: () => stream.release(),
    }
  }

  /**
   * Places a staged blob (BlobWrites: under a lease on a remote store) and makes it the object at
   * `key`; on failure the content goes unless something references it. Always discards the staged file.
   */
  async commitStaged(
    tenant: AuthenticatedTenant,
    w: Workspace,
    key: string,
    staged: StagedBlob,
    info: ObjectInfo,
    beforeCommit?: () => void,
    /**
     * Runs in the commit's transaction with the new object: a multipart object records its part
     * layout, and CompleteMultipartUpload remembers the object it made (a retried Complete).
     */
    onCommit?: (row: ObjectRow) => void,
    /** The object's size when it is not the staged blob's: a sealed object's plaintext size (#27). */
    size = staged.size,
  ): Promise<ObjectRow> {
    try {
      return await this.deps.writes.write(BlobWrites.writerId(), staged, (settle) =>
        // Group commit: answered once the WAL holding it is on disk, the flush shared with the
        // uploads of both fronts settling at the same time.
        this.deps.commits.run(() => {
          // First: what beforeCommit checks of the key (a conditional write's current version) holds to the commit.
          this.deps.versions.lockKey(w.id, key)
          beforeCommit?.()
          settle()
          const row = this.replace(tenant, w, key, staged.sha256, size, info)
          onCommit?.(row)
          return row
        }),
      )
    } catch (err) {
      throw err instanceof AppError ? fromAppError(err) : err
    } finally {
      await this.deps.store.discard(staged)
    }
  }

  /**
   * Inside a write transaction: the object at `key` becomes this content, a new version of it
   * (#25). What the key held stops being current first (services/versions.ts retire): a null
   * version it replaces is released before the new size must fit the quotas; in a versioned bucket
   * the old version stays stored and counted.
   */
  replace(tenant: AuthenticatedTenant, w: Workspace, key: string, sha256: string, size: number, requested: ObjectInfo): ObjectRow {
    const { objects, buckets, clock } = this.deps
    // The lock asked for goes onto the version's row (lockNewVersion), not into the stored info.
    const { lock, ...info } = requested
    // The bucket state cache answers as a read of the row would, in this transaction (#29).
    const live = buckets.live(tenant.id, w.id)
    if (!live) throw new S3Error('NoSuchBucket', 'The specified bucket does not exist', { BucketName: w.slug })
    const now = clock.now()
    const next = this.deps.versions.retire(w.id, key, now)
    // A pending API upload holding this very key (`<fileId>/<name>`) is no version yet: it ends.
    const old = objects.liveIdByKey(w.id, key)
    if (old !== undefined) this.softDelete(tenant, old, now)
    try {
      this.deps.quotas.assertFits(tenant.id, w.id, size)
    } catch (err) {
      throw err instanceof AppError ? fromAppError(err) : err
    }
    const id = uuidv7(now)
    const row: ObjectRow = {
      fileId: id,
      tenantId: tenant.id,
      workspaceId: w.id,
      key,
      size,
      sha256,
      info,
      fileType: info.contentType,
      originalName: nameOfKey(key, id),
      completedAt: now,
    }
    objects.insertCompleted({
      id,
      tenantId: tenant.id,
      workspaceId: w.id,
      key,
      originalName: row.originalName,
      fileType: info.contentType,
      size,
      sha256,
      info,
      now,
    })
    row.versionId = this.deps.versions.record(tenant.id, w.id, key, id, size, now, next)
    row.versioning = next.status
    this.lockNewVersion(w, key, row.versionId, lock, now)
    // In the transaction of the write, like the API's commit: PutObject, CopyObject and
    // CompleteMultipartUpload all end here. The object has no webhook of its own: only its
    // bucket's is told, which the cache has just read.
    this.deps.events.settledObject(id, live.webhookUrl)
    // The row as written, not read back (#29): what objects.get would answer, one statement fewer.
    return row
  }

  /**
   * In the write's transaction: the new version's object lock (#25), the request's or else the
   * bucket's default retention. A lock asked of a bucket without object lock is InvalidRequest,
   * and a retain-until date not ahead of the server clock InvalidArgument, as AWS.
   */
  private lockNewVersion(w: Workspace, key: string, versionId: string, lock: ObjectInfo['lock'], now: number): void {
    const { objectLock } = this.deps
    if (lock !== undefined && !objectLock.enabled(w.id)) throw new S3Error('InvalidRequest', 'Bucket is missing Object Lock Configuration')
    if (lock?.until !== undefined && lock.until <= now) throw new S3Error('InvalidArgument', 'The retain until date must be in the future!')
    const requested = lock?.mode !== undefined && lock.until !== undefined ? { mode: lock.mode, until: lock.until } : undefined
    objectLock.applyToNew(w.id, key, versionId, objectLock.retentionFor(w.id, requested, now), lock?.legalHold)
  }

  private softDelete(tenant: AuthenticatedTenant, fileId: string, now: number): void {
    if (this.deps.files.softDelete(tenant.id, fileId, now)) this.deps.events.deleted(fileId)
  }

  /**
   * The object GetObject/HeadObject read: the key's current version, or the version `versionId`
   * names (#25). A delete marker is no object: without a versionId, NoSuchKey (404); named by its
   * versionId, MethodNotAllowed (405); either way with x-amz-delete-marker and its version id, as AWS.
   */
  head(tenant: AuthenticatedTenant, bucket: string, key: string, versionId?: string): ObjectRow {
    checkKey(key)
    if (versionId !== undefined) return this.version(tenant, bucket, key, versionId)
    // One statement finds bucket and object together, where a GetObject ran two (#14); only a miss
    // asks which of the two is missing.
    const o = isBucketName(bucket) ? this.deps.objects.getInBucket(tenant.id, bucket, key) : undefined
    if (o) return o
    const w = this.buckets.resolve(tenant, bucket)
    const err = new S3Error('NoSuchKey', 'The specified key does not exist.', { Key: key })
    const latest = this.deps.versions.latest(w.id, key)
    if (latest?.fileId === null) err.headers = { 'x-amz-delete-marker': 'true', 'x-amz-version-id': latest.versionId }
    throw err
  }

  /** One version of `key` by its id (GET/HEAD/COPY with versionId). */
  version(tenant: AuthenticatedTenant, bucket: string, key: string, versionId: string): ObjectRow {
    checkVersionId(versionId)
    const w = this.buckets.resolve(tenant, bucket)
    const v = this.deps.versions.byId(w.id, key, versionId)
    if (!v) throw new S3Error('NoSuchVersion', 'The specified version does not exist.', { Key: key, VersionId: versionId })
    if (v.fileId === null) {
      const err = new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.', { Method: 'GET', ResourceType: 'DeleteMarker' })
      err.headers = { 'x-amz-delete-marker': 'true', 'x-amz-version-id': v.versionId }
      throw err
    }
    const o = this.deps.objects.byFile(v.fileId)
    if (!o) throw new S3Error('NoSuchVersion', 'The specified version does not exist.', { Key: key, VersionId: versionId })
    return o
  }

  /**
   * GetObject/HeadObject with partNumber: the object and the byte range of that part. An object
   * not written by multipart is one part (partNumber=1 is all of it). A part number the object
   * does not have is `InvalidPart` (400), as ceph/s3-tests expect of AWS and RGW.
   */
  headPart(tenant: AuthenticatedTenant, bucket: string, key: string, partNumber: number, versionId?: string): { object: ObjectRow; part: ObjectPart } {
    const object = this.head(tenant, bucket, key, versionId)
    const missing = () => new S3Error('InvalidPart', `The object has no part number ${partNumber}`, { PartNumber: String(partNumber) })
    if (object.info?.parts === undefined) {
      if (partNumber !== 1) throw missing()
      return { object, part: { partNumber: 1, size: object.size, offset: 0, checksum: null } }
    }
    const part = this.deps.objects.part(object.fileId, partNumber)
    if (part) return { object, part }
    if (this.deps.objects.partsPage(object.fileId, 0, 1).length === 0) {
      // Completed before the part layout was recorded (migration 12): its part boundaries are unknown.
      throw new S3Error('NotImplemented', 'Reading one part of this object is not implemented: it was completed before Coffer recorded part layouts')
    }
    throw missing()
  }

  /**
   * GetObjectAttributes. As AWS: the ETag without quotes; Checksum only for an object that has one;
   * ObjectParts only for a multipart object whose upload had a checksum algorithm (AWS lists no
   * parts otherwise): the parts count alone for a FULL_OBJECT checksum, else the parts with their
   * checksums, paged by `x-amz-max-parts` and `x-amz-part-number-marker` like ListParts.
   */
  attributes(
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    q: { attributes: string[]; maxParts: number; partNumberMarker: number; versionId?: string | undefined },
  ): { lastModified: number; body: XmlNode; object: ObjectRow } {
    if (q.attributes.length === 0) {
      throw new S3Error('InvalidArgument', 'The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty')
    }
    if (q.attributes.some((a) => !OBJECT_ATTRIBUTES.has(a))) throw new S3Error('InvalidArgument', 'Invalid attribute name specified.')
    const o = this.head(tenant, bucket, key, q.versionId)
    const want = new Set(q.attributes)
    const checksum = o.info?.checksum
    const multipart = o.info?.parts !== undefined
    const body: XmlNode = {}
    if (want.has('ETag')) body.ETag = etagOf(o).replace(/^"|"$/g, '')
    if (want.has('Checksum') && checksum) {
      body.Checksum = { [checksumElement(checksum.algorithm as ChecksumAlgorithm)]: checksum.value, ChecksumType: checksum.type ?? 'FULL_OBJECT' }
    }
    if (want.has('ObjectParts') && multipart && checksum?.type === 'FULL_OBJECT') body.ObjectParts = { PartsCount: o.info!.parts! }
    else if (want.has('ObjectParts') && multipart && checksum) {
      const page = this.deps.objects.partsPage(o.fileId, q.partNumberMarker, q.maxParts + 1)
      const parts = page.slice(0, q.maxParts)
      const truncated = page.length > q.maxParts
      const element = checksumElement(checksum.algorithm as ChecksumAlgorithm)
      body.ObjectParts = {
        IsTruncated: truncated,
        MaxParts: q.maxParts,
        ...(truncated ? { NextPartNumberMarker: parts.at(-1)!.partNumber } : {}),
        PartNumberMarker: q.partNumberMarker,
        Part: parts.map((p) => ({ ...(p.checksum !== null ? { [element]: p.checksum } : {}), PartNumber: p.partNumber, Size: p.size })),
        PartsCount: o.info!.parts!,
      }
    }
    if (want.has('StorageClass')) body.StorageClass = 'STANDARD'
    if (want.has('ObjectSize')) body.ObjectSize = o.size
    return { lastModified: o.completedAt, body, object: o }
  }

  /**
   * DeleteObject: idempotent (a missing key is not an error), as S3's. Without a versionId, a
   * versioned bucket gets a delete marker; with one, that version goes for good (#25).
   */
  delete(tenant: AuthenticatedTenant, bucket: string, key: string, versionId?: string, conditions: DeleteConditions = {}): DeleteOutcome {
    checkKey(key)
    if (versionId !== undefined) checkVersionId(versionId)
    const { db, clock, reserve } = this.deps
    let outcome: DeleteOutcome = { deleteMarker: false }
    reserve.freeing(() =>
      // Rows only (and the disk store's idempotent unlinks): a run the disk reserve or PostgreSQL
      // repeats checks again and sets the outcome again.
      engineOf(db).transaction(() => {
        const w = this.buckets.resolve(tenant, bucket)
        // Checked under the write lock (and the key's on PostgreSQL): no write can slip in between the check and the delete.
        this.deps.versions.lockKey(w.id, key)
        this.checkDeleteConditions(w, key, versionId, conditions)
        outcome = this.deleteOne(tenant, w, key, versionId, clock.now())
      }),
    )
    return outcome
  }

  /**
   * A conditional delete's preconditions against the version it would delete (the one named, or
   * the current one). A version or key that does not exist is no failure (the delete is a no-op,
   * as RGW answers); a delete marker has no ETag, size or content to match, so any condition fails.
   */
  private checkDeleteConditions(w: Workspace, key: string, versionId: string | undefined, c: DeleteConditions): void {
    // A locked version is never deleted for good (object lock, #25); a delete marker over it is allowed.
    if (versionId !== undefined) {
      try {
        this.deps.objectLock.checkDeletable(w.id, key, versionId, c.bypassGovernance === true)
      } catch (err) {
        throw lockError(err)
      }
    }
    if (c.ifMatch === undefined && c.lastModified === undefined && c.size === undefined) return
    const { versions, objects } = this.deps
    const v = versionId !== undefined ? versions.byId(w.id, key, versionId) : versions.latest(w.id, key)
    if (!v) return
    const failed = () => new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold')
    const o = v.fileId === null ? undefined : objects.byFile(v.fileId)
    if (!o) throw failed()
    if (c.ifMatch !== undefined) {
      const tags = c.ifMatch.split(',').map(bareTag)
      if (!tags.includes('*') && !tags.includes(bareTag(etagOf(o)))) throw failed()
    }
    if (c.size !== undefined) {
      if (!/^\d{1,15}$/.test(c.size.trim())) throw new S3Error('InvalidArgument', 'The size precondition must be a non-negative integer')
      if (Number(c.size) !== o.size) throw failed()
    }
    if (c.lastModified !== undefined) {
      const at = Date.parse(c.lastModified)
      if (Number.isNaN(at)) throw new S3Error('InvalidArgument', 'The last-modified-time precondition is not a date')
      // HTTP dates have whole seconds.
      if (Math.floor(at / 1000) !== Math.floor(o.completedAt / 1000)) throw failed()
    }
  }

  /** Inside a write transaction: one key's (or version's) delete. */
  private deleteOne(tenant: AuthenticatedTenant, w: Workspace, key: string, versionId: string | undefined, now: number): DeleteOutcome {
    const { versions, objects } = this.deps
    if (versionId !== undefined) return versions.deleteVersion(w.id, key, versionId)
    const outcome = versions.deleteCurrent(tenant.id, w.id, key, now)
    // A pending API upload holding this very key is no version: the delete ends it, as before versions.
    const pending = objects.liveIdByKey(w.id, key)
    if (pending !== undefined) this.softDelete(tenant, pending, now)
    return outcome
  }

  /** DeleteObjects: one transaction for the batch; per-key errors are reported, not thrown. */
  deleteVersions(
    tenant: AuthenticatedTenant,
    bucket: string,
    keys: (string | ({ key: string; versionId?: string | undefined } & DeleteConditions))[],
  ): {
    deleted: { key: string; versionId?: string; deleteMarker: boolean; deleteMarkerVersionId?: string }[]
    errors: { key: string; versionId?: string; code: string; message: string }[]
  } {
    const { db, clock, reserve } = this.deps
    type Deleted = { key: string; versionId?: string; deleteMarker: boolean; deleteMarkerVersionId?: string }
    type Failed = { key: string; versionId?: string; code: string; message: string }
    const out = { deleted: [] as Deleted[], errors: [] as Failed[] }
    const run = () => {
      // A run the disk reserve repeats (a full disk), or PostgreSQL after a deadlock or a
      // serialization failure (#30), reports what its last run did.
      out.deleted.length = out.errors.length = 0
      const w = this.buckets.resolve(tenant, bucket)
      const now = clock.now()
      for (const item of keys) {
        const { key, versionId, ...conditions } = typeof item === 'string' ? { key: item, versionId: undefined } : item
        const named = versionId !== undefined ? { versionId } : {}
        try {
          checkKey(key)
          if (versionId !== undefined) checkVersionId(versionId)
          this.deps.versions.lockKey(w.id, key)
          this.checkDeleteConditions(w, key, versionId, conditions)
        } catch (err) {
          if (!(err instanceof S3Error)) throw err
          out.errors.push({ key, ...named, code: err.code, message: err.message })
          continue
        }
        const o = this.deleteOne(tenant, w, key, versionId, now)
        // As AWS: a delete naming a version reports it (and whether it was a marker); one adding a
        // marker reports DeleteMarker and DeleteMarkerVersionId.
        if (versionId !== undefined)
          out.deleted.push({ key, versionId, deleteMarker: o.deleteMarker, ...(o.deleteMarker ? { deleteMarkerVersionId: versionId } : {}) })
        else if (o.deleteMarker) out.deleted.push({ key, deleteMarker: true, deleteMarkerVersionId: o.versionId! })
        else out.deleted.push({ key, deleteMarker: false })
      }
    }
    reserve.freeing(() => engineOf(db).transaction(run))
    return out
  }

  /**
   * PutObjectTagging / DeleteObjectTagging: the live object's tags become `tags` (none: removed),
   * its info rewritten in one transaction so that a concurrent write replaces the object whole.
   * An object uploaded through the API (no S3 info) gets the info its GET already answers with.
   */
  setTags(tenant: AuthenticatedTenant, bucket: string, key: string, tags: Record<string, string>, versionId?: string): ObjectRow {
    return engineOf(this.deps.db).transaction(() => {
      const o = this.head(tenant, bucket, key, versionId)
      const { tags: _old, ...rest } = o.info ?? { etag: etagOf(o), contentType: o.fileType, meta: {} }
      const info: ObjectInfo = Object.keys(tags).length > 0 ? { ...rest, tags } : rest
      this.deps.objects.setInfo(o.fileId, info)
      return { ...o, info }
    })
  }

  /** CopyObject within the tenant: the content is shared (same blob), not copied. */
  copy(
    tenant: AuthenticatedTenant,
    from: { bucket: string; key: string; versionId?: string | undefined },
    to: { bucket: string; key: string },
    /** The destination's attributes, or the source's (the COPY directive) with the request's ACL. */
    info: ObjectInfo | { copy: true; acl?: string },
    /** The copy's tags: the source's (`x-amz-tagging-directive: COPY`, the default) or these (REPLACE). */
    tags: Record<string, string> | 'copy',
    check: (source: ObjectRow) => void,
    /** The destination's If-Match / If-None-Match, as PutObject's (AWS's conditional CopyObject). */
    conditions: { ifMatch?: string | undefined; ifNoneMatch?: string | undefined } = {},
    /** The copy's own x-amz-object-lock-* (#25): never the source's. */
    lock?: ObjectInfo['lock'],
  ): { row: ObjectRow; source: ObjectRow } {
    checkKey(to.key)
    // Rows only: the content is shared, nothing is written to the store, so a run PostgreSQL
    // repeats (#30) reads and checks again and makes one copy.
    return engineOf(this.deps.db).transaction(() => {
      const source = this.head(tenant, from.bucket, from.key, from.versionId)
      check(source)
      const target = this.buckets.resolve(tenant, to.bucket)
      this.deps.versions.lockKey(target.id, to.key)
      checkWriteConditions(conditions, this.deps.objects.get(target.id, to.key))
      const { lock: _sourceLock, ...copied } = copiedInfo(source, info, tags)
      const row = this.replace(tenant, target, to.key, source.sha256, source.size, { ...copied, ...(lock ? { lock } : {}) })
      // The copy keeps the source's parts count, so it keeps the layout that partNumber reads (#24).
      if (copied.parts !== undefined) this.deps.objects.copyParts(source.fileId, row.fileId)
      return { row, source }
    })
  }

  /**
   * CopyObject when the source or the copy is sealed under a key of its own (SSE-C, SSE-KMS, #27):
   * the source's plaintext (opened with `sourceKey`) streams into a new blob sealed under `key`
   * (or into a plain one), since the two cannot share content. As `copy` otherwise: conditions
   * checked now and again in the commit, the quotas charged as the bytes are staged.
   */
  async copySealed(
    tenant: AuthenticatedTenant,
    from: { bucket: string; key: string; versionId?: string | undefined },
    to: { bucket: string; key: string },
    info: ObjectInfo | { copy: true; acl?: string },
    tags: Record<string, string> | 'copy',
    check: (source: ObjectRow) => void,
    conditions: { ifMatch?: string | undefined; ifNoneMatch?: string | undefined },
    lock: ObjectInfo['lock'],
    /** The key that opens the source (its SSE-C key from the request's copy-source headers, its KMS key), once it is known. */
    sourceKey: (source: ObjectRow) => SseKey | undefined,
    key: SseKey | undefined,
  ): Promise<{ row: ObjectRow; source: ObjectRow }> {
    checkKey(to.key)
    const source = this.head(tenant, from.bucket, from.key, from.versionId)
    check(source)
    const opener = sourceKey(source)
    const target = this.buckets.resolve(tenant, to.bucket)
    const guard = () => checkWriteConditions(conditions, this.deps.objects.get(target.id, to.key))
    guard()
    const { lock: _sourceLock, parts: _parts, sse: _sse, ...copied } = copiedInfo(source, info, tags)
    const replaced = this.deps.versions.replacedBytes(target.id, to.key)
    const charge = this.charge(tenant, target, replaced)
    try {
      const stream = source.size === 0 ? Readable.from([]) : await openPlain(this.deps.store, source, opener)
      const ingested = await ingest(
        this.deps.store,
        { source: stream, payload: { kind: 'unsigned' }, headers: {} },
        this.writeLimit(tenant, target, replaced, this.deps.maxObjectBytes),
        charge.onChunk,
        undefined,
        key ? () => sealStream(key) : undefined,
      )
      const finalInfo: ObjectInfo = {
        ...copied,
        // A single-part copy of the plaintext: its ETag is its MD5 (a multipart source's count of parts does not carry over).
        etag: `"${ingested.digests.md5Hex}"`,
        ...(key ? { sse: { ...key.stored, ...(ingested.plainSha256 ? { sha256: ingested.plainSha256 } : {}) } } : {}),
        ...(lock ? { lock } : {}),
      }
      const row = await this.commitStaged(
        tenant,
        target,
        to.key,
        ingested.staged,
        finalInfo,
        () => {
          guard()
          charge.release()
        },
        undefined,
        ingested.digests.size,
      )
      return { row, source }
    } finally {
      charge.release()
    }
  }
}

/** The plaintext of an object: opened with its key when it is sealed under one (#27). */
export async function openPlain(store: BlobStore, o: ObjectRow, key: SseKey | undefined, range?: ByteRange): Promise<Readable> {
  const opened = key ? await openSealedObject(store, o.sha256, segmentsOf(key.stored, o.size), key, range) : await store.open(o.sha256, range)
  return Buffer.isBuffer(opened.body) ? Readable.from([opened.body]) : opened.body
}

/**
 * The attributes of a copy (CopyObject): the source's (the COPY directive) with the request's ACL,
 * or the request's (REPLACE) with the source's ETag and parts; tags by their own directive.
 */
function copiedInfo(source: ObjectRow, info: ObjectInfo | { copy: true; acl?: string }, tags: Record<string, string> | 'copy'): ObjectInfo {
  const { acl: _sourceAcl, tags: sourceTags, ...kept }: ObjectInfo = source.info ?? { etag: etagOf(source), contentType: source.fileType, meta: {} }
  const { tags: _requestTags, ...given }: ObjectInfo = 'copy' in info ? { ...kept, ...(info.acl ? { acl: info.acl } : {}) } : info
  // Tags follow their own directive, whatever the metadata's (AWS CopyObject).
  const copyTags = tags === 'copy' ? sourceTags : tags
  return {
    ...('copy' in info ? given : { ...given, etag: kept.etag, ...(kept.parts ? { parts: kept.parts } : {}) }),
    ...(copyTags && Object.keys(copyTags).length > 0 ? { tags: copyTags } : {}),
  }
}
