import { AppError, notFound, validationError } from '../errors'
import type { FileRecord, FilesRepo, Cursor } from '../db/repos/files'
import type { WorkspacesRepo } from '../db/repos/workspaces'
import type { DB } from '../db/database'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { TokenPurpose, TokenSigner } from '../lib/tokens'
import { isoTime, type Clock } from '../lib/clock'
import { isUuid } from '../lib/ids'
import type { FileEvents } from '../webhooks/events'

/** The File resource as the API and webhooks show it (spec part 2). */
export function fileView(f: FileRecord) {
  return {
    id: f.id,
    url: `/api/v1/files/${f.id}/download`,
    originalName: f.originalName,
    fileType: f.fileType,
    sizeBytes: f.sizeBytes,
    context: f.context,
    tags: f.tags,
    metadata: f.metadata,
    processingStatus: f.status,
    workspaceId: f.workspaceId,
    createdAt: isoTime(f.createdAt),
  }
}
export type FileView = ReturnType<typeof fileView>

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
  if (!m || !isUuid(m[2])) throw validationError('/query/cursor', 'is not a cursor returned by this API')
  return { createdAt: Number(m[1]), id: m[2]! }
}

/** Reading, listing, deleting and sharing files. */
export class FilesService {
  constructor(
    private readonly db: DB,
    private readonly files: FilesRepo,
    private readonly workspaces: WorkspacesRepo,
    private readonly signer: TokenSigner,
    private readonly clock: Clock,
    private readonly events: FileEvents,
  ) {}

  /**
   * The workspace a request is scoped to: the header and a body/query value must agree, and the
   * workspace must be live in this tenant.
   */
  resolveWorkspace(tenantId: string, header: string | undefined, explicit: string | undefined, explicitPath: string): string | undefined {
    if (header !== undefined && explicit !== undefined && header.toLowerCase() !== explicit.toLowerCase()) {
      throw validationError(explicitPath, 'differs from the X-Workspace-Id header')
    }
    const id = (explicit ?? header)?.toLowerCase()
    if (id === undefined) return undefined
    if (!this.workspaces.getLive(tenantId, id)) throw notFound.workspace()
    return id
  }

  list(tenant: AuthenticatedTenant, q: ListQuery, headerWorkspaceId: string | undefined) {
    const cursor = q.cursor === undefined ? undefined : decodeCursor(q.cursor)
    const workspaceId = this.resolveWorkspace(tenant.id, headerWorkspaceId, q.workspaceId, '/query/workspaceId')
    const filter = { workspaceId, fileType: q.fileType, context: q.context }
    // One read transaction: the page and the total describe the same snapshot.
    return this.db.transaction(() => {
      const rows = this.files.list(tenant.id, filter, cursor, q.limit + 1)
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return {
        files: page.map(fileView),
        nextCursor: rows.length > q.limit && last ? encodeCursor(last) : null,
        total: this.files.count(tenant.id, filter),
      }
    })()
  }

  get(tenant: AuthenticatedTenant, fileId: string): FileRecord {
    const f = isUuid(fileId) ? this.files.getLive(tenant.id, fileId.toLowerCase()) : undefined
    if (!f) throw notFound.file()
    return f
  }

  /**
   * Soft delete: the row stays (for retention) but leaves every listing and releases its quota.
   * Deleting a pending upload ends it: it becomes failed and its `file.failed` event is written.
   */
  delete(tenant: AuthenticatedTenant, fileId: string): void {
    this.db
      .transaction(() => {
        // Read under the write lock: the status decides the event, so it must be the one deleted.
        const f = this.get(tenant, fileId)
        this.files.softDelete(tenant.id, f.id, this.clock.now())
        if (f.status === 'pending') this.events.settled(f.id, { code: 'FILE_DELETED', message: 'The file was deleted before its upload completed' })
      })
      .immediate()
  }

  /**
   * The tenant whose signature `token` carries for this file, or undefined when it proves nothing
   * (any state of the file, expired or not): per-tenant accounting of token-authorised requests
   * charges a tenant only once a token proved it (#12 item 2).
   */
  tokenSigner(purpose: TokenPurpose, fileId: string, expiresRaw: string | undefined, token: string | undefined): string | undefined {
    if (expiresRaw === undefined || token === undefined || !/^\d{1,15}$/.test(expiresRaw) || !isUuid(fileId)) return undefined
    const id = fileId.toLowerCase()
    const f = this.files.get(id)
    return this.signer.verify(purpose, f?.tenantId, id, Number(expiresRaw), token) ? f?.tenantId : undefined
  }

  /** A file whose content can be downloaded; pending and failed uploads have none. */
  downloadable(tenant: AuthenticatedTenant, fileId: string): FileRecord {
    const f = this.get(tenant, fileId)
    if (f.status !== 'completed') throw new AppError('FILE_NOT_FOUND', 'File has no content: its upload has not completed')
    return f
  }

  signedUrl(tenant: AuthenticatedTenant, fileId: string, expiresIn: number, publicBase: string) {
    const f = this.downloadable(tenant, fileId)
    const expires = this.clock.now() + expiresIn * 1000
    const token = this.signer.sign('download', tenant.id, f.id, expires)
    return {
      fileId: f.id,
      url: `${publicBase}/api/v1/files/${f.id}/download?expires=${expires}&token=${token}`,
      expiresAt: isoTime(expires),
      expiresIn,
    }
  }

  /**
   * The file a signed URL grants. Any defect in the token (tampered id, expiry or signature,
   * another file's token, expired) is 401; a valid token for a file deleted since is 404.
   */
  bySignedToken(fileId: string, expiresRaw: string | undefined, token: string | undefined): { file: FileRecord; expires: number } {
    const unauthorized = (why: string) => new AppError('UNAUTHORIZED', why)
    if (expiresRaw === undefined || token === undefined) throw unauthorized('Missing Authorization header or signed URL parameters (expires, token)')
    if (!/^\d{1,15}$/.test(expiresRaw) || !isUuid(fileId)) throw unauthorized('Invalid signed URL')
    const expires = Number(expiresRaw)
    const id = fileId.toLowerCase()
    const f = this.files.get(id)
    // Verified against a dummy key when the file is missing: as slow as for an existing id.
    if (!this.signer.verify('download', f?.tenantId, id, expires, token) || !f) throw unauthorized('Invalid signed URL')
    if (expires <= this.clock.now()) throw unauthorized('Signed URL expired')
    if (f.deletedAt !== null || f.status !== 'completed') throw notFound.file()
    return { file: f, expires }
  }
}
