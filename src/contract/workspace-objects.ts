import { Type, type Static } from '@sinclair/typebox'
import { isoTime } from '../lib/clock'
import { retainUntilIso } from '../lib/retain-until'
import { IsoTime, NO_CONTROL, NO_CONTROL_MESSAGE, Uuid } from './common'

/*
 * A workspace seen as an S3 bucket (a workspace is a bucket: its slug is the name) for the console's bucket
 * browser (#31): its objects by prefix and delimiter, in the keyset order of ListObjectsV2, and
 * one object's details. Keys are S3 keys: 1-1024 bytes of UTF-8; the API refuses control
 * characters in what it is asked for, as everywhere else.
 */

/** The longest S3 key, in characters (the byte limit is checked where it matters: a key never exceeds it). */
const MAX_KEY = 1024
const KeyText = (description: string, minLength = 0) =>
  Type.String({ minLength, maxLength: MAX_KEY, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE, description })

export const ObjectsQuery = Type.Object(
  {
    prefix: Type.Optional(KeyText('Only keys starting with this')),
    delimiter: Type.Optional(
      Type.String({
        maxLength: 16,
        pattern: NO_CONTROL,
        'x-message': NO_CONTROL_MESSAGE,
        description: 'Roll keys up to common prefixes at this string ("/": folders)',
      }),
    ),
    after: Type.Optional(KeyText("Keyset cursor: start after this key or common prefix (the previous page's nextAfter)")),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'Entries (objects and prefixes together) per page' })),
  },
  { additionalProperties: false },
)
export type ObjectsQuery = Static<typeof ObjectsQuery>

export const ObjectEntry = Type.Object({
  key: Type.String(),
  fileId: Uuid,
  sizeBytes: Type.Integer(),
  contentType: Type.String(),
  etag: Type.String({ description: 'As S3 answers it, quoted' }),
  lastModified: IsoTime,
})

export const ObjectsResponse = Type.Object({
  prefixes: Type.Array(Type.String(), { description: 'Common prefixes ("folders") of this page, in key order' }),
  objects: Type.Array(ObjectEntry, { description: 'Objects of this page, in UTF-8 binary key order' }),
  nextAfter: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `after` for the next page; null on the last one' }),
})

export const ObjectDetailsQuery = Type.Object({ key: KeyText('The object key', 1) }, { additionalProperties: false })

export const ObjectDetails = Type.Object({
  ...ObjectEntry.properties,
  sha256: Type.Union([Type.String(), Type.Null()], {
    description: "The content's SHA-256 hex; null for a sealed object whose plaintext hash was not recorded",
  }),
  metadata: Type.Record(Type.String(), Type.String(), { description: 'User metadata (x-amz-meta-*, names without the prefix)' }),
  tags: Type.Record(Type.String(), Type.String(), { description: 'S3 object tags' }),
  versionId: Type.Union([Type.String(), Type.Null()]),
  versioning: Type.Union([Type.Literal('Enabled'), Type.Literal('Suspended'), Type.Null()]),
  lock: Type.Object({
    mode: Type.Union([Type.Literal('GOVERNANCE'), Type.Literal('COMPLIANCE'), Type.Null()]),
    retainUntil: Type.Union([IsoTime, Type.Null()]),
    legalHold: Type.Boolean(),
  }),
  acl: Type.String({ description: "The object's canned ACL ('private' when none)" }),
  public: Type.Boolean({ description: "Whether the object's ACL grants reads to everyone (bucket policies are not evaluated here)" }),
})

/** An object as the browser lists it. */
export interface ObjectSummary {
  key: string
  fileId: string
  size: number
  contentType: string
  etag: string
  completedAt: number
}

export function objectEntryView(o: ObjectSummary): Static<typeof ObjectEntry> {
  return { key: o.key, fileId: o.fileId, sizeBytes: o.size, contentType: o.contentType, etag: o.etag, lastModified: isoTime(o.completedAt) }
}

/** The details the service reads, times in epoch ms. */
export interface ObjectDetailsRecord extends ObjectSummary {
  sha256: string | null
  metadata: Record<string, string>
  tags: Record<string, string>
  versionId: string | null
  versioning: 'Enabled' | 'Suspended' | null
  lock: { mode: 'GOVERNANCE' | 'COMPLIANCE' | null; until: number | null; legalHold: boolean }
  acl: string
  public: boolean
}

export function objectDetailsView(d: ObjectDetailsRecord): Static<typeof ObjectDetails> {
  return {
    ...objectEntryView(d),
    sha256: d.sha256,
    metadata: d.metadata,
    tags: d.tags,
    versionId: d.versionId,
    versioning: d.versioning,
    lock: { mode: d.lock.mode, retainUntil: d.lock.until === null ? null : retainUntilIso(d.lock.until), legalHold: d.lock.legalHold },
    acl: d.acl,
    public: d.public,
  }
}
