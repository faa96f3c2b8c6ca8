import { configHelp, ConfigError } from './config'
import type { Logger } from 'pino'
import { serveCommand, type ServeProcess } from './cli/serve'
import { tenantCommand } from './cli/tenant'
import { gcCommand, verifyCommand } from './cli/maintenance'
import { webhooksCommand } from './cli/webhooks'
import { backupCommand } from './cli/backup'
import { migrateBlobsCommand } from './cli/migrate-blobs'
import { encryptBlobsCommand, rotateKeyCommand } from './cli/encryption'
import { downloadCommand, lsCommand, rmCommand, uploadCommand } from './cli/files'
import { OperatorError, println, UsageError, type CliIO } from './cli/io'
import { selfCommand } from './cli/self-command'
import { settingsTable } from './cli/settings-table'
import { CLI_COMMANDS, commandLines } from './cli/commands'
import { waitCommand } from './cli/wait'
import { healthCommand } from './cli/health'
import { isWorker, leaveCluster } from './cli/workers'
import { createLogger } from './lib/logger'
import { armCrashPoint } from './lib/crash-points'
import { isSea } from 'node:sea'
import { markStartup } from './lib/startup-trace'
import { version } from '../package.json'

const HELP = `coffer ${version}: multi-tenant file storage in one executable

Usage: coffer <command> [options]

Commands:
${commandLines(CLI_COMMANDS.filter((c) => !c.client))}

Client commands (talk to a running server; --url/--key or COFFER_URL/COFFER_API_KEY):
${commandLines(CLI_COMMANDS.filter((c) => c.client))}

Configuration (flags override environment variables, which override defaults):
${settingsTable(configHelp())}
`

/** The process: the only place that reads argv and env, handles signals and sets the exit code. */
async function main(argv: string[]): Promise<number> {
  const io: CliIO = { env: process.env, stdout: process.stdout, stderr: process.stderr }
  // What ps and top show, instead of node's argv or its main thread's name (serve names its role).
  process.title = 'coffer'
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
    case '-v':
      println(io.stdout, version)
      return 0
    default: {
      const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined
      if (!run) throw new UsageError(`unknown command: ${command}`)
      return run(args, io)
    }
  }
}

/** The subcommands by name; each parses its own arguments (cli/). */
const COMMANDS: Record<string, (args: string[], io: CliIO) => Promise<number>> = {
  serve: (args, io) => serveCommand(args, io, serveProcess),
  tenant: tenantCommand,
  webhooks: webhooksCommand,
  gc: gcCommand,
  verify: verifyCommand,
  backup: backupCommand,
  'migrate-blobs': migrateBlobsCommand,
  // Required when run, as __pg-bridge: no other command or start evaluates the PostgreSQL bridge.
  'migrate-metadata': (args, io) =>
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require('./cli/migrate-metadata') as typeof import('./cli/migrate-metadata')).migrateMetadataCommand(args, io),
  'encrypt-blobs': encryptBlobsCommand,
  'rotate-key': rotateKeyCommand,
  upload: uploadCommand,
  download: downloadCommand,
  ls: lsCommand,
  rm: rmCommand,
  wait: waitCommand,
  health: healthCommand,
  // Hidden (not in HELP), for the tests of the shipped artifacts (cli/pg-bridge.ts, #30). Required
  // when run: nothing of the PostgreSQL bridge is evaluated by any other command or by a start.
  '__pg-bridge': (args, io) =>
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require('./cli/pg-bridge') as typeof import('./cli/pg-bridge')).pgBridgeCommand(args, io, process.stdin),
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
  selfCommand: () => selfCommand({ execPath: process.execPath, script: process.argv[1], isSea: isSea(), pathEnv: process.env.PATH }),
  // The executable runs itself; node runs its flags (--cpu-prof, --import …) and the script again.
  selfInvocation: () =>
    isSea() || process.argv[1] === undefined
      ? { command: process.execPath, args: [] }
      : { command: process.execPath, args: [...process.execArgv, process.argv[1]] },
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

/** `--log-level debug|trace` or COFFER_LOG_LEVEL: the stack of a failure is then logged too. */
function debugging(argv: string[]): boolean {
  const i = argv.findIndex((a) => a === '--log-level' || a.startsWith('--log-level='))
  const level = i < 0 ? process.env.COFFER_LOG_LEVEL : argv[i]!.includes('=') ? argv[i]!.split('=')[1] : argv[i + 1]
  return level === 'debug' || level === 'trace'
}

// Crash tests only: the process kills itself at the named moment (lib/crash-points.ts).
if (process.env.COFFER_TEST_CRASH_AT) armCrashPoint(process.env.COFFER_TEST_CRASH_AT, () => process.kill(process.pid, 'SIGKILL'))

// A worker of `serve --workers N` run by the single executable finds the executable's path once
// more before its arguments: node:cluster passes the script to run first, and the executable,
// which has none to run, keeps it as an argument (#29).
const argv = process.argv.slice(isSea() && isWorker() ? 3 : 2)
markStartup('modules evaluated')
main(argv)
  // A cluster worker whose command ended (a start-up failure included) leaves the cluster, or its
  // IPC channel would keep it alive and the primary waiting.
  .finally(() => leaveCluster())
  .then(
    (code) => {
      process.exitCode = code
    },
    (err: unknown) => {
      // One line for a person; the stack only in the debug log (#13).
      if (debugging(argv)) createLogger('debug', process.stderr).debug({ err: (err as Error)?.cause ?? err }, 'command failed')
      if (err instanceof UsageError || err instanceof ConfigError) {
        process.stderr.write(`coffer: ${err.message} (see coffer --help)\n`)
        process.exitCode = 2
        return
      }
      if (err instanceof OperatorError) {
        process.stderr.write(`coffer: ${err.message}\n`)
        process.exitCode = 2
        return
      }
      const message = (err as Error)?.message ?? String(err)
      process.stderr.write(`coffer: unexpected error: ${message.split('\n')[0]} (COFFER_LOG_LEVEL=debug logs the stack trace)\n`)
      process.exitCode = 1
    },
  )
