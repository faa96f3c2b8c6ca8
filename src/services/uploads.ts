import type { Readable } from 'node:stream'
import { AppError, isDiskFull, notFound } from '../errors'
import type { DB } from '../db/database'
import type { FileRecord, FilesRepo } from '../db/repos/files'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { WorkspacesRepo } from '../db/repos/workspaces'
import type { BlobsRepo } from '../db/repos/blobs'
import type { BlobStore, StagedBlob } from '../blobs/blob-store'
import type { TokenSigner } from '../lib/tokens'
import type { FilesService } from './files'
import type { Quotas } from './quotas'
import { isoTime, type Clock } from '../lib/clock'
import { isUuid, uuidv7 } from '../lib/ids'
import { FILE_TYPES, MAX_FILE_SIZE, type FileType } from '../lib/file-types'
import { hasSignature } from '../lib/sniff'
import { parseWebhookUrl } from '../webhooks/url'
import type { FileEvents } from '../webhooks/events'
import type { UploadMeter, UploadOutcome } from '../lib/metrics'

export interface HandshakeInput {
  fileType: string
  fileName: string
  fileSizeBytes?: number
  context?: string
  tags?: Record<string, string>
  webhookUrl?: string
  workspaceId?: string
}

export interface ReceiveInput {
  fileId: string
  expires: string | undefined
  token: string | undefined
  contentType: string | undefined
  contentLength: number | undefined
  body: Readable
}

/** How long past its URL's expiry an abandoned pending upload keeps its reservation. */
export const SWEEP_GRACE_MS = 5 * 60_000

/** The two-step upload: a handshake that reserves quota, then a streamed PUT that settles it. */
export class UploadsService {
  /**
   * Uploads whose body is streaming right now, with the work receiving them: a second PUT is
   * refused, the sweeper skips them, and shutdown waits for them (settled()).
   */
  private readonly inFlight = new Map<string, Promise<FileRecord>>()

  constructor(
    private readonly deps: {
      db: DB
      clock: Clock
      files: FilesRepo
      workspaces: WorkspacesRepo
      blobs: BlobsRepo
      store: BlobStore
      signer: TokenSigner
      filesService: FilesService
      quotas: Quotas
      events: FileEvents
      uploadUrlTtlMs: number
      webhookAllowPrivate: boolean
      /** Metrics; absent in the CLI. */
      meter?: UploadMeter
    },
  ) {}

  handshake(tenant: AuthenticatedTenant, input: HandshakeInput, headerWorkspaceId: string | undefined) {
    const { db, clock, files, signer } = this.deps
    if (!(FILE_TYPES as readonly string[]).includes(input.fileType) || !tenant.allowedFileTypes.includes(input.fileType)) {
      throw new AppError('INVALID_FILE_TYPE', `File type ${JSON.stringify(input.fileType)} is not allowed`, {
        fileType: input.fileType,
        allowedTypes: tenant.allowedFileTypes,
      })
    }
    if (input.fileSizeBytes !== undefined && input.fileSizeBytes > MAX_FILE_SIZE) {
      throw new AppError('FILE_TOO_LARGE', `File exceeds the ${MAX_FILE_SIZE}-byte limit`, { fileSize: input.fileSizeBytes, maxSize: MAX_FILE_SIZE })
    }
    if (input.webhookUrl !== undefined) parseWebhookUrl(input.webhookUrl, this.deps.webhookAllowPrivate)
    const workspaceId = this.deps.filesService.resolveWorkspace(tenant.id, headerWorkspaceId, input.workspaceId, '/workspaceId') ?? null
    const now = clock.now()
    const declared = input.fileSizeBytes ?? null
    const record = {
      id: uuidv7(now),
      tenantId: tenant.id,
      workspaceId,
      originalName: input.fileName,
      fileType: input.fileType,
      sizeBytes: declared ?? 0,
      declaredSize: declared,
      context: input.context ?? '',
      tags: input.tags ?? {},
      webhookUrl: input.webhookUrl ?? null,
      uploadExpiresAt: now + this.deps.uploadUrlTtlMs,
      createdAt: now,
    }
    // Check and reserve in one write transaction: concurrent handshakes cannot both fit, and a
    // workspace deleted meanwhile cannot receive a file.
    db.transaction(() => {
      if (workspaceId !== null && !this.deps.workspaces.getLive(tenant.id, workspaceId)) throw notFound.workspace()
      // Also refuses a tenant deleted since its key was checked, so none of its files outlives it.
      this.deps.quotas.assertFits(tenant.id, workspaceId, declared ?? 0)
      files.insertPending(record)
    }).immediate()
    const token = signer.sign('upload', tenant.id, record.id, record.uploadExpiresAt)
    return {
      fileId: record.id,
      presignedUrl: `/api/v1/upload/${record.id}?expires=${record.uploadExpiresAt}&token=${token}`,
      expiresAt: isoTime(record.uploadExpiresAt),
      uploadMetadata: { maxSizeBytes: Math.min(declared ?? MAX_FILE_SIZE, MAX_FILE_SIZE), allowedTypes: tenant.allowedFileTypes },
    }
  }

