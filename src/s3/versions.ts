import type { ObjectRow } from '../db/repos/objects'
import type { VersionCursor, VersionedObject } from '../db/repos/versions'
import type { VersioningStatus } from '../db/repos/versions'
import type { ObjectVersions } from '../services/versions'
import { S3Error } from './errors'
import { rollupPage, type KeysetSource, type ListResult } from './listing'
import { checkVersionId, etagOf } from './objects'
import { childOf, malformed, parseXml, textOf, type XmlNode } from './xml'

/**
 * PutBucketVersioning's body: `<VersioningConfiguration><Status>Enabled|Suspended</Status>`.
 * MFA delete is not built: asking for it (MfaDelete Enabled, or an x-amz-mfa header) is 501, never
 * silently ignored; `MfaDelete: Disabled` is what every bucket has and is accepted.
 */
export function parseVersioningConfiguration(body: Buffer, mfaHeader: string | undefined): 'Enabled' | 'Suspended' {
  const doc = childOf(parseXml(body), 'VersioningConfiguration')
  if (!doc) throw malformed()
  const mfa = textOf(doc, 'MfaDelete')
  if (mfaHeader !== undefined || mfa === 'Enabled') {
    throw new S3Error('NotImplemented', 'MFA delete is not implemented', { Header: mfaHeader !== undefined ? 'x-amz-mfa' : 'MfaDelete' })
  }
  if (mfa !== undefined && mfa !== 'Disabled') throw malformed()
  const status = textOf(doc, 'Status')
  if (status !== 'Enabled' && status !== 'Suspended') throw malformed()
  return status
}

/** GetBucketVersioning's body: no Status for a bucket whose versioning was never enabled, as AWS. */
export function versioningDocument(status: VersioningStatus): XmlNode {
  return status === null ? {} : { Status: status }
}

/**
 * The `x-amz-version-id` an object response carries: in a bucket whose versioning was ever
 * configured (AWS sends none for an unversioned bucket's objects), the object's versionId. The null
 * version is named `null` by reads (GetObject, HeadObject); a write that made one (PutObject,
 * CopyObject, CompleteMultipartUpload in a suspended bucket) answers no version id, as AWS's
 * PutObject "versioning suspended" example and RGW do (ceph/s3-tests'
 * test_versioning_bucket_atomic_upload_return_version_id).
 */
export function versionIdHeader(o: Pick<ObjectRow, 'versionId' | 'versioning'>, written = false): string | undefined {
  if (o.versionId === undefined) return undefined
  if (o.versionId === 'null' && (written || o.versioning === null || o.versioning === undefined)) return undefined
  return o.versionId
}

export interface ListVersionsQuery {
  prefix: string
  delimiter: string
  keyMarker: string | undefined
  versionIdMarker: string | undefined
  maxKeys: number
}

/**
 * One page of ListObjectVersions: keys in UTF-8 binary order, each key's versions newest first,
 * common prefixes rolled up as ListObjects does (listing.ts rollupPage), keyset all the way. A
 * key-marker alone resumes after every version of that key; with a version-id-marker, after that
 * version of it. A version-id-marker without a key-marker is AWS's 400.
 */
export function listVersionsPage(versions: ObjectVersions, workspaceId: string, q: ListVersionsQuery): ListResult<VersionedObject> {
  if (q.versionIdMarker !== undefined && q.keyMarker === undefined) {
    throw new S3Error('InvalidArgument', 'A version-id marker cannot be specified without a key marker.', {
      ArgumentName: 'version-id-marker',
      ArgumentValue: q.versionIdMarker,
    })
  }
  let after: { key: string; cursor: VersionCursor } | undefined
  if (q.keyMarker !== undefined) {
    const cursor: VersionCursor = { key: q.keyMarker }
    if (q.versionIdMarker !== undefined) {
      checkVersionId(q.versionIdMarker)
      const marked = versions.byId(workspaceId, q.keyMarker, q.versionIdMarker)
      // A version deleted since the previous page: its key's versions newer than what remains are
      // unknown, so the page resumes after the key (RGW does the same).
      if (marked) cursor.seq = marked.seq
    }
    after = { key: q.keyMarker, cursor }
  }
  const source: KeysetSource<VersionedObject, VersionCursor> = {
    fetch: (range, limit) => versions.page(workspaceId, range, limit),
    key: (row) => row.key,
    cursor: (row) => ({ key: row.key, seq: row.seq }),
  }
  return rollupPage(source, { prefix: q.prefix, delimiter: q.delimiter, after, maxKeys: q.maxKeys })
}

/** The ListVersionsResult body of a page (keys encoded by `enc` for encoding-type=url). */
export function listVersionsDocument(
  bucket: string,
  q: ListVersionsQuery & { encoding: string | undefined },
  page: ListResult<VersionedObject>,
  owner: XmlNode,
  enc: (s: string) => string,
): XmlNode {
  const iso = (ms: number) => new Date(ms).toISOString()
  const versions: XmlNode[] = []
  const markers: XmlNode[] = []
  for (const e of page.entries) {
    if (e.kind !== 'object') continue
    const v = e.row
    const common = { Key: enc(v.key), VersionId: v.versionId, IsLatest: v.noncurrentAt === null, LastModified: iso(v.createdAt) }
    if (v.fileId === null) markers.push({ Owner: owner, ...common })
    else versions.push({ ...common, ETag: etagOfVersion(v), Size: v.size, Owner: owner, StorageClass: 'STANDARD' })
  }
  const last = page.last
  return {
    Name: bucket,
    Prefix: enc(q.prefix),
    KeyMarker: enc(q.keyMarker ?? ''),
    VersionIdMarker: q.versionIdMarker ?? '',
    ...(page.truncated && last
      ? last.kind === 'object'
        ? { NextKeyMarker: enc(last.row.key), NextVersionIdMarker: last.row.versionId }
        : // A page ending on a common prefix resumes past all of it.
          { NextKeyMarker: enc(last.prefix) }
      : {}),
    MaxKeys: q.maxKeys,
    ...(q.delimiter !== '' ? { Delimiter: enc(q.delimiter) } : {}),
    ...(q.encoding ? { EncodingType: q.encoding } : {}),
    IsTruncated: page.truncated,
    Version: versions,
    DeleteMarker: markers,
    CommonPrefixes: page.entries.flatMap((e) => (e.kind === 'prefix' ? [{ Prefix: enc(e.prefix) }] : [])),
  }
}

/** A listed version's ETag: as etagOf for the object it is (API uploads are addressed by their SHA-256). */
function etagOfVersion(v: VersionedObject): string {
  return etagOf({ info: v.info, sha256: v.sha256 ?? '' } as ObjectRow)
}
