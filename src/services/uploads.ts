import type { Readable } from 'node:stream'
import { AppError, isDiskFull, notFound, publicCode, validationError } from '../errors'
import type { FileRecord } from '../db/repos/files'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { BlobStore, StagedBlob } from '../blobs/blob-store'
import type { Clock } from '../lib/clock'
import { uuidv7 } from '../lib/ids'
import { MAX_FILE_SIZE, type SupportedTypes } from '../lib/file-types'
import { hasKnownSignature, hasSignature } from '../lib/sniff'
import type { UploadMeter } from '../lib/metrics'
import { parseWebhookUrl } from '../webhooks/url'
import type { Quotas } from './quotas'
import type { Grant, SignedUrls } from './signed-urls'
import type { UploadRecords } from './upload-records'
import type { WorkspacesService } from './workspaces'
import type { BlobWrites } from './blob-writes'
import type { BucketEncryptionService } from './bucket-encryption'
import { sealStream, sealingStage, type SealingStage } from '../s3/sealed-objects'
import type { SseKey } from '../s3/sse'

export interface HandshakeInput {
  fileType: string
  fileName: string
  fileSizeBytes?: number
  context?: string
  tags?: Record<string, string>
  webhookUrl?: string
  workspaceId?: string
  /** The file's S3 key in its workspace (#31); default `<fileId>/<fileName>`. */
  objectKey?: string
}

/** The content of an upload as a front received it; the front parsed its own headers. */
export interface ReceiveInput {
  fileId: string
  expires: string | undefined
  token: string | undefined
  /** The media type sent (lower case, no parameters); null when the header was not one media type. */
  contentType: string | null | undefined
  /** The length the client announced, if any: an oversized body is refused before a byte is read. */
  contentLength: number | undefined
  body: Readable
  /**
   * The front's reading of an error from `body` (a connection reset, a cut-off request): the
   * client-facing error, or undefined when it is not the client's doing.
   */
  bodyError?: (err: unknown) => AppError | undefined
}

export interface UploadSettings {
  uploadUrlTtlMs: number
  webhookAllowPrivate: boolean
  /** The types the server accepts (COFFER_FILE_TYPES); a tenant's list narrows them. */
  fileTypes: SupportedTypes
}

/** How long past its URL's expiry an abandoned pending upload keeps its reservation. */
export const SWEEP_GRACE_MS = 5 * 60_000

/**
 * The two-step upload: a handshake that reserves quota and grants a presigned PUT, then the
 * content, streamed to the blob store while it is hashed and checked, and settled in one
 * transaction (UploadRecords). Read `receive` top to bottom for the whole flow.
 */
export class UploadsService {
  /**
   * Uploads whose body is streaming right now, with the work receiving them: a second PUT is
   * refused, the sweeper skips them, and shutdown waits for them (settled()).
   */
  private readonly inFlight = new Map<string, Promise<FileRecord>>()

  constructor(
    private readonly deps: {
      clock: Clock
      records: UploadRecords
      workspaces: WorkspacesService
      quotas: Quotas
      store: BlobStore
      /** Places the content (under a lease on a remote store) and cleans up after a failed commit. */
      writes: BlobWrites
      urls: SignedUrls
      settings: UploadSettings
      /** Metrics; absent in the CLI. */
      meter?: UploadMeter
      /** The workspaces' default encryption (#27): an upload into an aws:kms one is sealed under the ring's key. */
      encryption?: Pick<BucketEncryptionService, 'uploadKey'>
    },
  ) {}

