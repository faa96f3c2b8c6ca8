import type { Leases } from '../services/leases'
import type { ObjectLock } from '../services/object-lock'
import type { DB } from '../db/database'
import { constraintViolated, engineOf, type Engine } from '../db/engine'
import type { Commits } from '../db/group-commit'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { Workspace, WorkspacesRepo } from '../db/repos/workspaces'
import type { ObjectsRepo } from '../db/repos/objects'
import type { MultipartRepo } from '../db/repos/multipart'
import type { BlobsRepo } from '../db/repos/blobs'
import type { FilesRepo } from '../db/repos/files'
import type { Quotas } from '../services/quotas'
import type { BlobStore } from '../blobs/blob-store'
import type { BlobWrites } from '../services/blob-writes'
import type { Clock } from '../lib/clock'
import type { FileEvents } from '../webhooks/events'
import { uuidv7 } from '../lib/ids'
import { S3Error } from './errors'
import type { DiskReserve } from '../lib/disk-reserve'
import type { ObjectVersions } from '../services/versions'
import type { BucketCache, BucketWorkspace } from '../services/bucket-cache'

/** Everything the S3 front's operations work with: the same repositories and store as the API. */
export interface S3Deps {
  /**
   * The database. Every transaction of the S3 front runs on its engine (#30): on PostgreSQL a run
   * that meets a deadlock or a serialization failure runs again, so each one does nothing outside
   * the database that a second run would repeat (a store's deletions wait for `writes.drain`
   * after the commit; what the disk store does inside one is idempotent, BlobWrites).
   */
  db: DB | Engine
  /** The hot commits (PutObject) share WAL flushes with the JSON API's uploads. */
  commits: Commits
  clock: Clock
  store: BlobStore
  /** New content in (under a lease on a remote store) and released content out, as the API's uploads. */
  writes: BlobWrites
  workspaces: WorkspacesRepo
  /** Buckets by name, as every request resolves its own (#29): kept across requests. */
  buckets: BucketCache
  objects: ObjectsRepo
  multipart: MultipartRepo
  blobs: BlobsRepo
  files: FilesRepo
  /** Writes the workspace webhook's file.uploaded / file.deleted in the transaction of the change. */
  events: FileEvents
  quotas: Quotas
  /** Object versions (#25): what a write or delete of a key does to the versions it holds. */
  versions: ObjectVersions
  /** Object lock (#25): versions' retention and legal hold, buckets' lock configuration. */
  objectLock: ObjectLock
  region: string
  maxObjectBytes: number
  multipartTtlMs: number
  /** Deletes and aborts free space: on a full disk their transaction may use the disk reserve. */
  reserve: Pick<DiskReserve, 'freeing'>
  /** CompleteMultipartUpload claims its upload with one, so that two workers complete it once (#29). */
  leases: Pick<Leases, 'claim'>
}

/** S3's bucket naming rules (general purpose buckets): 3–63 of a-z 0-9 . -, alphanumeric at both ends. */
export function isBucketName(name: string): boolean {
  return (
    /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name) &&
    !name.includes('..') &&
    !/^\d{1,3}(\.\d{1,3}){3}$/.test(name) &&
    !name.startsWith('xn--') &&
    !name.endsWith('-s3alias')
  )
}

const RESERVED_PREFIXES = ['xn--', 'sthree-', 'amzn-s3-demo-']
const RESERVED_SUFFIXES = ['-s3alias', '--ol-s3', '.mrap', '--x-s3', '--table-s3']

/**
 * What CreateBucket accepts: AWS's current rules for a new general purpose bucket ("General purpose
 * bucket naming rules"), stricter than isBucketName, which still addresses workspaces made before
 * (#24). Each dot-separated label starts and ends with a letter or digit (`foo.-bar`, `foo-.bar`
 * are refused, as AWS and RGW do); prefixes and suffixes AWS reserves for its own names are refused.
 */
export function isNewBucketName(name: string): boolean {
  return (
    isBucketName(name) &&
    name.split('.').every((label) => /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/.test(label)) &&
    !RESERVED_PREFIXES.some((p) => name.startsWith(p)) &&
    !RESERVED_SUFFIXES.some((s) => name.endsWith(s))
  )
}

/** The shape of an AWS region name (`eu-west-1`, `us-gov-east-1`, `cn-northwest-1`), and the legacy `EU`. */
const REGION_NAME = /^(?:[a-z]{2}(?:-[a-z]+)+-\d{1,2}|EU)$/

/**
 * CreateBucket's LocationConstraint against the one region this endpoint serves, as an AWS
 * regional endpoint answers it (#24): absent or empty is this region (AWS's us-east-1 rule; a
 * regional AWS endpoint would refuse it, and clients that know no region never send one);
 * `us-east-1` given explicitly is never valid (`InvalidLocationConstraint`: AWS wants it left out);
 * another region's name is `IllegalLocationConstraintException` (this endpoint cannot create a
 * bucket elsewhere); anything else is `InvalidLocationConstraint`. `EU` is eu-west-1's old name.
 */
