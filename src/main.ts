import { configHelp, ConfigError } from './config'
import type { Logger } from 'pino'
import { serveCommand, type ServeProcess } from './cli/serve'
import { tenantCommand } from './cli/tenant'
import { gcCommand, verifyCommand } from './cli/maintenance'
import { webhooksCommand } from './cli/webhooks'
import { backupCommand } from './cli/backup'
import { migrateBlobsCommand } from './cli/migrate-blobs'
import { println, UsageError, type CliIO } from './cli/io'
import { version } from '../package.json'

const HELP = `coffer ${version}: multi-tenant file storage in one executable

Usage: coffer <command> [options]

Commands:
  serve                    run the HTTP API (coffer serve --help)
  tenant create|list|regenerate-key
                           manage tenants offline on the data dir (coffer tenant --help)
  webhooks list|retry      inspect and re-drive webhook deliveries (coffer webhooks --help)
  gc                       purge deleted files past retention and unreferenced blobs
  verify                   check every blob and report missing or corrupt content (--read-data on S3)
  backup DEST              consistent online copy of the data dir into DEST (coffer backup --help)
  migrate-blobs --to s3|disk
                           copy the content between the data dir and S3 storage (coffer migrate-blobs --help)
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
      return serveCommand(args, io, serveProcess)
    case 'tenant':
      return tenantCommand(args, io)
    case 'webhooks':
      return webhooksCommand(args, io)
    case 'gc':
      return gcCommand(args, io)
    case 'verify':
      return verifyCommand(args, io)
    case 'backup':
      return backupCommand(args, io)
    case 'migrate-blobs':
      return migrateBlobsCommand(args, io)
    default:
      throw new UsageError(`unknown command: ${command}`)
  }
}

/** Signals that shut the server down: SIGTERM (systemd, CI runners), SIGINT (Ctrl-C), SIGHUP (terminal closed). */
const STOP_SIGNALS: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP']

const serveProcess: ServeProcess = {
  waitForStop: (logger: Logger) =>
    new Promise<string>((resolve) => {
      let received = false
      const onSignal = (signal: NodeJS.Signals) => {
        if (!received) {
          received = true
          return resolve(signal)
        }
        logger.warn({ signal }, 'second signal: exiting without waiting for in-flight requests')
        process.exit(1)
      }
      for (const s of STOP_SIGNALS) process.on(s, onSignal)
    }),
  onExit: (fn) => process.once('exit', fn),
}

/**
 * A reader that goes away (`coffer verify | head -1`) makes the next write fail with EPIPE: that
 * ends the output, not the process with a stack trace (#12 item 16). Nothing more is written to
 * that stream; the command finishes and exits with its own code.
 */
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') return
    throw err
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
