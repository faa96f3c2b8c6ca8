import fs from 'node:fs'
import path from 'node:path'
import docsFiles from './docs-files.json'

/** One static file of the API documentation page. */
export interface DocsAsset {
  type: string
  body: Buffer
}

/** Swagger UI's files that /docs serves, by name, with their media type (JSON: the build reads it too). */
export const DOCS_FILES: Readonly<Record<string, string>> = docsFiles

/**
 * Swagger UI's static files, read from the swagger-ui-dist package. Running from source only: the
 * bundle (scripts/build.mjs) replaces this module with one holding the same files inlined, so the
 * single executable serves /docs with no file beside it and nothing from a CDN (#13).
 */
export function loadDocsAssets(): Record<string, DocsAsset> {
  const dir = path.dirname(require.resolve('swagger-ui-dist/package.json'))
  return Object.fromEntries(Object.entries(DOCS_FILES).map(([name, type]) => [name, { type, body: fs.readFileSync(path.join(dir, name)) }]))
}
