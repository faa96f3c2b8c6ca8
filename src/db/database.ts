import fs from 'node:fs'
import Database from 'better-sqlite3'
import { MIGRATIONS, type Migration } from './migrations'
import { loadSqliteAddon } from './sqlite-addon'
import { isFileName, nameKey, toFileName } from '../lib/text'
import { publishFileSync } from '../lib/durable'

export type DB = Database.Database

/** The database was migrated by a newer Coffer than this one: opening it could corrupt it. */
export class SchemaTooNewError extends Error {
  override name = 'SchemaTooNewError'
  constructor(
    readonly found: number,
    readonly known: number,
  ) {
    super(`database schema version ${found} is newer than this build knows (${known}); upgrade coffer`)
  }
}

let addon: object | undefined
let addonLoaded = false

/**
 * Opens (creating if needed) the SQLite database at `file` and brings its schema up to date.
 * `dataDir` is where the single executable may unpack its SQLite addon. `opts.image`, the schema
 * image of `migrations` (schema-image.ts), or what makes it (called only for a database that does
 * not exist yet), is what a database that does not exist yet starts as.
 */
export function openDatabase(
  file: string,
  dataDir: string,
  migrations: readonly Migration[] = MIGRATIONS,
  opts: { throwaway?: boolean; image?: Uint8Array | (() => Uint8Array | undefined) } = {},
): DB {
  const fromImage = opts.image !== undefined && startFromImage(file, opts.image, opts.throwaway === true)
  keepPrivate(file)
  const db = openConnection(file, dataDir, {}, opts)
  // WAL: readers never block the writer and the writer never blocks readers; one fsync per commit.
  db.pragma('journal_mode = WAL')
  // FULL: in WAL mode every COMMIT fsyncs the WAL before returning, so a row we acknowledged
  // (an upload's 200, a tenant's 201) survives a crash or power loss. NORMAL could lose the
  // last transactions on power loss, which would break "nothing acknowledged is ever lost".
  // The upload path's commits use NORMAL and wait for a shared WAL flush instead (group-commit.ts).
  // A throwaway database (`serve --ephemeral`, removed when the process ends, never reopened after
  // a crash) has nothing to keep across a power loss: OFF spares its start the migrations' fifteen
  // WAL fsyncs, 60-100 ms on a busy disk of the 150 ms a CI fixture may take to answer (#28).
  db.pragma(opts.throwaway ? 'synchronous = OFF' : 'synchronous = FULL')
  // Statement journals (the undo of a savepoint or of a statement that fails halfway) in memory:
  // as files, each write transaction opened an O_TMPFILE and a group commit's batch (one savepoint
  // per transaction, group-commit.ts) wrote ~25 pages of it per upload, two syscalls a page, on the
  // event loop (#29). They live for one transaction; temporary tables Coffer makes none of.
  db.pragma('temp_store = MEMORY')
  // SQLite leaves foreign keys off by default; tenant/workspace/blob references must hold.
  db.pragma('foreign_keys = ON')
  // The CLI may write while the server runs: wait for the lock instead of failing with SQLITE_BUSY.
  db.pragma('busy_timeout = 5000')
  addFunctions(db)
  // An image records no time (schema-image.ts): its migrations were applied now, as far as anyone asks.
  if (fromImage) db.prepare('UPDATE schema_migrations SET applied_at = ? WHERE applied_at = 0').run(Date.now())
  migrate(db, migrations)
  return db
}

/** The SQL functions the migrations call. */
export function addFunctions(db: DB): void {
  // For migration 5, which fills tenants.name_key for rows written before it.
  db.function('coffer_name_key', { deterministic: true }, (name: unknown) => nameKey(String(name)))
  // For migration 12, which renames files whose name the handshake would refuse (#24).
  db.function('coffer_is_file_name', { deterministic: true }, (name: unknown) => (isFileName(String(name)) ? 1 : 0))
  db.function('coffer_file_name', { deterministic: true }, (path: unknown, id: unknown) => toFileName(String(path), String(id)))
}

/**
 * A database that does not exist yet starts as the schema image (schema-image.ts, #28) instead of
 * an empty file: the image is a complete SQLite file, written whole before SQLite opens it. Never
 * over an existing database, nor beside a journal or WAL file an earlier run left (SQLite would
 * read it as part of the database). A throwaway data dir is this process's alone and is not
 * synced; any other is published with link(2) after an fsync, so that a second process creating
 * the same database at once (a CLI command on a new data dir) never sees half a file, and the
 * first one wins. Returns whether this call created the database.
 */
