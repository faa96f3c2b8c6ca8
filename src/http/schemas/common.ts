import { Type, type TSchema } from '@sinclair/typebox'
import { FILE_TYPES } from '../../lib/file-types'
import { SAFE_TEXT_PATTERN } from '../../lib/text'

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

export const FileTypeSchema = Type.Union(FILE_TYPES.map((t) => Type.Literal(t)), { 'x-message': `must be one of: ${FILE_TYPES.join(', ')}` })

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

/** Error responses every authenticated route can give. */
export function withErrors<T extends Record<number, TSchema>>(ok: T, ...codes: number[]): T & Record<number, TSchema> {
  const out: Record<number, TSchema> = { ...ok }
  for (const c of [400, 401, 500, ...codes]) out[c] = Type.Ref('ErrorResponse')
  return out as T & Record<number, TSchema>
}
