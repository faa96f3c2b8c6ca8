import { loadConfig, configHelp, ConfigError } from './config'
import { createLogger } from './lib/logger'
import { startServer, SERVE_HELP } from './cli/serve'
import { tenantCommand } from './cli/tenant'
import { gcCommand, verifyCommand } from './cli/maintenance'
import { webhooksCommand } from './cli/webhooks'
import { parse, println, UsageError, type CliIO } from './cli/io'
import { version } from '../package.json'

const HELP = `coffer ${version}: multi-tenant file storage in one executable

Usage: coffer <command> [options]

Commands:
  serve                    run the HTTP API (coffer serve --help)
  tenant create|list|regenerate-key
                           manage tenants offline on the data dir (coffer tenant --help)
  webhooks list|retry      inspect and re-drive webhook deliveries (coffer webhooks --help)
  gc                       purge deleted files past retention and unreferenced blobs
  verify                   re-hash every blob and report missing or corrupt content
  version                  print the version

Configuration (flags override environment variables, which override defaults):
${configHelp()
  .map((o) => `  ${o.env.padEnd(34)}${(o.flag ?? '').padEnd(13)}${(o.def ?? '').padEnd(10)}${o.help}`)
  .join('\n')}
`

/** The process: the only place that reads argv and env, handles signals and sets the exit code. */
async function main(argv: string[]): Promise<number> {
  const io: CliIO = { env: process.env, stdout: process.stdout, stderr: process.stderr }
  const [command, ...args] = argv
  switch (command) {
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      println(io.stdout, HELP)
      return command === undefined ? 2 : 0
    case 'version':
    case '--version':
      println(io.stdout, version)
      return 0
    case 'serve':
      return serve(args)
    case 'tenant':
      return tenantCommand(args, io)
    case 'webhooks':
      return webhooksCommand(args, io)
    case 'gc':
      return gcCommand(args, io)
    case 'verify':
      return verifyCommand(args, io)
    default:
      throw new UsageError(`unknown command: ${command}`)
  }
}

async function serve(args: string[]): Promise<number> {
  const { values } = parse(args, {
    port: { type: 'string' },
    host: { type: 'string' },
    'data-dir': { type: 'string' },
    'log-level': { type: 'string' },
  })
  const { help, ...flags } = values
  if (help) {
    println(process.stdout, SERVE_HELP)
    return 0
  }
  const config = loadConfig(process.env, flags)
  const logger = createLogger(config.logLevel)
  const server = await startServer(config, logger)
  return new Promise<number>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      logger.info({ signal }, 'shutting down')
      server.close().then(
        () => resolve(0),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed')
          resolve(1)
        },
      )
    }
    process.once('SIGTERM', stop)
    process.once('SIGINT', stop)
  })
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (err: unknown) => {
    if (err instanceof UsageError || err instanceof ConfigError) {
      process.stderr.write(`coffer: ${err.message} (see coffer --help)\n`)
      process.exitCode = 2
      return
    }
    process.stderr.write(`coffer: ${(err as Error)?.stack ?? String(err)}\n`)
    process.exitCode = 1
  },
)
