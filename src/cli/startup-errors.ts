import os from 'node:os'
import { SchemaTooNewError } from '../db/database'
import { SecretMismatchError } from '../services/server-secret'
import type { ListenError } from '../server'

/**
 * A problem the person running the command can fix (a missing data dir, a port in use, a
 * directory it cannot write): printed as one line naming the problem and the setting, exit code 2,
 * no stack trace.
 */
export class OperatorError extends Error {
  override name = 'OperatorError'
}

/**
 * Turns the errors a person can fix (a port in use, a directory they cannot write, a database
 * from a newer version) into one line naming the problem and the setting to change (#13). The
 * original error rides along as `cause` for the debug log. Anything else is returned unchanged.
 */

const DESCRIBE: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  ENOTDIR: 'a part of the path is a file, not a directory',
  EEXIST: 'a file is in the way',
  ENOENT: 'no such file or directory',
  SQLITE_READONLY: 'the database is read-only',
  SQLITE_CANTOPEN: 'the database cannot be opened',
  SQLITE_FULL: 'no space left on the device',
  SQLITE_NOTADB: 'coffer.db is not a database',
}

/** The user the process runs as, for "a directory <user> can write". */
export function userName(): string {
  try {
    return os.userInfo().username
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`
  }
}

function codeOf(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  return typeof code === 'string' ? code.replace(/^(SQLITE_[A-Z]+)_.*$/, '$1') : undefined
}

const withCause = (message: string, cause: unknown) => new OperatorError(message, { cause })

/** Each listener's setting, and its default port. */
const LISTENERS = {
  API: { setting: '--port or COFFER_PORT', defaultPort: 8080, free: '0 picks one' },
  S3: { setting: '--s3-port or COFFER_S3_PORT', defaultPort: 9000, free: '0 picks one, off turns the S3 API off' },
} as const

/**
 * Errors of listening, naming the listener (`serve` opens two: the API and the S3 front), its
 * port and the setting that moves it (#24).
 */
export function explainListen(err: ListenError, host: string): unknown {
  const { listener, port } = err
  const { setting, defaultPort, free } = LISTENERS[listener]
  switch (codeOf(err.cause)) {
    case 'EADDRINUSE':
      return withCause(`the ${listener} port ${port} on ${host} is already in use (another coffer?): set ${setting} to a free port (${free})`, err)
    case 'EACCES':
      return withCause(
        `permission denied listening on ${host}:${port} (the ${listener} port${port < 1024 ? '; ports below 1024 need root or CAP_NET_BIND_SERVICE' : ''}): set ${setting} (the default is ${defaultPort})`,
        err,
      )
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return withCause(
        `cannot listen on ${host}: no such address on this machine: set --host or COFFER_HOST (127.0.0.1 for this machine only, 0.0.0.0 for all)`,
        err,
      )
    default:
      return err
  }
}

/** Errors of opening (or creating) the data dir, its database and its secret. */
export function explainDataDir(err: unknown, dataDir: string): unknown {
  if (err instanceof SchemaTooNewError) {
    return withCause(
      `the database in ${dataDir} was written by a newer coffer (schema ${err.found}; this one knows up to ${err.known}): run that newer version, or set --data-dir or COFFER_DATA_DIR to another data dir`,
      err,
    )
  }
  // Already the one line to act on (set COFFER_SECRET), nothing of the data dir's to add (#30).
  if (err instanceof SecretMismatchError) return withCause(err.message, err)
  const code = codeOf(err)
  if (code === undefined || !(code in DESCRIBE)) return err
  const where = (err as NodeJS.ErrnoException).path ?? dataDir
  return withCause(
    `cannot use the data dir ${dataDir}: ${DESCRIBE[code]} (${where}): set --data-dir or COFFER_DATA_DIR to a directory ${userName()} can write`,
    err,
  )
}

/** Errors of creating the ephemeral data dir under TMPDIR. */
export function explainTmp(err: unknown, tmpdir: string): unknown {
  const code = codeOf(err)
  if (code === undefined || !(code in DESCRIBE)) return err
  return withCause(`cannot create a temporary data dir in ${tmpdir}: ${DESCRIBE[code]}: set TMPDIR to a directory ${userName()} can write`, err)
}
