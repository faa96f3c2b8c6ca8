import { AppError, notFound, validationError } from '../errors'
import type { FileRecord, FilesRepo, Cursor } from '../db/repos/files'
import type { DB } from '../db/database'
import { engineOf, type Engine } from '../db/engine'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { Clock } from '../lib/clock'
import { isUuid } from '../lib/ids'
import type { FileEvents } from '../webhooks/events'
import type { WorkspacesService } from './workspaces'
import type { Grant, SignedUrls } from './signed-urls'
import type { TokenPurpose } from '../lib/tokens'
import type { DiskReserve } from '../lib/disk-reserve'
import type { ObjectVersions } from './versions'

export interface ListQuery {
  limit: number
  cursor?: string
  context?: string
  fileType?: string
  workspaceId?: string
}

/** Opaque keyset cursor: base64url of `<createdAt ms>.<id>`. */
export const encodeCursor = (c: Cursor): string => Buffer.from(`${c.createdAt}.${c.id}`).toString('base64url')

export function decodeCursor(raw: string): Cursor {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(raw) ? Buffer.from(raw, 'base64url').toString('utf8') : ''
  const m = /^(\d{1,15})\.([0-9a-f-]{36})$/.exec(text)
  if (!m || !isUuid(m[2])) throw validationError('/cursor', 'is not a cursor returned by this API')
  return { createdAt: Number(m[1]), id: m[2] }
}

/** Reading, listing, deleting and sharing files. */
export class FilesService {
  private readonly engine: Engine

  constructor(
    db: DB | Engine,
    private readonly files: FilesRepo,
    private readonly workspaces: WorkspacesService,
    private readonly urls: SignedUrls,
    private readonly clock: Clock,
    private readonly events: FileEvents,
    private readonly reserve: Pick<DiskReserve, 'freeing'>,
    /** Object versions (#25): a file in a workspace is its key's current version. */
    private readonly versions?: ObjectVersions,
  ) {
    this.engine = engineOf(db)
  }

  /** One page of live files, newest first, and the total matching the filter. */
  list(tenant: AuthenticatedTenant, q: ListQuery, headerWorkspaceId: string | undefined): { files: FileRecord[]; nextCursor: string | null; total: number } {
    const cursor = q.cursor === undefined ? undefined : decodeCursor(q.cursor)
    const workspaceId = this.workspaces.scope(tenant.id, headerWorkspaceId, q.workspaceId)
    const filter = { workspaceId, fileType: q.fileType, context: q.context }
    // One read transaction: the page and the total describe the same snapshot.
    return this.engine.read(() => {
      const rows = this.files.list(tenant.id, filter, cursor, q.limit + 1)
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return {
        files: page,
        nextCursor: rows.length > q.limit && last ? encodeCursor(last) : null,
        total: this.files.count(tenant.id, filter),
      }
    })
  }

  get(tenant: AuthenticatedTenant, fileId: string): FileRecord {
    const f = isUuid(fileId) ? this.files.getLive(tenant.id, fileId.toLowerCase()) : undefined
    if (!f) throw notFound.file()
    return f
  }

  /**
   * Soft delete: the row stays (for retention) but leaves every listing and releases its quota.
   * Deleting a pending upload ends it: it becomes failed and its `file.failed` event is written;
   * deleting a completed file writes its workspace's `file.deleted`.
   */
  delete(tenant: AuthenticatedTenant, fileId: string): void {
    // A delete is how a full disk is emptied: it may use the disk reserve (lib/disk-reserve.ts).
    this.reserve.freeing(() =>
      this.engine.transaction(() => {
        // Read under the write lock: the status decides the event, so it must be the one deleted.
        const f = this.get(tenant, fileId)
        const now = this.clock.now()
        // A completed file in a workspace is its key's current version: deleted as S3 deletes
        // it (#25), a delete marker in a versioned bucket (the content stays a noncurrent version).
        if (this.versions && f.status === 'completed' && f.workspaceId !== null && f.objectKey !== null && this.versions.ofFile(f.id)) {
          this.versions.deleteCurrent(tenant.id, f.workspaceId, f.objectKey, now)
          return
        }
        this.files.softDelete(tenant.id, f.id, now)
        if (f.status === 'pending') this.events.settled(f.id, { code: 'FILE_DELETED', message: 'The file was deleted before its upload completed' })
        else this.events.deleted(f.id)
      }),
    )
  }

  /**
   * The tenant whose signature `token` carries for this file, or undefined when it proves nothing
   * (any state of the file, expired or not): per-tenant accounting of token-authorised requests
   * charges a tenant only once a token proved it (#12 item 2).
   */
  tokenSigner(purpose: TokenPurpose, fileId: string, expiresRaw: string | undefined, token: string | undefined): string | undefined {
    return this.urls.signerOf(purpose, fileId, expiresRaw, token)
  }

  /** A file whose content can be downloaded; pending and failed uploads have none. */
  downloadable(tenant: AuthenticatedTenant, fileId: string): FileRecord {
    const f = this.get(tenant, fileId)
    if (f.status !== 'completed') throw new AppError('FILE_NOT_FOUND', 'File has no content: its upload has not completed')
    return f
  }

  /** A download grant valid for `expiresInSeconds`; the front turns it into a URL. */
  share(tenant: AuthenticatedTenant, fileId: string, expiresInSeconds: number): { file: FileRecord; grant: Grant } {
    const file = this.downloadable(tenant, fileId)
    return { file, grant: this.urls.grant('download', file, this.clock.now() + expiresInSeconds * 1000) }
  }

  /**
   * The file a signed download grants. Any defect in the token is UNAUTHORIZED (SignedUrls), an
   * expired one too; a valid token for a file deleted since, or without content, is 404.
   */
  bySignedToken(fileId: string, expiresRaw: string | undefined, token: string | undefined): { file: FileRecord; expires: number } {
    const { file, expires, expired } = this.urls.verify('download', fileId, expiresRaw, token)
    if (expired) throw this.urls.expiredError('download')
    if (file.deletedAt !== null || file.status !== 'completed' || file.sha256 === null) throw notFound.file()
    return { file, expires }
  }
}
