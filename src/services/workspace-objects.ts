import { AppError } from '../errors'
import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { ObjectRow, ObjectsRepo } from '../db/repos/objects'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { FilesRepo } from '../db/repos/files'
import type { ObjectDetailsRecord, ObjectSummary } from '../contract/workspace-objects'
import { listPage } from '../s3/listing'
import type { WorkspacesService } from './workspaces'
import type { ObjectVersions } from './versions'
import type { ObjectLock } from './object-lock'
import { isPublicAcl, type PublicAccessService } from './public-access'
import { tagsOf } from './tagging'

/** The ETag the S3 front answers (s3/objects.ts etagOf): S3 writes record theirs, API uploads' is their SHA-256. */
const etagOf = (o: ObjectRow): string => o.info?.etag ?? `"${o.sha256}"`

const summary = (o: ObjectRow): ObjectSummary => ({
  key: o.key,
  fileId: o.fileId,
  size: o.size,
  contentType: o.info?.contentType ?? o.fileType,
  etag: etagOf(o),
  completedAt: o.completedAt,
})

/**
 * A workspace as the bucket the S3 front shows (#31, the console's bucket browser): its objects by
 * prefix and delimiter through the very listing ListObjectsV2 runs (s3/listing.ts over
 * ObjectsRepo.page, a keyset range scan of the (workspace_id, object_key) index), one object's
 * details, and the delete that refuses a bucket that is not empty, as DeleteBucket does.
 */
export class WorkspaceObjects {
  constructor(
    private readonly deps: {
      db: DB | Engine
      objects: ObjectsRepo
      files: FilesRepo
      workspaces: WorkspacesService
      versions: ObjectVersions
      objectLock: ObjectLock
      /** Absent: no bucket has ACLs disabled. */
      publicAccess?: Pick<PublicAccessService, 'aclsDisabled'>
    },
  ) {}

  /** One page: common prefixes and objects in key order; `nextAfter` resumes past its last entry. */
  list(
    tenant: AuthenticatedTenant,
    workspaceId: string,
    q: { prefix?: string | undefined; delimiter?: string | undefined; after?: string | undefined; limit?: number | undefined },
  ): { prefixes: string[]; objects: ObjectSummary[]; nextAfter: string | null } {
    const w = this.deps.workspaces.get(tenant, workspaceId)
    const page = listPage(this.deps.objects, w.id, {
      prefix: q.prefix ?? '',
      delimiter: q.delimiter ?? '',
      after: q.after || undefined,
      maxKeys: q.limit ?? 100,
    })
    const prefixes: string[] = []
    const objects: ObjectSummary[] = []
    for (const e of page.entries) {
      if (e.kind === 'prefix') prefixes.push(e.prefix)
      else objects.push(summary(e.row))
    }
    const last = page.last
    const nextAfter = !page.truncated || !last ? null : last.kind === 'prefix' ? last.prefix : last.row.key
    return { prefixes, objects, nextAfter }
  }

  /** The current object at `key`: what S3's HeadObject, GetObjectTagging, GetObjectRetention/LegalHold and GetObjectAcl tell. */
  details(tenant: AuthenticatedTenant, workspaceId: string, key: string): ObjectDetailsRecord {
    const w = this.deps.workspaces.get(tenant, workspaceId)
    const o = this.deps.objects.get(w.id, key)
    if (!o) throw new AppError('FILE_NOT_FOUND', 'No object with this key in the workspace', { key })
    const versionId = o.versionId ?? null
    const lock = versionId === null ? undefined : this.deps.objectLock.get(w.id, key, versionId)
    // With ACLs disabled (BucketOwnerEnforced) an object's ACL grants nothing and S3 shows it private.
    const acl = this.deps.publicAccess?.aclsDisabled(w.id) ? 'private' : (o.info?.acl ?? 'private')
    // A sealed object's blob is hashed sealed: its plaintext hash is the one recorded beside its key, if any (#27).
    const sha256 = o.info?.sse ? (o.info.sse.sha256 ?? null) : o.sha256
    return {
      ...summary(o),
      sha256,
      metadata: o.info?.meta ?? {},
      tags: tagsOf(o.info),
      versionId: o.versioning ? versionId : null,
      versioning: o.versioning ?? null,
      lock: { mode: lock?.mode ?? null, until: lock?.until ?? null, legalHold: lock?.legalHold ?? false },
      acl,
      public: isPublicAcl(acl),
    }
  }

  /** Live files of the workspace (every status, as the files list's total counts them), from the maintained counts. */
  fileCount(tenant: AuthenticatedTenant, workspaceId: string): number {
    return this.deps.files.count(tenant.id, { workspaceId })
  }

  /**
   * Deletes the workspace only when it is empty: no live file (an upload in progress counts) and,
   * in a versioned one, no version or delete marker either, as S3's DeleteBucket (BucketNotEmpty).
   * Checked and deleted in one transaction, so nothing uploaded in between is lost with it.
   */
  deleteIfEmpty(tenant: AuthenticatedTenant, workspaceId: string): void {
    const { db, objects, versions, workspaces } = this.deps
    // Rows only: a run PostgreSQL repeats (40001/40P01) checks again and deletes once.
    engineOf(db).transaction(() => {
      const w = workspaces.get(tenant, workspaceId)
      const files = this.fileCount(tenant, w.id)
      if (files > 0 || objects.hasLiveFiles(w.id)) {
        throw new AppError('CONFLICT', `The workspace is not empty: it holds ${files} file${files === 1 ? '' : 's'}. Delete them first.`, {
          field: 'workspace',
          reason: 'NOT_EMPTY',
          fileCount: files,
        })
      }
      if (versions.hasAny(w.id)) {
        throw new AppError('CONFLICT', 'The workspace is not empty: it keeps older versions or delete markers of deleted files. Delete those first.', {
          field: 'workspace',
          reason: 'NOT_EMPTY',
          fileCount: 0,
        })
      }
      workspaces.delete(tenant, w.id)
    })
  }
}