  /** The PUT: authorise by token, stream to disk while hashing, then settle in one transaction. */
  async receive(input: ReceiveInput): Promise<FileRecord> {
    const file = this.authorize(input)
    if (this.inFlight.has(file.id)) throw new AppError('CONFLICT', 'An upload to this file is already in progress', { field: 'upload' })
    const work = this.receiveAuthorized(file, input)
    this.inFlight.set(file.id, work)
    try {
      const done = await work
      this.deps.meter?.finished('completed')
      return done
    } finally {
      this.inFlight.delete(file.id)
    }
  }

  /**
   * Resolves once every upload being received has finished, whichever way. Shutdown awaits it
   * after cutting connections: a cut-off upload still has to mark its file failed, release its
   * reservation and remove its temp file, and the database must stay open until it has.
   */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()])
  }

  /** Abandoned pending uploads (URL expired more than the grace period ago) become failed. */
  sweepExpired(): number {
    const { db, clock, files } = this.deps
    const now = clock.now()
    let swept = 0
    for (const f of files.expiredPending(now - SWEEP_GRACE_MS, 500)) {
      if (this.inFlight.has(f.id)) continue
      if (db.transaction(() => this.failInTx(f.id, 'UPLOAD_EXPIRED', 'The upload URL expired before any content arrived')).immediate()) {
        swept++
        this.deps.meter?.finished('expired')
      }
    }
    return swept
  }

  private authorize(input: ReceiveInput): FileRecord {
    const { files, signer, clock } = this.deps
    const unauthorized = (why: string) => new AppError('UNAUTHORIZED', why)
    if (input.expires === undefined || input.token === undefined) throw unauthorized('Missing upload URL parameters (expires, token)')
    if (!/^\d{1,15}$/.test(input.expires) || !isUuid(input.fileId)) throw unauthorized('Invalid upload URL')
    const expires = Number(input.expires)
    const file = files.get(input.fileId.toLowerCase())
    if (!file || !signer.verify('upload', file.tenantId, file.id, expires, input.token)) throw unauthorized('Invalid upload URL')
    if (file.deletedAt !== null) throw notFound.file()
    if (file.status !== 'pending') {
      throw new AppError('CONFLICT', `This upload is already ${file.status}; request a new upload`, { field: 'upload', processingStatus: file.status })
    }
    if (expires <= clock.now()) throw unauthorized('Upload URL expired; request a new upload')
    return file
  }

  private async receiveAuthorized(file: FileRecord, input: ReceiveInput): Promise<FileRecord> {
    const type = file.fileType as FileType
    const sent = input.contentType?.split(';')[0]?.trim().toLowerCase()
    if (sent !== undefined && sent !== '' && sent !== type) {
      this.failWith(file, new AppError('INVALID_FILE_TYPE', `Content-Type ${JSON.stringify(sent)} does not match the declared ${type}`, { fileType: sent, allowedTypes: [type] }))
    }
    const limit = this.deps.quotas.limitFor(file)
    if (input.contentLength !== undefined && input.contentLength > limit.maxBytes) this.failWith(file, limit.overflow(input.contentLength))
    let staged: StagedBlob
    try {
      staged = await this.deps.store.stage(input.body, {
        maxBytes: limit.maxBytes,
        onChunk: this.deps.meter && ((bytes) => this.deps.meter!.received(bytes)),
        onOverflow: () => limit.overflow(input.contentLength ?? null),
        checkHead: (head) => {
          if (head.length > 0 && !hasSignature(type, head)) {
            throw new AppError('INVALID_FILE_TYPE', `The content is not a valid ${type} file`, { fileType: type, allowedTypes: [type] })
          }
        },
      })
    } catch (err) {
      this.failWith(file, err)
    }
    try {
      if (staged.size === 0) throw new AppError('VALIDATION_ERROR', 'The upload body is empty', { errors: [{ path: '/body', message: 'is empty' }] })
      await this.deps.store.place(staged)
      return this.commit(file, staged)
    } catch (err) {
      if (staged.size > 0) this.removeIfOrphan(staged.sha256)
      // A row deleted or settled meanwhile is reported as such, not failed a second time.
      if (err instanceof AppError && (err.code === 'FILE_NOT_FOUND' || err.code === 'CONFLICT')) throw err
      this.failWith(file, err)
    } finally {
      await this.deps.store.discard(staged)
    }
  }

  /** The transaction that turns a staged blob into a completed file. */
  private commit(file: FileRecord, staged: StagedBlob): FileRecord {
    const { db, clock, files, blobs, store } = this.deps
    return db
      .transaction(() => {
        const current = files.get(file.id)
        if (!current || current.deletedAt !== null) throw notFound.file()
        if (current.status !== 'pending') throw new AppError('CONFLICT', `This upload is already ${current.status}`, { field: 'upload' })
        // Without a declared size nothing was reserved: the real size must fit now, atomically.
        if (current.declaredSize === null) this.deps.quotas.assertFits(current.tenantId, current.workspaceId, staged.size)
        store.ensurePlaced(staged)
        blobs.insertIfMissing(staged.sha256, staged.size, clock.now())
        files.complete(file.id, staged.size, staged.sha256, clock.now())
        this.deps.events.settled(file.id)
        return files.get(file.id)!
      })
      .immediate()
  }

  /**
   * Marks the upload failed (releasing its reservation exactly once: the row leaves `pending`
   * in the same statement) and throws the client-facing error, or the original one when it was
   * unexpected (the error handler then answers 500 and logs it).
   */
  private failWith(file: FileRecord, err: unknown): never {
    const appErr = toUploadError(err)
    const failed = this.deps.db.transaction(() => this.failInTx(file.id, appErr?.code ?? 'INTERNAL_ERROR', appErr?.message ?? 'The upload failed')).immediate()
    if (failed) this.deps.meter?.finished(outcomeOf(appErr))
    throw appErr ?? err
  }

  /** pending → failed, with its `file.failed` event in the same transaction. */
  private failInTx(fileId: string, code: string, message: string): boolean {
    if (!this.deps.files.fail(fileId, this.deps.clock.now())) return false
    this.deps.events.settled(fileId, { code, message })
    return true
  }

  /** A placed blob that no row references (its commit failed) is removed under the write lock. */
  private removeIfOrphan(sha256: string): void {
    const { db, blobs, store } = this.deps
    try {
      db.transaction(() => {
        if (!blobs.exists(sha256)) store.removeSync(sha256)
      }).immediate()
    } catch {
      // Best effort: `coffer gc` removes orphans it finds later.
    }
  }
}

const FAILURE_OUTCOMES: ReadonlySet<string> = new Set(['invalid_file_type', 'file_too_large', 'quota_exceeded', 'validation_error', 'insufficient_storage'])

/** The metrics outcome of a failed upload: a bounded label set, whatever was thrown. */
function outcomeOf(err: AppError | undefined): UploadOutcome {
  const code = err?.code.toLowerCase() ?? ''
  return (FAILURE_OUTCOMES.has(code) ? code : 'internal_error') as UploadOutcome
}

/** The client-facing error for a failure while receiving content; undefined when unexpected. */
function toUploadError(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err
  if (isDiskFull(err)) return new AppError('INSUFFICIENT_STORAGE', 'The server is out of storage space; nothing was stored')
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  if (code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'ECONNRESET' || code === 'ECONNABORTED' || (err as Error | undefined)?.name === 'AbortError') {
    return new AppError('VALIDATION_ERROR', 'The upload was cut off before the body ended', { errors: [{ path: '/body', message: 'was cut off' }] })
  }
  return undefined
}