function startFromImage(file: string, imageOf: Uint8Array | (() => Uint8Array | undefined), throwaway: boolean): boolean {
  if ([file, ...COMPANIONS.map((suffix) => file + suffix)].some((f) => fs.existsSync(f))) return false
  const made = typeof imageOf === 'function' ? imageOf() : imageOf
  if (made === undefined) return false
  const image = inWalMode(made)
  if (!throwaway) return publishFileSync(file, image, { mode: 0o600, exclusive: true })
  let fd: number
  try {
    fd = fs.openSync(file, 'wx', 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw err
  }
  try {
    for (let off = 0; off < image.length;) off += fs.writeSync(fd, image, off, image.length - off)
  } catch (err) {
    // Half an image is no database: gone, so that the error is the write's (ENOSPC), not SQLite's.
    fs.rmSync(file, { force: true })
    throw err
  } finally {
    fs.closeSync(fd)
  }
  return true
}

/**
 * Back to `synchronous = OFF` on a throwaway database (openDatabase): preparing GroupCommit's
 * `PRAGMA synchronous = FULL` statement applies it (SQLite runs a pragma when it compiles it), so
 * createCore calls this after building it; the first group commit sets FULL again, which only
 * makes later writes of a throwaway instance slower, never less safe.
 */
export function skipSync(db: DB): void {
  db.pragma('synchronous = OFF')
}

/**
 * A bare connection: no pragmas, no migrations. For a second connection to a database that
 * openDatabase already prepared (the backup's snapshot reader) and for checking a copy.
 */
export function openConnection(file: string, dataDir: string, options: Database.Options = {}, opts: { throwaway?: boolean } = {}): DB {
  if (!addonLoaded) {
    addon = loadSqliteAddon(dataDir, opts)
    addonLoaded = true
  }
  // better-sqlite3 accepts the loaded addon object; its type declarations only know the path form.
  return new Database(file, addon ? { ...options, nativeBinding: addon as unknown as string } : options)
}

/** The files SQLite keeps beside a database, which hold its pages (and so its content) too. */
const COMPANIONS = ['-wal', '-shm', '-journal']

/**
 * The image as a database file already in WAL mode: its header's read and write format versions
 * (bytes 18 and 19) are 2, which is what `PRAGMA journal_mode = WAL` writes. An image serialized
 * from :memory: says 1 (a rollback journal), so each process that opened a new data dir switched it
 * to WAL, which takes the exclusive lock: two processes starting together on a new data dir could
 * both hold the shared lock and want it, and SQLite refuses one at once, busy timeout or not, to
 * avoid the deadlock ("database is locked": one of five servers started at once in CI exited 1).
 */
export function inWalMode(image: Uint8Array): Uint8Array {
  const file = Uint8Array.from(image)
  file[18] = 2
  file[19] = 2
  return file
}

/**
 * coffer.db holds small files' content (blob_inline) and webhook secrets: it is created 0600, as
 * `secret` is, before SQLite opens it (SQLite would create it 0644 less the umask, #24). SQLite
 * creates its -wal, -shm and -journal files with the mode of the database file, so they are 0600
 * too. A database (or companion) that an older Coffer left readable by group or others is
 * tightened to its owner's bits here; one this user does not own (another user's data dir, which
 * it can only read or write through group or other bits) is left as it is.
 */
export function keepPrivate(file: string): void {
  fs.closeSync(fs.openSync(file, 'a', 0o600))
  for (const f of [file, ...COMPANIONS.map((suffix) => file + suffix)]) {
    let mode: number
    try {
      mode = fs.statSync(f).mode
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue
      throw err
    }
    if ((mode & 0o077) === 0) continue
    try {
      fs.chmodSync(f, mode & 0o700)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err
    }
  }
}

/** Applies every migration newer than the recorded version, each in its own transaction; `now` is the applied_at recorded. */
export function migrate(db: DB, migrations: readonly Migration[], now: () => number = Date.now): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at INTEGER NOT NULL
  ) STRICT`)
  const applied = db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number | null }
  const current = applied.v ?? 0
  const newest = migrations.at(-1)?.version ?? 0
  if (current > newest) {
    throw new SchemaTooNewError(current, newest)
  }
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
  const isApplied = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').pluck()
  for (const m of migrations) {
    if (m.version <= current) continue
    // Re-checked under the write lock: another process (the CLI, a second start) may have won the race.
    db.transaction(() => {
      if (isApplied.get(m.version)) return
      db.exec(m.sql)
      record.run(m.version, m.name, now())
    }).immediate()
  }
}

/**
 * Gives the connection's page cache back to the allocator (up to better-sqlite3's 16 MB
 * `cache_size`, filled by any load of writes): for when a load is over, so that an idle server's
 * memory returns toward where it started (#29). The next reads fill it again from the OS's page
 * cache. Not inside a transaction, whose pages it must keep.
 */
export function releaseCache(db: DB): void {
  if (db.open && !db.inTransaction) db.pragma('shrink_memory')
}

/** Throws unless the database answers a trivial query (readiness). */
export function ping(db: DB): void {
  db.prepare('SELECT 1').get()
}
