import { createHash } from 'node:crypto'
import type { App } from '../types'
import { loadDocsAssets, type DocsAsset } from '../../lib/docs-assets'

/** The page. Paths are relative so that it works behind a reverse proxy that adds a prefix. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Coffer API</title>
<link rel="stylesheet" href="docs/swagger-ui.css">
<link rel="icon" type="image/png" href="docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/init.js"></script>
</body>
</html>
`

/** Loads the generated OpenAPI document of this server (GET /openapi.json). */
const INIT = `window.ui = SwaggerUIBundle({
  url: 'openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
})
`

// Swagger UI sets inline styles and renders the schema's images as data: URLs; everything else
// comes from this server.
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"

/**
 * GET /docs: Swagger UI on the generated OpenAPI document, served from the executable itself
 * (the assets are inlined in the bundle; no CDN). Not part of the documented API.
 */
export async function docsRoutes(app: App): Promise<void> {
  let files: Map<string, DocsAsset & { etag: string }> | undefined
  // Read (or, in the bundle, materialised) at the first request: start-up pays nothing for it.
  const assets = () =>
    (files ??= new Map(
      Object.entries({
        ...loadDocsAssets(),
        'index.html': { type: 'text/html; charset=utf-8', body: Buffer.from(PAGE) },
        'init.js': { type: 'text/javascript; charset=utf-8', body: Buffer.from(INIT) },
      }).map(([name, a]) => [name, { ...a, etag: `"${createHash('sha256').update(a.body).digest('hex').slice(0, 32)}"` }]),
    ))

  const send = (name: string) => async (request: { headers: Record<string, string | string[] | undefined> }, reply: import('fastify').FastifyReply) => {
    const a = assets().get(name)!
    reply
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .header('etag', a.etag)
      .header('cache-control', 'public, max-age=3600')
    if (request.headers['if-none-match'] === a.etag) return reply.code(304).send()
    return reply.type(a.type).send(a.body)
  }

  app.get('/docs', { schema: { hide: true } }, send('index.html'))
  // The page's relative links need the URL without the slash.
  app.get('/docs/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('../docs', 301))
  app.get<{ Params: { name: string } }>('/docs/:name', { schema: { hide: true } }, async (request, reply) => {
    if (!assets().has(request.params.name) || request.params.name === 'index.html') {
      return reply
        .code(404)
        .type('application/json; charset=utf-8')
        .send({ error: { code: 'NOT_FOUND', message: 'Not found', details: {} } })
    }
    return send(request.params.name)(request, reply)
  })
}
