import { notFound, validationError } from '../errors'
import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { FileRecord, FilesRepo } from '../db/repos/files'
import type { ObjectsRepo } from '../db/repos/objects'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { DeletedKey, DeletedKeyCursor, VersionRow, VersionsRepo } from '../db/repos/versions'
import type { WorkspacesRepo } from '../db/repos/workspaces'
import type { Clock } from '../lib/clock'
import type { FileVersion } from '../contract/file-versions'
import { isUuid, uuidv7 } from '../lib/ids'
import type { FileEvents } from '../webhooks/events'
import type { ObjectLock } from './object-lock'
import type { Quotas } from './quotas'
import { NULL_VERSION, type ObjectVersions } from './versions'
import type { WorkspacesService } from './workspaces'

export interface PageQuery {
  limit: number
  cursor?: string | undefined
}

/** Keyset cursor of a key's versions: base64url of the last version's sequence number. */
const encodeSeq = (seq: number): string => Buffer.from(String(seq)).toString('base64url')

function decodeSeq(raw: string): number {
  const text = /^[A-Za-z0-9_-]{1,40}$/.test(raw) ? Buffer.from(raw, 'base64url').toString('utf8') : ''
  if (!/^[1-9]\d{0,14}$/.test(text)) throw validationError('/cursor', 'is not a cursor returned by this API')
  return Number(text)
}

/** Keyset cursor of deleted keys: base64url of `[deletedAt, workspaceId, key]`. */
const encodeDeleted = (k: DeletedKey): string => Buffer.from(JSON.stringify([k.deletedAt, k.workspaceId, k.key])).toString('base64url')

function decodeDeleted(raw: string): DeletedKeyCursor {
  let parsed: unknown
  try {
    parsed = /^[A-Za-z0-9_-]{1,3000}$/.test(raw) ? JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) : undefined
  } catch {
    parsed = undefined
  }
  if (Array.isArray(parsed) && parsed.length === 3) {
    const [deletedAt, workspaceId, key] = parsed as unknown[]
    if (Number.isSafeInteger(deletedAt) && typeof workspaceId === 'string' && isUuid(workspaceId) && typeof key === 'string') {
      return { deletedAt: deletedAt as number, workspaceId, key }
    }
  }
  throw validationError('/cursor', 'is not a cursor returned by this API')
}

/**
 * A file's versions for the Storage Brain API and the console (#25): the versions of the object key
 * the file is a version of, newest first; restoring one copies it over the key's current version
 * (a new current version, as AWS documents a restore by CopyObject; every version stays); and the
 * keys deleted into a delete marker that still have versions, which the API's file listings, made
 * of current versions only, no longer show.
 *
 * A file is addressed by the id of any of its key's versions: the current one (a live file) or a
 * noncurrent one (retained while its version exists), so a deleted key stays reachable through
 * its versions' files, and the id a client held before a restore still reaches the key.
 */
export class FileVersions {
  constructor(
    private readonly deps: {
      db: DB | Engine
      clock: Clock
      files: FilesRepo
      objects: ObjectsRepo
      versions: VersionsRepo
      objectVersions: ObjectVersions
      workspaces: WorkspacesRepo
      workspacesService: WorkspacesService
      quotas: Quotas
      objectLock: ObjectLock
      events: FileEvents
    },
  ) {}

  /**
   * One page of the file's versions, newest first, with the total. A file that is no object
   * version (no workspace, or uploaded before its workspace had keys) is its own single version,
   * `null` as S3 names the only version of an unversioned object; a pending or failed upload has none.
   */
  list(tenant: AuthenticatedTenant, fileId: string, q: PageQuery): { versions: FileVersion[]; nextCursor: string | null; total: number } {
    const beforeSeq = q.cursor === undefined ? undefined : decodeSeq(q.cursor)
    return engineOf(this.deps.db).read(() => {
      const { file, version } = this.resolve(tenant, fileId)
      if (!version) {
        const single = file.status === 'completed' && beforeSeq === undefined ? [soleVersion(file)] : []
        return { versions: single, nextCursor: null, total: file.status === 'completed' ? 1 : 0 }
      }
      const { versions } = this.deps
      const rows = versions.ofKey(version.workspaceId, version.key, beforeSeq, q.limit + 1)
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return {
        versions: page.map((v) => ({
          versionId: v.versionId,
          fileId: v.fileId,
          isLatest: v.noncurrentAt === null,
          isDeleteMarker: v.fileId === null,
          size: v.size,
          // The plaintext's where it is recorded (an upload sealed under a KMS key, #27), as downloads' ETag.
          sha256: v.info?.sse?.sha256 ?? v.sha256,
          fileType: v.fileType,
          createdAt: v.createdAt,
        })),
        nextCursor: rows.length > q.limit && last ? encodeSeq(last.seq) : null,
        total: versions.countOfKey(version.workspaceId, version.key),
      }
    })
  }

