import type Ajv from 'ajv'
import type { ErrorObject, ValidateFunction } from 'ajv'
import type { FastifySchemaCompiler } from 'fastify'
import { valueDeeperThan } from '../lib/json-depth'
import { isSafeJson } from '../lib/text'

/**
 * Two validators: JSON bodies are checked strictly (a string "5" is not the number 5, unknown
 * fields are errors), while query strings, params and headers arrive as text and are coerced.
 */
function makeAjv(coerceTypes: boolean | 'array'): Ajv {
  // Required here, by the first validation: an idle server never evaluates ajv (compilers.ts, #28).
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { default: AjvClass } = require('ajv') as typeof import('ajv')
  const { default: addFormats } = require('ajv-formats') as typeof import('ajv-formats')
  /* eslint-enable @typescript-eslint/no-require-imports */
  const ajv = new AjvClass({
    coerceTypes,
    useDefaults: true,
    removeAdditional: false,
    allErrors: true,
    verbose: true,
    strict: false,
    // The route schemas are fixed at build time and every route is exercised by the tests; checking
    // each against the JSON Schema meta-schema at every start (compiling that meta-schema first)
    // cost ~60 ms of CPU per start, a sixth of the single executable's cold start.
    validateSchema: false,
  })
  addFormats(ajv)
  // Annotation only: a human message for a schema whose generic ajv message would be cryptic.
  ajv.addKeyword({ keyword: 'x-message', schemaType: 'string' })
  // Free-form JSON fields (workspace metadata): bounded depth and serialized size (#12 item 5).
  // The depth is walked without recursion and checked first, so the size can then be measured.
  const freeJson = function (schema: { maxDepth: number; maxBytes: number }, data: unknown): boolean {
    const fail = (message: string) => ((freeJson.errors = [{ keyword: 'x-free-json', message, params: {} }]), false)
    if (valueDeeperThan(data, schema.maxDepth)) return fail(`must nest at most ${schema.maxDepth} levels`)
    if (Buffer.byteLength(JSON.stringify(data) ?? '') > schema.maxBytes) return fail(`must be at most ${schema.maxBytes} bytes as JSON`)
    if (!isSafeJson(data)) return fail('must contain no control, bidi or invisible formatting characters in its keys and strings')
    return true
  } as ((schema: { maxDepth: number; maxBytes: number }, data: unknown) => boolean) & { errors?: Partial<ErrorObject>[] }
  ajv.addKeyword({ keyword: 'x-free-json', schemaType: 'object', errors: true, validate: freeJson })
  return ajv
}

// Made on the first validation, not at start-up (they showed in a start-up CPU profile), and
// /health validates nothing.
let bodyAjv: Ajv | undefined
let textAjv: Ajv | undefined

/**
 * Compiles each route's validator on its first use rather than at start-up: ajv's code generation
 * for every route schema was a quarter of the cold start's CPU time (#7). A route pays it once,
 * a few milliseconds, on its first request; /health answers before any of it.
 */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  let compiled: ValidateFunction | undefined
  // Fastify reads `errors` off the function it was given, as from an ajv validator.
  const validate = (data: unknown): boolean => {
    compiled ??= (httpPart === 'body' ? (bodyAjv ??= makeAjv(false)) : (textAjv ??= makeAjv('array'))).compile(schema as object)
    const ok = compiled(data)
    validate.errors = compiled.errors
    return ok
  }
  validate.errors = null as ValidateFunction['errors']
  return validate
}

const PART_PREFIX: Record<string, string> = { body: '', querystring: '/query', params: '/params', headers: '/headers' }

/** ajv errors → the contract's `[{ path, message }]`, `path` a JSON pointer. */
export function formatValidationErrors(errors: ErrorObject[], context: string | undefined): { path: string; message: string }[] {
  const prefix = PART_PREFIX[context ?? 'body'] ?? ''
  const seen = new Set<string>()
  const out: { path: string; message: string }[] = []
  // A value that failed a union (`object or null`) on a specific rule of the branch whose type it
  // has is reported by that rule alone, not also as "must be null".
  const unions = new Set(errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath))
  const specific = new Set(errors.filter((e) => e.keyword !== 'type' && e.keyword !== 'anyOf').map((e) => e.instancePath))
  for (const e of errors) {
    if (e.keyword === 'type' && unions.has(e.instancePath) && specific.has(e.instancePath)) continue
    let path = e.instancePath
    let message: string
    const parent: Record<string, unknown> | undefined = e.parentSchema
    const custom = parent?.['x-message']
    switch (e.keyword) {
      case 'required':
        path += `/${(e.params as { missingProperty: string }).missingProperty}`
        message = 'is required'
        break
      case 'additionalProperties':
        path += `/${(e.params as { additionalProperty: string }).additionalProperty}`
        message = 'is not a known field'
        break
      case 'enum':
        message = `must be one of: ${(e.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`
        break
      case 'format':
        message = typeof custom === 'string' ? custom : `must be a valid ${(e.params as { format: string }).format}`
        break
      case 'anyOf':
        // Each branch already reported why it failed; the summary adds nothing.
        if (errors.length > 1) continue
        message = typeof custom === 'string' ? custom : 'has an invalid value'
        break
      default:
        message = (e.keyword === 'pattern' || e.keyword === 'minProperties') && typeof custom === 'string' ? custom : (e.message ?? 'is invalid')
    }
    const full = `${prefix}${path}` || '/'
    const key = `${full}\u0000${message}`
    if (seen.has(key)) continue
    seen.add(key)
    out.push({ path: full, message })
  }
  return out
}