export function checkLocationConstraint(location: string | undefined, region: string): void {
  if (location === undefined || location === '') return
  if (location !== 'us-east-1' && (location === region || (location === 'EU' && region === 'eu-west-1'))) return
  if (location !== 'us-east-1' && REGION_NAME.test(location)) {
    throw new S3Error(
      'IllegalLocationConstraintException',
      `The ${location} location constraint is incompatible for the region specific endpoint this request was sent to.`,
    )
  }
  throw new S3Error('InvalidLocationConstraint', 'The specified location-constraint is not valid', { LocationConstraint: location })
}

/**
 * Buckets are the tenant's workspaces: the bucket name is the workspace slug, so two
 * tenants may each own `photos`.
 */
export class S3Buckets {
  constructor(private readonly deps: S3Deps) {}

  /** Workspaces whose slug is a valid bucket name, by name. */
  list(tenant: AuthenticatedTenant): Workspace[] {
    return this.deps.workspaces
      .list(tenant.id)
      .filter((w) => isBucketName(w.slug))
      .sort((a, b) => (a.slug < b.slug ? -1 : 1))
  }

  /** The tenant's live bucket of that name, if any. */
  find(tenantId: string, name: string): BucketWorkspace | undefined {
    return isBucketName(name) ? this.deps.buckets.workspace(tenantId, name) : undefined
  }

  /** Up to two live buckets of that name, of any tenant (anonymous plain names, #26). */
  findAnyTenant(name: string): Workspace[] {
    return isBucketName(name) ? this.deps.workspaces.bySlugAnyTenant(name) : []
  }

  resolve(tenant: AuthenticatedTenant, name: string): BucketWorkspace {
    const w = isBucketName(name) ? this.deps.buckets.workspace(tenant.id, name) : undefined
    if (!w) throw new S3Error('NoSuchBucket', 'The specified bucket does not exist', { BucketName: name })
    return w
  }

  /**
   * A bucket the tenant already owns is, as on AWS, `200` and left as it is in us-east-1 (its
   * legacy rule, which ceph/s3-tests and RGW follow) and `409 BucketAlreadyOwnedByYou` in any other
   * region (#24).
   */
  create(tenant: AuthenticatedTenant, name: string): Workspace {
    if (!isNewBucketName(name)) throw new S3Error('InvalidBucketName', 'The specified bucket is not valid.', { BucketName: name })
    const { db, clock, workspaces, region } = this.deps
    const now = clock.now()
    const id = uuidv7(now)
    const engine = engineOf(db)
    const existing = (): Workspace | undefined => {
      const owned = workspaces.getBySlug(tenant.id, name)
      if (owned && region === 'us-east-1') return owned
      if (owned) {
        throw new S3Error('BucketAlreadyOwnedByYou', 'Your previous request to create the named bucket succeeded and you already own it.', {
          BucketName: name,
        })
      }
      return undefined
    }
    let found: Workspace | undefined
    try {
      found = engine.transaction(() => {
        const owned = existing()
        if (!owned) workspaces.insert({ id, tenantId: tenant.id, name, slug: name, quotaBytes: null, metadata: null, webhookUrl: null, now })
        return owned
      })
    } catch (err) {
      // Another node (PostgreSQL, #30) created the same name between the check and the insert: the
      // unique index (tenant, slug) refused ours, and the answer is the one a later request gets.
      if (constraintViolated(err) !== 'unique') throw err
      found = engine.read(existing)
      if (!found) throw err
    }
    return found ?? workspaces.getLive(tenant.id, id)!
  }

  /** Deletes an empty bucket (its workspace), aborting multipart uploads still in progress. */
  async delete(tenant: AuthenticatedTenant, name: string): Promise<void> {
    const { db, clock, workspaces, objects, multipart } = this.deps
    // Rows only (a remote store's content is tombstoned here and deleted by the drain after it):
    // safe to run again after a PostgreSQL retry.
    engineOf(db).transaction(() => {
      const w = this.resolve(tenant, name)
      // A versioned bucket is empty only without versions and delete markers too, as AWS.
      if (objects.hasLiveFiles(w.id) || this.deps.versions.hasAny(w.id))
        throw new S3Error('BucketNotEmpty', 'The bucket you tried to delete is not empty', { BucketName: name })
      for (const uploadId of multipart.idsInWorkspace(w.id)) this.dropBlobs(multipart.delete(uploadId))
      workspaces.softDelete(tenant.id, w.id, clock.now())
    })
    await this.deps.writes.drainQuietly()
  }

  /**
   * Inside a write transaction: releases blobs nothing references any more (released parts):
   * removed on disk, tombstoned on a remote store, whose objects `writes.drain` deletes after the commit.
   */
  dropBlobs(shas: string[]): void {
    for (const sha of new Set(shas)) this.deps.writes.releaseInTx(sha)
  }
}