  /** Step one: checks the request, reserves the declared size and grants the PUT (the reservation's durability: UploadRecords.reserve). */
  async handshake(tenant: AuthenticatedTenant, input: HandshakeInput, headerWorkspaceId: string | undefined): Promise<{ file: FileRecord; grant: Grant }> {
    const { clock, records, settings } = this.deps
    if (!settings.fileTypes.allows(tenant.allowedFileTypes, input.fileType)) {
      throw new AppError('INVALID_FILE_TYPE', `File type ${JSON.stringify(input.fileType)} is not allowed`, {
        fileType: input.fileType,
        allowedTypes: tenant.allowedFileTypes,
      })
    }
    if (input.fileSizeBytes !== undefined && input.fileSizeBytes > MAX_FILE_SIZE) {
      throw new AppError('FILE_TOO_LARGE', `File exceeds the ${MAX_FILE_SIZE}-byte limit`, { fileSize: input.fileSizeBytes, maxSize: MAX_FILE_SIZE })
    }
    if (input.webhookUrl !== undefined) parseWebhookUrl(input.webhookUrl, settings.webhookAllowPrivate)
    const workspaceId = this.deps.workspaces.scope(tenant.id, headerWorkspaceId, input.workspaceId) ?? null
    if (input.objectKey !== undefined && workspaceId === null) throw validationError('/objectKey', 'needs a workspace (workspaceId or X-Workspace-Id)')
    if (input.objectKey !== undefined && Buffer.byteLength(input.objectKey) > 1024) throw validationError('/objectKey', 'must be at most 1024 bytes as UTF-8')
    // A workspace whose default encryption cannot be honoured refuses before anything is reserved
    // (409); the PUT looks again, since the default may change in between.
    if (workspaceId !== null) this.deps.encryption?.uploadKey(workspaceId, tenant.id)
    const now = clock.now()
    const declared = input.fileSizeBytes ?? null
    const id = uuidv7(now)
    const record = {
      id,
      tenantId: tenant.id,
      workspaceId,
      originalName: input.fileName,
      fileType: input.fileType,
      sizeBytes: declared ?? 0,
      declaredSize: declared,
      context: input.context ?? '',
      tags: input.tags ?? {},
      webhookUrl: input.webhookUrl ?? null,
      uploadExpiresAt: now + settings.uploadUrlTtlMs,
      createdAt: now,
      objectKey: input.objectKey ?? apiObjectKey(id, input.fileName, workspaceId),
    }
    records.reserve(record)
    const file: FileRecord = { ...record, status: 'pending', sha256: null, metadata: null, completedAt: null, deletedAt: null }
    return { file, grant: this.deps.urls.grant('upload', record, record.uploadExpiresAt) }
  }

