import { EncryptedBlobStore } from '../blobs/encrypted-blob-store'
import { loadMasterKey } from '../lib/encryption-keys'
import { encryptBlobs } from '../services/encrypt-blobs'
import { rotateMasterKey } from '../services/encryption'
import { DATA_DIR_OPTION, OperatorError, parse, println, UsageError, withCore, type CliIO } from './io'

export const ENCRYPT_HELP = `Usage: coffer encrypt-blobs [--data-dir DIR] [--json]

Seals the content a data dir stored before encryption was turned on (COFFER_ENCRYPTION_KEY_FILE or
COFFER_ENCRYPTION_KEY set for a data dir that has content). Each blob is re-hashed, sealed, and only
then its copy in the clear removed. Resumable: what is sealed already is skipped, so an interrupted
run is simply started again; the server may keep running meanwhile. Once a run finds nothing
missing or corrupt, content in the clear is never read again. Exits 1 when a blob was missing or
corrupt (see coffer verify).`

export const ROTATE_HELP = `Usage: coffer rotate-key --new-key-file FILE [--data-dir DIR]

Wraps the data dir's key under a new master key, in place of the current one (which
COFFER_ENCRYPTION_KEY_FILE or COFFER_ENCRYPTION_KEY names, as for serve). No blob is rewritten:
their keys derive from the data dir's key, which does not change. Stop the server first, then
start it with the new key; the old key no longer opens the data dir (a backup taken before still
needs it). With COFFER_DATABASE_URL the key is in PostgreSQL: stop every node of the database
first (refused while any holds a lease), then start them all with the new key.`

export async function encryptBlobsCommand(args: string[], io: CliIO): Promise<number> {
  const { values } = parse(args, { ...DATA_DIR_OPTION, json: { type: 'boolean' } })
  if (values.help) return (println(io.stdout, ENCRYPT_HELP), 0)
  return withCore(io, values['data-dir'], async (core) => {
    if (!(core.store instanceof EncryptedBlobStore))
      throw new OperatorError('encryption is not configured: set COFFER_ENCRYPTION_KEY_FILE (or COFFER_ENCRYPTION_KEY)')
    const started = Date.now()
    const r = await encryptBlobs({ db: core.db, store: core.store })
    const seconds = (Date.now() - started) / 1000
    if (values.json) println(io.stdout, JSON.stringify({ ...r, seconds }))
    else {
      println(
        io.stdout,
        `encrypt-blobs: ${r.checked} blob(s) checked, ${r.sealed} sealed (${r.bytesSealed} bytes), ${r.present} sealed already, ` +
          `${r.missing.length} missing, ${r.corrupt.length} corrupt, in ${seconds.toFixed(1)} s${r.done ? '; nothing is left in the clear' : ''}`,
      )
    }
    for (const sha of r.missing) println(io.stderr, `coffer: blob ${sha} is recorded but missing`)
    for (const sha of r.corrupt) println(io.stderr, `coffer: blob ${sha} does not hash to its name; left in the clear`)
    return r.done ? 0 : 1
  })
}

export async function rotateKeyCommand(args: string[], io: CliIO): Promise<number> {
  const { values } = parse(args, { ...DATA_DIR_OPTION, 'new-key-file': { type: 'string' } })
  if (values.help) return (println(io.stdout, ROTATE_HELP), 0)
  const file = values['new-key-file']
  if (file === undefined) throw new UsageError('rotate-key needs --new-key-file FILE')
  let next: Buffer | undefined
  try {
    next = loadMasterKey({ encryptionKeyFile: file })
  } catch (err) {
    throw new OperatorError((err as Error).message.replace('COFFER_ENCRYPTION_KEY_FILE', '--new-key-file'), { cause: err })
  }
  return withCore(io, values['data-dir'], (core) => {
    // "Stop the server first", on PostgreSQL: every node of the database (#30). A node still
    // running keeps the old key, and one restarted with it after the rotation cannot start; as
    // migrate-metadata, an unexpired lease shows a server running (or dead less than a lease ago).
    if (core.db.dialect === 'postgres') {
      const live = core.leases.liveHolders()
      if (live.length > 0)
        throw new OperatorError(
          `a server is running on the PostgreSQL database (it holds ${live.length} lease(s), e.g. ${live[0]}): stop every node first, or wait until its leases expire (COFFER_LEASE_SECONDS)`,
        )
    }
    // createCore opened the data dir with the current key: it is the right one.
    const current = loadMasterKey(core.config)
    if (!current) throw new OperatorError('encryption is not configured: set COFFER_ENCRYPTION_KEY_FILE (or COFFER_ENCRYPTION_KEY) to the current master key')
    rotateMasterKey(core.db, current, next!)
    println(io.stdout, 'rotate-key: the data dir key is wrapped under the new master key; start coffer with it')
  })
}
