import { Type, type Static } from '@sinclair/typebox'
import type { FileRecord } from '../db/repos/files'
import { isoTime } from '../lib/clock'
import { MAX_FILE_SIZE } from '../lib/file-types'
import { FILE_NAME_PATTERN } from '../lib/text'
import { FileTypeSchema, IsoTime, NO_CONTROL, NO_CONTROL_MESSAGE, Uuid } from './common'
import { downloadPath, uploadPath, withToken } from './paths'

/*
 * fileName (contract): 1–255 characters; no control characters, none of / \ < > : " | ? *, not
 * `.` or `..`. Also refused: bidi controls (which can disguise an extension,
 * `invoice\u202Efdp.exe`), invisible format characters, lone surrogates, and look-alikes of the
 * separators such as the fullwidth slash: FILE_NAME_PATTERN in lib/text.ts (#12 item 13).
 */
export const Tags = Type.Unsafe<Record<string, string>>({
  type: 'object',
  maxProperties: 50,
  propertyNames: { minLength: 1, maxLength: 100, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE },
  additionalProperties: { type: 'string', maxLength: 500, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE },
  description: 'String-to-string pairs: at most 50, keys 1–100 characters, values at most 500',
})

export const HandshakeBody = Type.Object(
  {
    fileType: Type.String({ maxLength: 255, description: 'One of the supported MIME types that the tenant allows' }),
    fileName: Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: FILE_NAME_PATTERN,
      'x-message': 'must not be "." or "..", nor contain control, bidi or invisible formatting characters, or any of / \\ < > : " | ? * and their look-alikes',
    }),
    fileSizeBytes: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Declared size; reserved against the quota' })),
    context: Type.Optional(Type.String({ maxLength: 100, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE })),
    tags: Type.Optional(Tags),
    // Control characters would reach the outbox and `coffer webhooks list` raw (#12 item 8); the
    // URL parser would even drop tabs and newlines silently.
    webhookUrl: Type.Optional(
      Type.String({ maxLength: 2048, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE, description: 'Absolute http(s) URL notified when the upload ends' }),
    ),
    workspaceId: Type.Optional(Uuid),
    // The console's bucket browser uploads into a prefix (#31). Without it the key is `<fileId>/<fileName>`, unique by the id.
    objectKey: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1024,
        pattern: NO_CONTROL,
        'x-message': NO_CONTROL_MESSAGE,
        description:
          'The S3 key the file gets in its workspace (1-1024 bytes of UTF-8; needs a workspace); a key held by a live file is 409 CONFLICT. Default: `<fileId>/<fileName>`',
      }),
    ),
  },
  { additionalProperties: false },
)

export const HandshakeResponse = Type.Object({
  fileId: Uuid,
  presignedUrl: Type.String({ description: 'Relative path to PUT the content to' }),
  expiresAt: IsoTime,
  uploadMetadata: Type.Object({ maxSizeBytes: Type.Integer(), allowedTypes: Type.Array(Type.String()) }),
})

export const FileSchema = Type.Object({
  id: Uuid,
  url: Type.String(),
  originalName: Type.String(),
  fileType: Type.String(),
  sizeBytes: Type.Integer(),
  context: Type.String(),
  tags: Type.Record(Type.String(), Type.String()),
  metadata: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
  processingStatus: Type.Union([Type.Literal('pending'), Type.Literal('completed'), Type.Literal('failed')]),
  workspaceId: Type.Union([Uuid, Type.Null()]),
  createdAt: IsoTime,
})

/** The File resource as the API and webhooks show it (spec part 2). */
export function fileView(f: FileRecord): Static<typeof FileSchema> {
  return {
    id: f.id,
    url: downloadPath(f.id),
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

export const WorkspaceHeader = Type.Object({ 'x-workspace-id': Type.Optional(Uuid) })

export const ListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
    context: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    fileType: Type.Optional(FileTypeSchema),
    workspaceId: Type.Optional(Uuid),
  },
  { additionalProperties: false },
)

export const ListResponse = Type.Object({
  files: Type.Array(FileSchema),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
  total: Type.Integer(),
})

export const SignedUrlQuery = Type.Object({ expiresIn: Type.Integer({ minimum: 60, maximum: 86400, default: 3600 }) }, { additionalProperties: false })

export const SignedUrlResponse = Type.Object({
  fileId: Uuid,
  url: Type.String({ description: 'Absolute download URL carrying expires (epoch ms) and token' }),
  expiresAt: IsoTime,
  expiresIn: Type.Integer(),
})

/** Download query: unknown parameters are tolerated, as shared links collect tracking parameters. */
export const DownloadQuery = Type.Object(
  {
    expires: Type.Optional(Type.String({ maxLength: 20 })),
    token: Type.Optional(Type.String({ maxLength: 200 })),
    disposition: Type.Optional(Type.Union([Type.Literal('attachment'), Type.Literal('inline')])),
  },
  { additionalProperties: true },
)

export const UploadQuery = Type.Object(
  { expires: Type.Optional(Type.String({ maxLength: 20 })), token: Type.Optional(Type.String({ maxLength: 200 })) },
  { additionalProperties: true },
)

/** The handshake's answer: where to PUT the content, until when, and what it may be. */
export function handshakeView(f: FileRecord, grant: { expires: number; token: string }, allowedTypes: string[]): Static<typeof HandshakeResponse> {
  return {
    fileId: f.id,
    presignedUrl: withToken(uploadPath(f.id), grant),
    expiresAt: isoTime(grant.expires),
    uploadMetadata: { maxSizeBytes: Math.min(f.declaredSize ?? MAX_FILE_SIZE, MAX_FILE_SIZE), allowedTypes },
  }
}

/** A signed download URL; `base` is the public origin the front is reached at. */
export function signedUrlView(f: FileRecord, grant: { expires: number; token: string }, base: string, expiresIn: number): Static<typeof SignedUrlResponse> {
  return { fileId: f.id, url: `${base}${withToken(downloadPath(f.id), grant)}`, expiresAt: isoTime(grant.expires), expiresIn }
}