  /**
   * Copies version `versionId` of the file's key over the key's current version, in one
   * transaction: the key's current version stops being current exactly as an S3 write makes it
   * (services/versions.ts retire: noncurrent in an enabled bucket, the null version replaced
   * otherwise), and a new file sharing the version's content becomes current, counted against the
   * quotas like any write, with the bucket's default object lock and its workspace's
   * `file.uploaded` (the key's previous current file gets its `file.deleted`, as an overwrite).
   * Restoring the version that is already current changes nothing (`created: false`).
   */
  restore(tenant: AuthenticatedTenant, fileId: string, versionId: string): { file: FileRecord; created: boolean } {
    const { db, clock, versions, objectVersions, objects, files, quotas, objectLock, events, workspaces } = this.deps
    return engineOf(db).transaction(() => {
      const { file, version } = this.resolve(tenant, fileId)
      if (!version) {
        // Its only version: current already (a pending or failed upload has none).
        if (versionId !== NULL_VERSION || file.status !== 'completed') throw notFound.version()
        return { file, created: false }
      }
      const { workspaceId, key } = version
      const source = versions.byId(workspaceId, key, versionId)
      if (!source) throw notFound.version()
      if (source.fileId === null) throw validationError('/versionId', 'is a delete marker: it has no content to restore')
      if (source.noncurrentAt === null) return { file: files.get(source.fileId)!, created: false }
      if (!workspaces.getLive(tenant.id, workspaceId)) throw notFound.file()
      const from = objects.byFile(source.fileId)
      if (!from) throw notFound.version()
      const now = clock.now()
      objectVersions.retire(workspaceId, key, now)
      // A pending API upload holding this very key is no version yet: it ends, as an S3 write ends it.
      const pending = objects.liveIdByKey(workspaceId, key)
      if (pending !== undefined && files.softDelete(tenant.id, pending, now)) events.deleted(pending)
      // After the current version was retired: a null version it replaced no longer counts.
      quotas.assertFits(tenant.id, workspaceId, from.size)
      const id = uuidv7(now)
      // As CopyObject with its default directives: metadata and tags are the version's, the ACL
      // is not copied (a copy is private unless asked otherwise), and no lock travels with it.
      const { acl: _acl, lock: _lock, ...info } = from.info ?? { etag: `"${from.sha256}"`, contentType: from.fileType, meta: {} }
      if (!objects.insertCopy(id, source.fileId, from.info === null ? null : info, now)) throw notFound.version()
      if (info.parts !== undefined) objects.copyParts(source.fileId, id)
      const restored = objectVersions.record(tenant.id, workspaceId, key, id, from.size, now)
      objectLock.applyToNew(workspaceId, key, restored, objectLock.retentionFor(workspaceId, undefined, now), undefined)
      events.settled(id)
      return { file: files.get(id)!, created: true }
    })
  }

  /**
   * Keys whose current version is a delete marker and that still have a version with content:
   * newest deletion first, with their newest content version (whose file id reaches the key's
   * versions). `workspaceId` (query or X-Workspace-Id) narrows to one workspace.
   */
  deleted(
    tenant: AuthenticatedTenant,
    q: PageQuery & { workspaceId?: string | undefined },
    headerWorkspaceId: string | undefined,
  ): { files: DeletedKey[]; nextCursor: string | null; total: number } {
    const after = q.cursor === undefined ? undefined : decodeDeleted(q.cursor)
    const workspaceId = this.deps.workspacesService.scope(tenant.id, headerWorkspaceId, q.workspaceId)
    const { versions } = this.deps
    return engineOf(this.deps.db).read(() => {
      const rows = versions.deletedKeys(tenant.id, workspaceId, after, q.limit + 1)
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return { files: page, nextCursor: rows.length > q.limit && last ? encodeDeleted(last) : null, total: versions.countDeletedKeys(tenant.id, workspaceId) }
    })
  }

  /**
   * The tenant's file `fileId` and the version it is: a live file, or the retained file of a version
   * of a live workspace's key. Anything else (another tenant's, a malformed id, a deleted file that
   * is no version) is FILE_NOT_FOUND.
   */
  private resolve(tenant: AuthenticatedTenant, fileId: string): { file: FileRecord; version: VersionRow | undefined } {
    const { files, versions, workspaces } = this.deps
    const file = isUuid(fileId) ? files.get(fileId.toLowerCase()) : undefined
    if (!file || file.tenantId !== tenant.id) throw notFound.file()
    const version = versions.byFile(file.id)
    if (version) {
      if (version.tenantId !== tenant.id || !workspaces.getLive(tenant.id, version.workspaceId)) throw notFound.file()
      return { file, version }
    }
    if (file.deletedAt !== null) throw notFound.file()
    return { file, version: undefined }
  }
}

/** A file that is no object version, as the one version it is. */
function soleVersion(f: FileRecord): FileVersion {
  return {
    versionId: NULL_VERSION,
    fileId: f.id,
    isLatest: true,
    isDeleteMarker: false,
    size: f.sizeBytes,
    sha256: f.sha256,
    fileType: f.fileType,
    createdAt: f.completedAt ?? f.createdAt,
  }
}
