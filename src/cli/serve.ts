import type { Logger } from 'pino'
import { buildApp } from '../app'
import type { Config } from '../config'
import { createCore, type Core } from '../core'
import { emptyTmp } from '../lib/data-dir'
import type { App } from '../http/types'
import { Periodic } from '../lib/periodic'

export const SERVE_HELP = `Usage: coffer serve [--port PORT] [--host HOST] [--data-dir DIR] [--log-level LEVEL]

Runs the HTTP API. Flags override COFFER_* environment variables (see coffer --help).`

/** A running server. close() stops accepting, drains in-flight requests and closes the database. */
export interface Server {
  url: string
  app: App
  core: Core
  close(): Promise<void>
}

export async function startServer(config: Config, logger: Logger): Promise<Server> {
  const core = createCore(config)
  const leftovers = emptyTmp(core.dataDir)
  if (leftovers > 0) logger.info({ removed: leftovers }, 'removed partial uploads left by a previous run')
  core.metrics.collectProcessMetrics()
  const app = await buildApp(core, { logger })
  const tasks = [
    new Periodic('sweep-expired-uploads', 30_000, () => {
      const swept = core.uploads.sweepExpired()
      if (swept > 0) logger.info({ swept }, 'abandoned uploads marked failed')
    }, logger),
    new Periodic('gc', 10 * 60_000, () => {
      const r = core.gc.collect()
      if (r.filesPurged + r.blobsRemoved > 0) logger.info(r, 'garbage collected')
    }, logger),
  ]
  let closing: Promise<void> | undefined
  const close = () =>
    (closing ??= (async () => {
      await Promise.all(tasks.map((t) => t.stop()))
      await app.close()
      core.close()
    })())
  logger.info({ dataDir: config.dataDir }, 'coffer starting')
  try {
    await app.listen({ port: config.port, host: config.host, listenTextResolver: (address) => `coffer listening on ${address}` })
  } catch (err) {
    await close()
    throw err
  }
  for (const t of tasks) t.start()
  const addr = app.server.address()
  const port = typeof addr === 'object' && addr ? addr.port : config.port
  const host = config.host.includes(':') ? `[${config.host}]` : config.host
  const url = `http://${host}:${port}`
  if (config.adminApiKey === undefined) {
    logger.warn(
      `admin API disabled: set COFFER_ADMIN_API_KEY (at least 16 characters) to enable it, ` +
        `or create a tenant offline with: coffer tenant create --name NAME --data-dir ${config.dataDir}`,
    )
  }
  return { url, app, core, close }
}
