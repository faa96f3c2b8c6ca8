import fs from 'node:fs'
import path from 'node:path'
import { OperatorError } from './startup-errors'

/**
 * The files a CI fixture writes for its pipeline (#28): `--json-file` (the JSON line) and
 * `--write-env` (NAME=value lines). Both are written whole or not at all (temp file, fsync,
 * rename), mode 0600 since they hold keys, once the instance is ready, so whoever sees one can
 * use everything it names.
 */

/** Characters that stand unquoted both in a GitHub Actions env file and in a shell assignment (no ~, $, quotes, spaces, globs that matter). */
const UNQUOTED = /^[A-Za-z0-9+/=._:@%,[\]-]*$/

/** `NAME=value` lines: `>> "$GITHUB_ENV"` as they are, or `set -a; . FILE; set +a` in a shell. */
export function envLines(vars: Record<string, string | number | undefined>): string {
  let out = ''
  for (const [name, value] of Object.entries(vars)) {
    if (value === undefined) continue
    const text = String(value)
    // Values come from validated settings (keys, URLs); one that would need quoting is refused
    // rather than written in a form one of the two readers would take differently.
    if (!UNQUOTED.test(text)) throw new OperatorError(`--write-env: the value of ${name} has characters an env file cannot hold unquoted`)
    out += `${name}=${text}\n`
  }
  return out
}

/** Checks now, before the server starts, that `file` can be written (its directory exists and is writable). */
export function checkWritable(flag: string, file: string): string {
  const abs = path.resolve(file)
  try {
    fs.accessSync(path.dirname(abs), fs.constants.W_OK)
  } catch (err) {
    throw new OperatorError(`${flag} ${file}: its directory ${path.dirname(abs)} does not exist or cannot be written`, { cause: err })
  }
  if (fs.statSync(abs, { throwIfNoEntry: false })?.isDirectory()) throw new OperatorError(`${flag} ${file}: a directory is in the way`)
  return abs
}

/** Removes a file an earlier run left, so nothing reads it as this run's (it is written again once ready). */
export function removeStale(file: string): void {
  fs.rmSync(file, { force: true })
}

/** Writes `text` to `file` atomically with mode 0600. */
export function writeAtomic(flag: string, file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`
  try {
    const fd = fs.openSync(tmp, 'w', 0o600)
    try {
      fs.writeFileSync(fd, text)
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    fs.renameSync(tmp, file)
  } catch (err) {
    fs.rmSync(tmp, { force: true })
    throw new OperatorError(`cannot write ${flag} ${file}: ${(err as Error).message}`, { cause: err })
  }
}
