import { Type, type Static } from '@sinclair/typebox'
import type { DeletedKey } from '../db/repos/versions'
import { isoTime } from '../lib/clock'
import { IsoTime, PathId, Uuid } from './common'

/** One version of a file's key as the API lists it: content, or a delete marker (no file, no bytes). */
export interface FileVersion {
  versionId: string
  fileId: string | null
  isLatest: boolean
  isDeleteMarker: boolean
  size: number
  sha256: string | null
  fileType: string | null
  createdAt: number
}

/** One version of a file's object key (#25): content, or a delete marker (no file, no bytes). */
export const FileVersionSchema = Type.Object({
  versionId: Type.String({ description: "S3's versionId; `null` for the null version (written while the workspace was unversioned or suspended)" }),
  fileId: Type.Union([Uuid, Type.Null()], { description: "The version's file (null for a delete marker): its id reaches these versions too" }),
  isLatest: Type.Boolean({ description: "The key's current version" }),
  isDeleteMarker: Type.Boolean(),
  sizeBytes: Type.Integer(),
  sha256: Type.Union([Type.String(), Type.Null()]),
  fileType: Type.Union([Type.String(), Type.Null()]),
  createdAt: IsoTime,
})

export const VersionsQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
)

export const VersionsResponse = Type.Object({
  versions: Type.Array(FileVersionSchema),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
  total: Type.Integer(),
})

/** Path ids: any string, so that a malformed one answers the resource's 404 (contract: Conventions). */
export const VersionParams = Type.Object({ fileId: PathId, versionId: PathId })

/** A deleted file that can be restored: its key's current version is a delete marker. */
export const DeletedFileSchema = Type.Object({
  fileId: Uuid,
  versionId: Type.String({ description: 'The newest version with content, which fileId is' }),
  originalName: Type.String(),
  fileType: Type.String(),
  sizeBytes: Type.Integer(),
  workspaceId: Uuid,
  deletedAt: IsoTime,
  deleteMarkerVersionId: Type.String(),
})

export const DeletedQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 3000 })),
    workspaceId: Type.Optional(Uuid),
  },
  { additionalProperties: false },
)

export const DeletedResponse = Type.Object({
  files: Type.Array(DeletedFileSchema),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
  total: Type.Integer(),
})

export function fileVersionView(v: FileVersion): Static<typeof FileVersionSchema> {
  return {
    versionId: v.versionId,
    fileId: v.fileId,
    isLatest: v.isLatest,
    isDeleteMarker: v.isDeleteMarker,
    sizeBytes: v.size,
    sha256: v.sha256,
    fileType: v.fileType,
    createdAt: isoTime(v.createdAt),
  }
}

export function deletedFileView(k: DeletedKey): Static<typeof DeletedFileSchema> {
  return {
    fileId: k.fileId,
    versionId: k.versionId,
    originalName: k.originalName,
    fileType: k.fileType,
    sizeBytes: k.size,
    workspaceId: k.workspaceId,
    deletedAt: isoTime(k.deletedAt),
    deleteMarkerVersionId: k.markerVersionId,
  }
}
