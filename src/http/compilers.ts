import type { FastifySchemaCompiler } from 'fastify'
import { validatorCompiler } from './validation'

/**
 * The schema compilers both fronts' Fastify instances are made with (`schemaController`), so that
 * Fastify requires neither of its defaults at construction: @fastify/ajv-compiler (ajv, ajv-formats,
 * fast-uri) and @fastify/fast-json-stringify-compiler (fast-json-stringify, ajv again, and its
 * standalone validator of JSON schemas). Evaluating them was CPU that every start paid and an idle
 * CI fixture never uses (#28); they are loaded by the first request that validates a body or
 * serializes a response with a schema.
 */

/** Every route's validator is validation.ts's, compiled on its route's first request. */
const buildValidator = (): FastifySchemaCompiler<unknown> => validatorCompiler

/**
 * Fastify's default serializers (fast-json-stringify), each compiled on its route's first response
 * instead of at start-up: compiling them all was a sixth of the cold start's CPU time (#7). The
 * compiler's module itself is required then too.
 */
const buildSerializer = (externalSchemas: unknown, options: unknown) => {
  let compile: ((route: unknown) => (doc: unknown) => string) | undefined
  return (route: unknown) => {
    let serialize: ((doc: unknown) => string) | undefined
    return (doc: unknown) => {
      if (!serialize) {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        compile ??= (require('@fastify/fast-json-stringify-compiler') as typeof import('@fastify/fast-json-stringify-compiler')).SerializerSelector()(
          externalSchemas,
          options as never,
        ) as (route: unknown) => (doc: unknown) => string
        serialize = compile(route)
      }
      return serialize(doc)
    }
  }
}

export const compilersFactory = { buildValidator, buildSerializer } as never
