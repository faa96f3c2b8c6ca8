import { createHash } from 'node:crypto'
import type { App } from '../types'
import { loadDocsAssets, type DocsAsset } from '../../lib/docs-assets'
import { loadReferencePages, REFERENCE_PAGES } from '../../lib/reference-pages'
import { renderPage } from '../reference-html'

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

/** The reference pages' stylesheet: readable text, tables and code, in the light and the dark theme. */
const REFERENCE_CSS = `:root { color-scheme: light dark; --fg: #1f2328; --bg: #ffffff; --muted: #59636e; --line: #d1d9e0; --code: #f6f8fa; --link: #0969da }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --line: #3d444d; --code: #151b23; --link: #4493f8 } }
body { margin: 0; color: var(--fg); background: var(--bg); font: 16px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif }
nav { padding: 0.6rem 1rem; border-bottom: 1px solid var(--line); font-size: 0.95rem }
main { max-width: 60rem; margin: 0 auto; padding: 1rem 1.25rem 4rem }
a { color: var(--link) }
a:focus-visible { outline: 3px solid var(--link); outline-offset: 2px }
h1, h2, h3 { line-height: 1.25; margin-top: 1.6em }
h1, h2 { border-bottom: 1px solid var(--line); padding-bottom: 0.3em }
code, pre { font: 0.875em/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--code); border-radius: 6px }
code { padding: 0.15em 0.35em }
pre { padding: 0.9rem 1rem; overflow-x: auto }
pre code { padding: 0; background: none }
table { border-collapse: collapse; display: block; overflow-x: auto; margin: 1rem 0 }
th, td { border: 1px solid var(--line); padding: 0.35rem 0.7rem; vertical-align: top; text-align: left }
.picture { color: var(--muted) }
`

/** A reference page as a whole document. Paths are relative: it works behind a reverse proxy that adds a prefix. */
function referenceDocument(title: string, body: string): string {
  const esc = title.replace(/&/g, '&amp;').replace(/</g, '&lt;')
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc} · Coffer</title>
<link rel="stylesheet" href="style.css">
</head>
<body>
<nav><a href="./">Coffer documentation</a> · <a href="../../docs">API explorer (Swagger UI)</a></nav>
<main>
${body}</main>
</body>
</html>
`
}

// The reference pages are the repository's Markdown rendered on the server: no script at all.
const REFERENCE_CSP =
  "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/**
 * The reference pages (the README and src/docs/, rendered from their Markdown at the first
 * request) and their index, by name: `index` for GET /docs/reference/, `style.css`, each page.
 */
function referenceAssets(): Map<string, DocsAsset> {
  const markdown = loadReferencePages()
  const out = new Map<string, DocsAsset>()
  const titles: [string, string][] = []
  for (const [name, file] of Object.entries(REFERENCE_PAGES)) {
    const page = renderPage(file, markdown[name]!)
    titles.push([name, page.title])
    out.set(name, { type: 'text/html; charset=utf-8', body: Buffer.from(referenceDocument(page.title, page.html)) })
  }
  const list = titles.map(([name, title]) => `<li><a href="${name}">${title.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</a></li>`).join('\n')
  const index = `<h1 id="coffer-documentation">Coffer documentation</h1>
<p>The guide (the repository's README) and the reference pages, as this server's version has them.
The routes of the API, with every field, are also in the <a href="../../docs">API explorer</a> and at <a href="../../openapi.json">/openapi.json</a>.</p>
<ul>
${list}
</ul>
`
  out.set('index', { type: 'text/html; charset=utf-8', body: Buffer.from(referenceDocument('Coffer documentation', index)) })
  out.set('style.css', { type: 'text/css; charset=utf-8', body: Buffer.from(REFERENCE_CSS) })
  return out
}

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

  let reference: Map<string, DocsAsset & { etag: string }> | undefined
  // Rendered at the first request for a page: start-up pays nothing for them.
  const referencePages = () =>
    (reference ??= new Map(
      [...referenceAssets()].map(([name, a]) => [name, { ...a, etag: `"${createHash('sha256').update(a.body).digest('hex').slice(0, 32)}"` }]),
    ))

  const sendAsset =
    (a: DocsAsset & { etag: string }, csp: string) =>
    (request: { headers: Record<string, string | string[] | undefined> }, reply: import('fastify').FastifyReply) => {
      reply
        .header('content-security-policy', csp)
        .header('x-content-type-options', 'nosniff')
        .header('etag', a.etag)
        .header('cache-control', 'public, max-age=3600')
      if (request.headers['if-none-match'] === a.etag) return reply.code(304).send()
      return reply.type(a.type).send(a.body)
    }
  const send = (name: string) => async (request: { headers: Record<string, string | string[] | undefined> }, reply: import('fastify').FastifyReply) =>
    sendAsset(assets().get(name)!, CSP)(request, reply)
  const notFound = (reply: import('fastify').FastifyReply) =>
    reply
      .code(404)
      .type('application/json; charset=utf-8')
      .send({ error: { code: 'NOT_FOUND', message: 'Not found', details: {} } })

  app.get('/docs', { schema: { hide: true } }, send('index.html'))
  // The page's relative links need the URL without the slash.
  app.get('/docs/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('../docs', 301))
  app.get<{ Params: { name: string } }>('/docs/:name', { schema: { hide: true } }, async (request, reply) => {
    if (!assets().has(request.params.name) || request.params.name === 'index.html') return notFound(reply)
    return send(request.params.name)(request, reply)
  })

  // The reference pages: the index at /docs/reference/, so that its relative links and the pages' reach each other.
  app.get('/docs/reference', { schema: { hide: true } }, async (_request, reply) => reply.redirect('reference/', 301))
  app.get('/docs/reference/', { schema: { hide: true } }, async (request, reply) => sendAsset(referencePages().get('index')!, REFERENCE_CSP)(request, reply))
  app.get<{ Params: { page: string } }>('/docs/reference/:page', { schema: { hide: true } }, async (request, reply) => {
    const a = request.params.page === 'index' ? undefined : referencePages().get(request.params.page)
    if (a === undefined) return notFound(reply)
    return sendAsset(a, REFERENCE_CSP)(request, reply)
  })
}