  /** Step two, the content: authorise by token, stream to the store while hashing, settle. */
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
    let swept = 0
    for (const f of this.deps.records.expiredPending(this.deps.clock.now() - SWEEP_GRACE_MS, 500)) {
      if (this.inFlight.has(f.id)) continue
      if (this.deps.records.fail(f.id, 'UPLOAD_EXPIRED', 'The upload URL expired before any content arrived')) {
        swept++
        this.deps.meter?.finished('expired')
      }
    }
    return swept
  }

  /** The pending upload a presigned URL grants. */
  private authorize(input: ReceiveInput): FileRecord {
    const { urls } = this.deps
    const { file, expired } = urls.verify('upload', input.fileId, input.expires, input.token)
    if (file.deletedAt !== null) throw notFound.file()
    if (file.status !== 'pending') {
      throw new AppError('CONFLICT', `This upload is already ${file.status}; request a new upload`, { field: 'upload', processingStatus: file.status })
    }
    if (expired) throw urls.expiredError('upload')
    return file
  }

  private async receiveAuthorized(file: FileRecord, input: ReceiveInput): Promise<FileRecord> {
    const type = file.fileType
    // 1. What the client announced must fit what the handshake declared; a header that is not
    //    one media type fails the upload too, releasing its reservation (#12 item 11).
    if (input.contentType === null) {
      this.failWith(
        file,
        new AppError('VALIDATION_ERROR', `The Content-Type header is not a single media type; send ${type}`, {
          errors: [{ path: '/headers/content-type', message: `must be ${type}` }],
        }),
      )
    }
    // 1. What the client announced must fit what the handshake declared.
    if (input.contentType !== undefined && input.contentType !== '' && input.contentType !== type) {
      this.failWith(
        file,
        new AppError('INVALID_FILE_TYPE', `Content-Type ${JSON.stringify(input.contentType)} does not match the declared ${type}`, {
          fileType: input.contentType,
          allowedTypes: [type],
        }),
      )
    }
    const limit = this.deps.quotas.limitFor(file)
    if (input.contentLength !== undefined && input.contentLength > limit.maxBytes) this.failWith(file, limit.overflow(input.contentLength))
    // 2. Stream the body into the store, checking size and signature as it arrives; into a
    //    workspace whose default is aws:kms, sealed on its way under the ring's key (#27), as an
    //    S3 PutObject that asks for nothing is: the store only ever sees sealed bytes.
    let sealing: { stage: SealingStage; key: SseKey } | undefined
    try {
      const key = file.workspaceId === null ? undefined : this.deps.encryption?.uploadKey(file.workspaceId, file.tenantId)
      if (key) sealing = { key, stage: sealingStage(this.deps.store, () => sealStream(key)) }
    } catch (err) {
      this.failWith(file, err)
    }
    let staged: StagedBlob
    const inFlight = this.deps.quotas.stream(file)
    try {
      staged = await (sealing?.stage ?? this.deps.store).stage(input.body, {
        maxBytes: limit.maxBytes,
        ...(input.contentLength !== undefined ? { expectedBytes: input.contentLength } : {}),
        onChunk: (bytes) => {
          this.deps.meter?.received(bytes)
          inFlight.add(bytes)
        },
        onOverflow: () => limit.overflow(input.contentLength ?? null),
        checkHead: (head) => {
          // The spec's six must carry their signature; another type (COFFER_FILE_TYPES) is taken as declared.
          if (head.length > 0 && hasKnownSignature(type) && !hasSignature(type, head)) {
            throw new AppError('INVALID_FILE_TYPE', `The content is not a valid ${type} file`, { fileType: type, allowedTypes: [type] })
          }
        },
      })
    } catch (err) {
      inFlight.release()
      this.failWith(file, input.bodyError?.(err) ?? err)
    }
    // 3. Make it durable under its hash, then commit the row in one transaction.
    try {
      const size = sealing ? sealing.stage.plainSize() : staged.size
      if (size === 0) throw new AppError('VALIDATION_ERROR', 'The upload body is empty', { errors: [{ path: '/body', message: 'is empty' }] })
      // The blob is stored under its sealed bytes' hash; the file's size, and the SHA-256 the API
      // reports (download ETag), stay the plaintext's, kept with the key's name.
      const sealed = sealing
        ? {
            size,
            info: {
              etag: `"${sealing.stage.plainSha256()}"`,
              contentType: type,
              meta: {},
              sse: { ...sealing.key.stored, sha256: sealing.stage.plainSha256() },
            },
          }
        : undefined
      // Awaited here: a commit that could not be made durable fails the upload like any other error.
      return await this.deps.writes.write(file.id, staged, (settle) => this.deps.records.commit(file.id, staged, settle, inFlight, sealed))
    } catch (err) {
      // A row deleted or settled meanwhile is reported as such, not failed a second time.
      if (err instanceof AppError && (err.code === 'FILE_NOT_FOUND' || err.code === 'CONFLICT')) throw err
      this.failWith(file, err)
    } finally {
      inFlight.release()
      await this.deps.store.discard(staged)
    }
  }

  /**
   * Marks the upload failed and throws the client-facing error, or the original one when it was
   * unexpected (the front then answers 500 and logs it).
   */
  private failWith(file: FileRecord, err: unknown): never {
    const appErr = err instanceof AppError ? err : isDiskFull(err) ? outOfSpace() : undefined
    const code = appErr ? publicCode(appErr.code) : 'INTERNAL_ERROR'
    if (this.deps.records.fail(file.id, code, appErr?.message ?? 'The upload failed')) this.deps.meter?.finished(code)
    throw appErr ?? err
  }
}

const outOfSpace = () => new AppError('INSUFFICIENT_STORAGE', 'The server is out of storage space; nothing was stored')

/**
 * The S3 object key of a file uploaded through this API into a workspace (an API file is an S3
 * object): `<fileId>/<fileName>`, unique by its id, so S3 clients see and can read it. Files
 * outside any workspace have no key (they are not visible over S3).
 */
export function apiObjectKey(fileId: string, fileName: string, workspaceId: string | null): string | null {
  return workspaceId === null ? null : `${fileId}/${fileName}`
}
