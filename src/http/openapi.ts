import swagger from '@fastify/swagger'
import type { RouteOptions } from 'fastify'
import type { App } from './types'
import { version } from '../../package.json'

/** The document's tags, each with the section of the API guide (src/docs/api-guide.md) that explains its routes. */
export const API_TAGS: readonly { name: string; description: string; guide: { title: string; anchor: string } }[] = [
  { name: 'health', description: 'Probes, no authentication', guide: { title: 'Health', anchor: 'health' } },
  { name: 'admin', description: 'Tenants, with the admin key', guide: { title: 'Admin', anchor: 'admin' } },
  { name: 'tenant', description: 'The calling tenant', guide: { title: 'Tenant', anchor: 'tenant' } },
  {
    name: 'upload',
    description: 'Two-step upload: handshake, then PUT of the content',
    guide: { title: 'Uploading: handshake, then PUT', anchor: 'uploading-handshake-then-put' },
  },
  { name: 'files', description: 'Listing, metadata, download, signed URLs, deletion', guide: { title: 'Files', anchor: 'files' } },
  { name: 'workspaces', description: "Partitions of a tenant's files, with quotas", guide: { title: 'Workspaces', anchor: 'workspaces' } },
  { name: 'webhooks', description: "The calling tenant's webhook deliveries", guide: { title: 'Webhooks', anchor: 'webhooks' } },
]

/** How a route authenticates, named in the document's `security` (OpenAPI 3.1, section 4.8.30). */
export type SecurityScheme = 'tenantKey' | 'adminKey' | 'signedToken'

/**
 * Registers @fastify/swagger, which collects every route's TypeBox schemas as they are added,
 * and serves the generated OpenAPI 3.1 document at `GET /openapi.json`. Generated, not written by
 * hand, so the document cannot drift from what the routes validate and serialize. Must run before
 * any route is registered: routes added earlier are not seen.
 */
export async function registerOpenApi(app: App): Promise<void> {
  await app.register(swagger, {
    openapi: {
      // 3.1 is JSON Schema 2020-12: nullable fields (`type: ["string", "null"]`) mean what they say.
      openapi: '3.1.0',
      info: {
        title: 'Coffer',
        version,
        description: 'Self-hosted multi-tenant file storage. Errors are `{"error": {"code", "message", "details"}}`.',
      },
      components: {
        securitySchemes: {
          tenantKey: { type: 'http', scheme: 'bearer', description: 'A tenant API key: `sk_live_…` (or `sk_test_…` in ephemeral mode)' },
          adminKey: { type: 'http', scheme: 'bearer', description: 'The COFFER_ADMIN_API_KEY' },
          signedToken: {
            type: 'apiKey',
            in: 'query',
            name: 'token',
            description: 'With `expires`: the token of a presigned upload path or of a signed download URL',
          },
        },
      },
      // Each tag's guide (src/docs/api-guide.md), as the server serves it: relative to /openapi.json
      // and to /docs alike, so Swagger UI links to it; the API reference (src/docs/api.md) links the same sections.
      tags: API_TAGS.map(({ name, description, guide }) => ({
        name,
        description,
        externalDocs: { description: guide.title, url: `docs/reference/api-guide#${guide.anchor}` },
      })),
    },
    // Shared schemas (`ErrorResponse`) keep their $id as their name under components.schemas.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}

/**
 * An onRoute hook that documents how the routes of a scope authenticate (any one of `schemes`).
 * The swagger plugin holds the route options object and reads its schema when the document is
 * generated, so setting it here, after the plugin saw the route, is enough.
 */
export function documentSecurity(...schemes: SecurityScheme[]) {
  return (route: RouteOptions): void => {
    route.schema = { ...route.schema, security: schemes.map((s) => ({ [s]: [] })) }
  }
}
