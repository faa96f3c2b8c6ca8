import { Type } from '@sinclair/typebox'
import type { FastifyReply } from 'fastify'
import type { App } from '../types'
import { AppError } from '../../errors'

/** The web console's files, built by scripts/build-console.mjs: its page and its hashed assets. */
export interface ConsoleAssets {
  html: string
  /** By file name (`app-<hash>.js`, `app-<hash>.css`): the MIME type and the text. */
  files: Record<string, { type: string; body: string }>
}

// Set by scripts/build.mjs (esbuild `define`), so the executable carries the console with no loose
// files; absent when the sources run unbundled (tests that build an app in-process).
declare const __COFFER_CONSOLE__: ConsoleAssets | undefined

/** The console compiled into this bundle, if any. */
export function bundledConsole(): ConsoleAssets | undefined {
  return typeof __COFFER_CONSOLE__ === 'undefined' ? undefined : __COFFER_CONSOLE__
}

/**
 * The page's policy: its own script and styles only, nothing inline, no framing by other sites.
 * `blob:` images and frames are the previews, fetched with the Bearer key and shown from memory
 * (the download endpoint's `sandbox` CSP stops none of that, and no key goes into a URL).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "img-src 'self' blob:",
  'frame-src blob:',
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

/** `GET /console` and its assets, and `/` sends a browser there. Not part of the API document. */
export async function consoleRoutes(app: App, assets: ConsoleAssets): Promise<void> {
  const files = new Map(Object.entries(assets.files).map(([name, f]) => [name, { type: f.type, body: Buffer.from(f.body) }]))
  const page = Buffer.from(assets.html)

  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/console', 302))

  const sendPage = async (_request: unknown, reply: FastifyReply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', CONSOLE_CSP)
      .header('x-frame-options', 'DENY')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      // The page names its assets by content hash: it must be revalidated, they never need to be.
      .header('cache-control', 'no-cache')
      .send(page)
  app.get('/console', { schema: { hide: true } }, sendPage)
  app.get('/console/', { schema: { hide: true } }, sendPage)

  app.get('/console/assets/:name', { schema: { hide: true, params: Type.Object({ name: Type.String({ maxLength: 200 }) }) } }, async (request, reply) => {
    const file = files.get(request.params.name)
    if (!file) throw new AppError('NOT_FOUND', 'No such console asset')
    return reply.type(file.type).header('x-content-type-options', 'nosniff').header('cache-control', 'public, max-age=31536000, immutable').send(file.body)
  })
}
