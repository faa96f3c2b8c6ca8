import fs from 'node:fs'
import path from 'node:path'
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { loadConfig } from '../config'
import { createCore, type Core } from '../core'
import { AppError } from '../errors'
import { explainDataDir, OperatorError, userName } from './startup-errors'
import { shellWord } from '../lib/shell-word'

/** What a CLI command may touch: its environment and two output streams. */
export interface CliIO {
  env: Record<string, string | undefined>
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
}

/** A usage mistake: printed as one line with a pointer to --help; exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError'
}

export { OperatorError }

export function parse<O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O, positionals = 0) {
  try {
    const parsed = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: positionals > 0, strict: true })
    if (parsed.positionals.length > positionals) throw new UsageError(`unexpected argument: ${parsed.positionals[positionals]}`)
    return parsed
  } catch (err) {
    if (err instanceof UsageError) throw err
    throw new UsageError((err as Error).message.split('\n')[0] ?? 'invalid arguments')
  }
}

export const DATA_DIR_OPTION = { 'data-dir': { type: 'string' } } as const

export function println(stream: NodeJS.WritableStream, text = ''): void {
  stream.write(`${text}\n`)
}

/**
 * Runs `fn` on a core opened on the configured data dir and closes it after. `fn` returns the exit
 * code (0 when it returns nothing); a contract error becomes one line on stderr and exit code 1.
 */
export async function withCore(
  io: CliIO,
  dataDir: string | undefined,
  fn: (core: Core) => void | number | Promise<void | number>,
  /** Settings given as flags to the command (`tenant --file-types`), over the environment's. */
  flags: Record<string, string | undefined> = {},
): Promise<number> {
  const given = Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined))
  const config = loadConfig(io.env, dataDir === undefined ? given : { ...given, 'data-dir': dataDir })
  assertDataDir(config.dataDir, config.databaseUrl !== undefined)
  let core: Core
  try {
    core = createCore(config)
  } catch (err) {
    throw explainDataDir(err, config.dataDir)
  }
  try {
    return (await fn(core)) ?? 0
  } catch (err) {
    if (err instanceof AppError) {
      println(io.stderr, `coffer: ${err.message}`)
      return 1
    }
    throw err
  } finally {
    core.close()
  }
}

/**
 * Only `serve` creates a data dir (#13): every other command works on an existing one, and a
 * mistyped path fails here, before anything is created. A data dir this user may not enter or
 * read says so, with the path and who may, rather than seeming empty (a service's data dir is
 * its user's, 0700).
 */
export function assertDataDir(dataDir: string, postgres = false): void {
  const dir = statOrDenied(dataDir, dataDir)
  if (!dir) {
    throw new OperatorError(
      `data dir ${dataDir} does not exist: set --data-dir or COFFER_DATA_DIR to the directory coffer serve uses (only coffer serve creates one)`,
    )
  }
  // On PostgreSQL (#30) the metadata is not in the data dir: its blobs and secret are.
  if (postgres) return
  const db = path.join(dataDir, 'coffer.db')
  if (!statOrDenied(db, dataDir, dir)) {
    throw new OperatorError(`${dataDir} holds no Coffer data (no coffer.db): set --data-dir or COFFER_DATA_DIR to the directory coffer serve uses`)
  }
  try {
    // SQLite opens it to read and write (its WAL is written by readers too).
    fs.accessSync(db, fs.constants.R_OK | fs.constants.W_OK)
  } catch (err) {
    if (!isDenied(err)) throw err
    throw permissionDenied(db, dataDir, dir)
  }
}

const isDenied = (err: unknown) => ['EACCES', 'EPERM'].includes((err as NodeJS.ErrnoException).code ?? '')

/** `file`'s stat, undefined when it does not exist, and a permission error when this user may not look. */
function statOrDenied(file: string, dataDir: string, dir?: fs.Stats): fs.Stats | undefined {
  try {
    return fs.statSync(file, { throwIfNoEntry: false })
  } catch (err) {
    if (isDenied(err)) throw permissionDenied(file, dataDir, dir)
    throw err
  }
}

/** "permission denied" with the path, this user, and the user who owns the data dir (whom to run the command as). */
function permissionDenied(file: string, dataDir: string, dir: fs.Stats | undefined): OperatorError {
  const owner = dir ? userOf(dir.uid) : undefined
  const who = owner ?? 'the user coffer serve runs as'
  return new OperatorError(
    `permission denied: ${userName()} cannot read ${file} (the data dir ${dataDir}${owner ? ` belongs to ${owner}` : ''}): run the command as ${who}, ` +
      `e.g. sudo -u ${owner ?? 'coffer'} coffer … --data-dir ${shellWord(dataDir)}`,
  )
}

/** The name of the user `uid` (from /etc/passwd), or undefined. */
function userOf(uid: number): string | undefined {
  try {
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const [name, , id] = line.split(':')
      if (name && Number(id) === uid) return name
    }
  } catch {
    // No passwd file to read (a container): the hint names no one.
  }
  return undefined
}
