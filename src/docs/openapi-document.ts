import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buildApp } from '../app'
import { loadConfig } from '../config'
import { createCore } from '../core'
import { createLogger } from '../lib/logger'
import type { OpenApiDocument } from './reference'

/**
 * The OpenAPI document a server with the default settings generates (GET /openapi.json), from an
 * app built on a throwaway data dir: the routes' schemas are the API reference's source.
 */
export async function openApiDocument(): Promise<OpenApiDocument> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-docs-'))
  try {
    const config = loadConfig({ COFFER_LOG_LEVEL: 'silent', COFFER_DISK_RESERVE_BYTES: '0' }, { 'data-dir': path.join(dir, 'data') })
    const logger = createLogger('silent')
    const core = createCore(config, { log: logger })
    try {
      const app = await buildApp(core, { logger })
      try {
        return (await app.inject({ url: '/openapi.json' })).json<OpenApiDocument>()
      } finally {
        await app.close()
      }
    } finally {
      await core.webhooks.stop()
      core.close()
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
