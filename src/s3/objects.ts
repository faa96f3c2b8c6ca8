import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { ObjectInfo, ObjectPart, ObjectRow } from '../db/repos/objects'
import type { Workspace } from '../db/repos/workspaces'
import type { StagedBlob } from '../blobs/blob-store'
import { uuidv7 } from '../lib/ids'
import { toFileName } from '../lib/text'
import { AppError } from '../errors'
import { BlobWrites } from '../services/blob-writes'
import { S3Error, fromAppError } from './errors'
import { ingest, type BodySpec } from './ingest'
import { isBucketName, type S3Buckets, type S3Deps } from './buckets'
import { checksumElement, type ChecksumAlgorithm } from './checksums'
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

/**
 * PutObject's conditional writes, as AWS answers them (#24): `If-None-Match` takes only `*` (any
 * other value is 501 NotImplemented, naming the header, as AWS answers it), and not together with
 * `If-Match`; `If-Match` compares entity tags with or without their quotes, as GetObject and
 * CopyObject's conditions do; on a missing key it is NoSuchKey.
 */
export function checkWriteConditions(c: { ifMatch?: string | undefined; ifNoneMatch?: string | undefined }, current: ObjectRow | undefined): void {
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

/** The ETag of an object: S3 writes record theirs; API uploads are addressed by their SHA-256. */
export const etagOf = (o: ObjectRow): string => o.info?.etag ?? `"${o.sha256}"`

export type ObjectInput = Omit<ObjectInfo, 'etag' | 'checksum' | 'parts'>

/** Objects are files with a key (s3.md): writes, reads, deletes and copies of one object. */
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

  /** PutObject: streams the body to the store, then replaces whatever the key held in one transaction. */
  async put(
    tenant: AuthenticatedTenant,
    bucket: string,
    key: string,
    body: BodySpec,
    input: ObjectInput,
    conditions: { ifMatch?: string | undefined; ifNoneMatch?: string | undefined } = {},
  ) {
    checkKey(key)
    const w = this.buckets.resolve(tenant, bucket)
    const existing = this.deps.objects.get(w.id, key)
    // Conditional writes (If-None-Match: * creates only; If-Match replaces only that version):
    // checked now, and again in the commit transaction, where a concurrent writer cannot slip in.
    const check = () => checkWriteConditions(conditions, this.deps.objects.get(w.id, key))
    check()
    const charge = this.charge(tenant, w, existing?.size ?? 0)
    try {
      const ingested = await ingest(this.deps.store, body, this.writeLimit(tenant, w, existing?.size ?? 0, this.deps.maxObjectBytes), charge.onChunk)
      const info: ObjectInfo = { ...input, etag: `"${ingested.digests.md5Hex}"`, ...(ingested.checksum ? { checksum: ingested.checksum } : {}) }
      const row = await this.commitStaged(tenant, w, key, ingested.staged, info, () => {
        check()
        // The bytes stop counting as in flight in the transaction that charges them as stored.
        charge.release()
      })
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
  ): Promise<ObjectRow> {
    try {
      return await this.deps.writes.write(BlobWrites.writerId(), staged, (settle) =>
        // Group commit: answered once the WAL holding it is on disk, the flush shared with the
        // uploads of both fronts settling at the same time.
        this.deps.commits.run(() => {
          beforeCommit?.()
          settle()
          const row = this.replace(tenant, w, key, staged.sha256, staged.size, info)
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
   * Inside a write transaction: the object at `key` becomes this content. The file it replaces is
   * soft-deleted first, so its bytes are released before the new size must fit the quotas.
   */
  replace(tenant: AuthenticatedTenant, w: Workspace, key: string, sha256: string, size: number, info: ObjectInfo): ObjectRow {
    const { objects, workspaces, clock } = this.deps
    if (!workspaces.getLive(tenant.id, w.id)) throw new S3Error('NoSuchBucket', 'The specified bucket does not exist', { BucketName: w.slug })
    const now = clock.now()
    const old = objects.liveIdByKey(w.id, key)
    if (old !== undefined) this.softDelete(tenant, old, now)
    try {
      this.deps.quotas.assertFits(tenant.id, w.id, size)
    } catch (err) {
      throw err instanceof AppError ? fromAppError(err) : err
    }
    const id = uuidv7(now)
    objects.insertCompleted({
      id,
      tenantId: tenant.id,
      workspaceId: w.id,
      key,
      originalName: nameOfKey(key, id),
      fileType: info.contentType,
      size,
      sha256,
      info,
      now,
    })
    // In the transaction of the write, like the API's commit: PutObject, CopyObject and
    // CompleteMultipartUpload all end here.
    this.deps.events.settled(id)
    return objects.get(w.id, key)!
  }

  private softDelete(tenant: AuthenticatedTenant, fileId: string, now: number): void {
    if (this.deps.files.softDelete(tenant.id, fileId, now)) this.deps.events.deleted(fileId)
  }

  head(tenant: AuthenticatedTenant, bucket: string, key: string): ObjectRow {
    checkKey(key)
    // One statement finds bucket and object together, where a GetObject ran two (#14); only a miss
    // asks which of the two is missing.
    const o = isBucketName(bucket) ? this.deps.objects.getInBucket(tenant.id, bucket, key) : undefined
    if (o) return o
    this.buckets.resolve(tenant, bucket)
    throw new S3Error('NoSuchKey', 'The specified key does not exist.', { Key: key })
  }

  /**
   * GetObject/HeadObject with partNumber: the object and the byte range of that part. An object
   * not written by multipart is one part (partNumber=1 is all of it). A part number the object
   * does not have is `InvalidPart` (400), as ceph/s3-tests expect of AWS and RGW.
   */
  headPart(tenant: AuthenticatedTenant, bucket: string, key: string, partNumber: number): { object: ObjectRow; part: ObjectPart } {
    const object = this.head(tenant, bucket, key)
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
    q: { attributes: string[]; maxParts: number; partNumberMarker: number },
  ): { lastModified: number; body: XmlNode } {
    if (q.attributes.length === 0) {
      throw new S3Error('InvalidArgument', 'The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty')
    }
    if (q.attributes.some((a) => !OBJECT_ATTRIBUTES.has(a))) throw new S3Error('InvalidArgument', 'Invalid attribute name specified.')
    const o = this.head(tenant, bucket, key)
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
    return { lastModified: o.completedAt, body }
  }

  /** DeleteObject: idempotent (a missing key is not an error), as S3's. */
  delete(tenant: AuthenticatedTenant, bucket: string, key: string): void {
    checkKey(key)
    const { db, objects, clock, reserve } = this.deps
    reserve.freeing(() =>
      db
        .transaction(() => {
          const w = this.buckets.resolve(tenant, bucket)
          const id = objects.liveIdByKey(w.id, key)
          if (id !== undefined) this.softDelete(tenant, id, clock.now())
        })
        .immediate(),
    )
  }

  /** DeleteObjects: one transaction for the batch; per-key errors are reported, not thrown. */
  deleteMany(tenant: AuthenticatedTenant, bucket: string, keys: string[]): { deleted: string[]; errors: { key: string; code: string; message: string }[] } {
    const { db, objects, clock, reserve } = this.deps
    const out = { deleted: [] as string[], errors: [] as { key: string; code: string; message: string }[] }
    const run = db.transaction(() => {
      // A run the disk reserve repeats (a full disk) reports what its last run did.
      out.deleted.length = out.errors.length = 0
      const w = this.buckets.resolve(tenant, bucket)
      const now = clock.now()
      for (const key of keys) {
        try {
          checkKey(key)
        } catch (err) {
          out.errors.push({ key, code: (err as S3Error).code, message: (err as S3Error).message })
          continue
        }
        const id = objects.liveIdByKey(w.id, key)
        if (id !== undefined) this.softDelete(tenant, id, now)
        out.deleted.push(key)
      }
    })
    reserve.freeing(() => run.immediate())
    return out
  }

  /**
   * PutObjectTagging / DeleteObjectTagging: the live object's tags become `tags` (none: removed),
   * its info rewritten in one transaction so that a concurrent write replaces the object whole.
   * An object uploaded through the API (no S3 info) gets the info its GET already answers with.
   */
  setTags(tenant: AuthenticatedTenant, bucket: string, key: string, tags: Record<string, string>): ObjectRow {
    return this.deps.db
      .transaction(() => {
        const o = this.head(tenant, bucket, key)
        const { tags: _old, ...rest } = o.info ?? { etag: etagOf(o), contentType: o.fileType, meta: {} }
        const info: ObjectInfo = Object.keys(tags).length > 0 ? { ...rest, tags } : rest
        this.deps.objects.setInfo(o.fileId, info)
        return { ...o, info }
      })
      .immediate()
  }

  /** CopyObject within the tenant: the content is shared (same blob), not copied. */
  copy(
    tenant: AuthenticatedTenant,
    from: { bucket: string; key: string },
    to: { bucket: string; key: string },
    info: ObjectInfo | 'copy',
    /** The copy's tags: the source's (`x-amz-tagging-directive: COPY`, the default) or these (REPLACE). */
    tags: Record<string, string> | 'copy',
    check: (source: ObjectRow) => void,
    /** The destination's If-Match / If-None-Match, as PutObject's (AWS's conditional CopyObject). */
    conditions: { ifMatch?: string | undefined; ifNoneMatch?: string | undefined } = {},
  ): ObjectRow {
    checkKey(to.key)
    const { db } = this.deps
    return db
      .transaction(() => {
        const source = this.head(tenant, from.bucket, from.key)
        check(source)
        const target = this.buckets.resolve(tenant, to.bucket)
        checkWriteConditions(conditions, this.deps.objects.get(target.id, to.key))
        const sourceInfo: ObjectInfo = source.info ?? { etag: etagOf(source), contentType: source.fileType, meta: {} }
        const { tags: sourceTags, ...kept } = sourceInfo
        const { tags: _requestTags, ...given }: ObjectInfo = info === 'copy' ? kept : info
        // Tags follow their own directive, whatever the metadata's (AWS CopyObject).
        const copyTags = tags === 'copy' ? sourceTags : tags
        const finalInfo: ObjectInfo = {
          ...(info === 'copy' ? given : { ...given, etag: sourceInfo.etag, ...(sourceInfo.parts ? { parts: sourceInfo.parts } : {}) }),
          ...(copyTags && Object.keys(copyTags).length > 0 ? { tags: copyTags } : {}),
        }
        const row = this.replace(tenant, target, to.key, source.sha256, source.size, finalInfo)
        // The copy keeps the source's parts count, so it keeps the layout that partNumber reads (#24).
        if (finalInfo.parts !== undefined) this.deps.objects.copyParts(source.fileId, row.fileId)
        return row
      })
      .immediate()
  }
}
