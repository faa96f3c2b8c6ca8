import { Type } from '@sinclair/typebox'
import { FILE_TYPES, MIME_TYPE } from '../lib/file-types'
import { SAFE_TEXT_PATTERN } from '../lib/text'

/**
 * The wire shapes of Coffer's JSON API, shared by every front that speaks them: the HTTP routes
 * validate and serialize with these schemas, the CLI prints the same views, webhooks send them.
 * Nothing here knows HTTP status codes or Fastify.
 */

/** The error envelope (contract: Errors). */
export const ErrorResponse = Type.Object(
  {
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Object({}, { additionalProperties: true }),
    }),
  },
  { $id: 'ErrorResponse' },
)

/**
 * A file type in a query: a MIME type. Whether the server supports it (the spec's six unless
 * COFFER_FILE_TYPES widens them) is checked by the route, which knows the server's setting.
 */
export const FileTypeSchema = Type.String({
  pattern: MIME_TYPE.source,
  maxLength: 255,
  description: `One of the server's supported types: ${FILE_TYPES.join(', ')}, and those COFFER_FILE_TYPES adds`,
  'x-message': 'must be a lower-case MIME type (type/subtype)',
})

export const Uuid = Type.String({ format: 'uuid', 'x-message': 'must be a UUID' })

/** A path id: any string, so that a malformed id answers the resource's 404 rather than a 400. */
export const PathId = Type.String({ maxLength: 1000 })

export const IsoTime = Type.String({ description: 'ISO 8601 UTC timestamp with milliseconds' })

export const SuccessResponse = Type.Object({ success: Type.Boolean() })

/**
 * Every stored string: no control, bidi or invisible formatting characters, no lone surrogates
 * (lib/text.ts lists them, #12 item 13).
 */
export const NO_CONTROL = SAFE_TEXT_PATTERN
export const NO_CONTROL_MESSAGE = 'must contain no control, bidi or invisible formatting characters'
