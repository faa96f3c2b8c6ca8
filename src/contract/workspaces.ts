import { Type, type Static } from '@sinclair/typebox'
import type { Workspace } from '../db/repos/workspaces'
import { unixSeconds } from '../lib/clock'
import { NO_CONTROL, NO_CONTROL_MESSAGE, Uuid } from './common'

/** Workspace metadata: at most this many bytes as JSON, and this many levels deep (the object itself is level 1). */
export const MAX_METADATA_BYTES = 16 * 1024
export const MAX_METADATA_DEPTH = 32

const Name = Type.String({ minLength: 1, maxLength: 255, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE })
export const Slug = Type.String({
  minLength: 1,
  maxLength: 63,
  pattern: '^[a-z0-9]+(?:-[a-z0-9]+)*$',
  'x-message': 'must be lowercase letters, digits and single hyphens between them (1-63 characters)',
})
// Validated like the handshake's webhookUrl: no control characters (they would reach the outbox and
// `coffer webhooks list` raw), then parsed and SSRF-checked by the service.
const WebhookUrl = Type.String({
  maxLength: 2048,
  pattern: NO_CONTROL,
  'x-message': NO_CONTROL_MESSAGE,
  description:
    'Absolute http(s) URL notified of every upload completed into the workspace (file.uploaded) and every deletion (file.deleted), through either front',
})
const Quota = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })
const Metadata = Type.Object(
  {},
  {
    additionalProperties: true,
    'x-free-json': { maxDepth: MAX_METADATA_DEPTH, maxBytes: MAX_METADATA_BYTES },
    description: `Arbitrary JSON object, at most 16 KiB serialized and ${MAX_METADATA_DEPTH} levels deep`,
  },
)

export const CreateWorkspaceBody = Type.Object(
  {
    name: Name,
    slug: Slug,
    quotaBytes: Type.Optional(Type.Union([Quota, Type.Null()])),
    metadata: Type.Optional(Type.Union([Metadata, Type.Null()])),
    webhookUrl: Type.Optional(Type.Union([WebhookUrl, Type.Null()])),
  },
  { additionalProperties: false },
)

export const UpdateWorkspaceBody = Type.Object(
  {
    name: Type.Optional(Name),
    slug: Type.Optional(Type.String({ description: 'Immutable: accepted only when unchanged' })),
    quotaBytes: Type.Optional(Type.Union([Quota, Type.Null()], { description: 'null removes the limit' })),
    metadata: Type.Optional(Type.Union([Metadata, Type.Null()], { description: 'Replaces the existing metadata' })),
    webhookUrl: Type.Optional(Type.Union([WebhookUrl, Type.Null()], { description: 'Replaces the workspace webhook; null removes it' })),
  },
  { additionalProperties: false },
)

export const WorkspaceSchema = Type.Object({
  id: Uuid,
  name: Type.String(),
  slug: Type.String(),
  quotaBytes: Type.Union([Type.Integer(), Type.Null()]),
  usedBytes: Type.Integer(),
  metadata: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
  webhookUrl: Type.Union([Type.String(), Type.Null()], { description: 'Notified of file.uploaded and file.deleted for every file of the workspace' }),
  createdAt: Type.Integer({ description: 'Unix time in seconds' }),
  updatedAt: Type.Integer({ description: 'Unix time in seconds' }),
})

export const WorkspaceList = Type.Object({
  workspaces: Type.Array(
    Type.Object({
      ...WorkspaceSchema.properties,
      fileCount: Type.Integer({ description: 'Live files in the workspace, of every status (as the files list counts them)' }),
    }),
  ),
})

/** The Workspace resource as the API shows it (spec part 2): times in Unix seconds. */
export function workspaceView(w: Workspace): Static<typeof WorkspaceSchema> {
  return {
    id: w.id,
    name: w.name,
    slug: w.slug,
    quotaBytes: w.quotaBytes,
    usedBytes: w.usedBytes,
    metadata: w.metadata,
    webhookUrl: w.webhookUrl,
    createdAt: unixSeconds(w.createdAt),
    updatedAt: unixSeconds(w.updatedAt),
  }
}
