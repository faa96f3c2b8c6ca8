import fs from 'node:fs'
import path from 'node:path'
import { loadConfig } from '../config'
import { METADATA_IN_POSTGRES, backupDataDir } from '../services/backup'
import { assertDataDir, OperatorError, parse, println, UsageError, withCore, type CliIO } from './io'
import { userName } from './startup-errors'

/** Errors of writing DEST that the person can fix (full disk, permissions). */
const WRITE_ERRORS = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOSPC', 'EDQUOT'])

export const BACKUP_HELP = `Usage: coffer backup DEST [--data-dir DIR] [--json]

Writes a consistent copy of the data dir (database snapshot, the blobs it references, the
server secret) into DEST, a directory that must not exist or be empty. The server may keep
running. DEST is a data dir: restore by serving it (coffer serve --data-dir DEST) or moving
it into place. On the data dir's filesystem blobs are hard-linked (fast, no extra space);
elsewhere they are copied. The copy is built in DEST.tmp-<id> and renamed into place when
complete, so a backup cut short is recognisable by that name.
With COFFER_BLOB_STORE=s3 the content stays in the object store: DEST holds the metadata (database
snapshot, secret), whose records refer to the objects in the bucket. With COFFER_DATABASE_URL the
metadata is in PostgreSQL: it refuses; use pg_dump, and copy the data dir's blobs/ and secret.`

export async function backupCommand(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, { 'data-dir': { type: 'string' }, json: { type: 'boolean' } }, 1)
  if (values.help) return (println(io.stdout, BACKUP_HELP), 0)
  if (positionals[0] === undefined) throw new UsageError('backup needs a DEST directory')
  const dest = path.resolve(positionals[0])
  const { dataDir, databaseUrl } = loadConfig(io.env, values['data-dir'] === undefined ? {} : { 'data-dir': values['data-dir'] })
  // Refused before anything is opened: on PostgreSQL a data dir holds no coffer.db, which
  // assertDataDir would report instead of where the metadata is (#30).
  if (databaseUrl !== undefined) throw new OperatorError(METADATA_IN_POSTGRES)
  assertDataDir(dataDir)
  const rel = path.relative(dataDir, dest)
  if (rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel))) throw new UsageError(`DEST ${dest} is inside the data dir ${dataDir}`)
  if (fs.existsSync(dest) && (!fs.statSync(dest).isDirectory() || fs.readdirSync(dest).length > 0)) {
    throw new UsageError(`DEST ${dest} exists and is not an empty directory: back up into a new one`)
  }
  // The copy is built beside DEST and renamed into place: its parent must be writable.
  const parent = path.dirname(dest)
  try {
    fs.mkdirSync(parent, { recursive: true })
    fs.accessSync(parent, fs.constants.W_OK)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    throw new OperatorError(
      `cannot write the backup into ${parent} (${code ?? 'error'}): choose a DEST in a directory this user (${userName()}) can write, or create it for them first`,
    )
  }
  return withCore(io, dataDir, async (core) => {
    if (core.sqlite === undefined) throw new OperatorError(METADATA_IN_POSTGRES)
    const started = Date.now()
    let r: Awaited<ReturnType<typeof backupDataDir>>
    try {
      r = await backupDataDir(core, dest)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code !== undefined && WRITE_ERRORS.has(code))
        throw new OperatorError(`cannot write the backup into ${dest} (${code}): choose a DEST with room that ${userName()} can write`, { cause: err })
      throw err
    }
    const seconds = (Date.now() - started) / 1000
    if (values.json) println(io.stdout, JSON.stringify({ ...r, seconds }))
    else if (r.contentStaysIn !== undefined) {
      println(
        io.stdout,
        `backed up the metadata: ${r.files} file record(s) referring to ${r.blobs} blob(s), ${r.bytes} bytes, to ${r.dest} in ${seconds.toFixed(1)} s. ` +
          `The content stays in the object store (${r.contentStaysIn}) and was not copied: back it up with the store's own tools (bucket versioning, replication).`,
      )
    } else {
      println(
        io.stdout,
        `backed up ${r.files} file record(s) and ${r.blobs} blob(s), ${r.bytes} bytes (${r.linked} hard-linked, ${r.copied} copied, ${r.inline} inside the database) to ${r.dest} in ${seconds.toFixed(1)} s`,
      )
    }
    for (const sha of r.missing) println(io.stderr, `coffer: blob ${sha} is listed in the database but missing from the data dir (coffer verify)`)
    return r.missing.length === 0 ? 0 : 1
  })
}
