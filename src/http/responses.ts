import { Type, type TSchema } from '@sinclair/typebox'

/** Error responses every authenticated route can give, plus the route's own `codes`. */
export function withErrors<T extends Record<number, TSchema>>(ok: T, ...codes: number[]): T & Record<number, TSchema> {
  const out: Record<number, TSchema> = { ...ok }
  for (const c of [400, 401, 500, ...codes]) out[c] = Type.Ref('ErrorResponse')
  return out as T & Record<number, TSchema>
}
