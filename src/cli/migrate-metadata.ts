import fs from 'node:fs'
import path from 'node:path'
import { loadConfig } from '../config'
import { openDatabase, SchemaTooNewError, type DB } from '../db/database'
import { PgSide, SqliteSide, type MetadataSide } from '../db/metadata-sides'
import { PgBridge } from '../db/pg/bridge'
import { PgError } from '../db/pg/errors'
import { migratePg } from '../db/pg/migrate'
import { ensureDataDir, loadSecret, type DataDir } from '../lib/data-dir'
import { PgEngine } from '../db/pg/engine'
import { adoptSecret } from '../services/server-secret'
import { copyMetadata, MigrateMetadataError, plan, verifyMetadata } from '../services/migrate-metadata'
import { assertDataDir, OperatorError, parse, println, UsageError, type CliIO } from './io'

export const MIGRATE_METADATA_HELP = `Usage: coffer migrate-metadata --to postgres://USER@HOST:PORT/DB [--data-dir DIR]
       coffer migrate-metadata --from postgres://USER@HOST:PORT/DB --to-data-dir DIR
       options: [--batch-size N] [--verify-only] [--json]

Copies every table of the data dir's SQLite database into a PostgreSQL database (--to), or of a
PostgreSQL database into a new data dir (--from … --to-data-dir), then verifies the copy: each
table's row count and a checksum of every row on both sides; exit 1 names the first table and
row that differ. The target is migrated to this coffer's schema first and must then have the
source's; it must be empty or a copy this command began: a run that stopped (killed, the
connection lost) is resumed by running it again, and copies only what is missing. No server may
run on either database meanwhile (their leases show it). Leave the password out of the URL (ps
shows it) and set PGPASSWORD or ~/.pgpass. Only the metadata moves: blob files, the secret file
and the encryption key stay where they are (README, "Metadata in PostgreSQL").`

/** Makes the data dir's server secret (its fingerprint) the one every node of the database must have. */
function recordSecret(bridge: PgBridge, io: CliIO, dataDirFlag: string | undefined, dir: DataDir): void {
  const { secret } = loadConfig(io.env, dataDirFlag === undefined ? {} : { 'data-dir': dataDirFlag })
  adoptSecret(new PgEngine(bridge), loadSecret(dir, secret), Date.now())
  println(
    io.stderr,
    `coffer: every node on the PostgreSQL database must use this data dir's server secret (it sealed the S3 secrets and signed the links copied): copy ${dir.secret} into their data dirs, or set the same COFFER_SECRET on each; a node with another one refuses to start`,
  )
}

/** `postgres://user:…@host/db` without its password, for messages. */
const shown = (url: string): string => {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return '(an invalid URL)'
  }
}

export async function migrateMetadataCommand(args: string[], io: CliIO): Promise<number> {
  const { values } = parse(args, {
    to: { type: 'string' },
    from: { type: 'string' },
    'to-data-dir': { type: 'string' },
    'data-dir': { type: 'string' },
    'batch-size': { type: 'string' },
    'verify-only': { type: 'boolean' },
    json: { type: 'boolean' },
  })
  if (values.help) return (println(io.stdout, MIGRATE_METADATA_HELP), 0)
  const back = values.from !== undefined
  if (back === (values.to !== undefined)) throw new UsageError('migrate-metadata needs --to postgres://… or --from postgres://… --to-data-dir DIR')
  if (back && values['to-data-dir'] === undefined) throw new UsageError('--from needs --to-data-dir DIR, the data dir to copy into')
  if (!back && values['to-data-dir'] !== undefined) throw new UsageError('--to-data-dir goes with --from')
  const url = (back ? values.from : values.to)!
  if (!/^postgres(ql)?:\/\//.test(url)) throw new UsageError(`${back ? '--from' : '--to'} takes a postgres:// URL`)
  const batchSize = values['batch-size'] === undefined ? 500 : Number(values['batch-size'])
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new UsageError('--batch-size takes a positive integer')

  let dataDir: string
  if (back) {
    dataDir = path.resolve(values['to-data-dir']!)
    if (fs.existsSync(dataDir) && !fs.statSync(dataDir).isDirectory()) throw new UsageError(`${dataDir} is not a directory`)
  } else {
    dataDir = loadConfig(io.env, values['data-dir'] === undefined ? {} : { 'data-dir': values['data-dir'] }).dataDir
    assertDataDir(dataDir)
  }

  const bridge = new PgBridge({ url, statementTimeoutMs: 10 * 60_000 })
  let db: DB | undefined
  try {
    // Both schemas are brought to this coffer's version first, as a start would (PostgreSQL under
    // its advisory lock); a database of a newer coffer is refused by either.
    try {
      migratePg(bridge)
    } catch (err) {
      if (err instanceof PgError && err.code.startsWith('08')) throw new OperatorError(`cannot reach PostgreSQL at ${shown(url)}: ${err.message}`)
      if (err instanceof SchemaTooNewError)
        throw new OperatorError(
          `the PostgreSQL database's schema is version ${err.found}, newer than this coffer's (${err.known}): use the coffer that migrated it`,
        )
      throw err
    }
    const dir = ensureDataDir(dataDir)
    db = openDatabase(dir.db, dir.root)
    const sqlite = new SqliteSide(db)
    const pg = new PgSide(bridge)
    const [source, target]: [MetadataSide, MetadataSide] = back ? [pg, sqlite] : [sqlite, pg]
    const plans = plan(db, source, target)
    const started = Date.now()
    let copied = new Map<string, number>()
    if (!values['verify-only']) {
      const killAfter = Number(io.env.COFFER_TEST_MIGRATE_KILL_AFTER_BATCHES ?? 0)
      let batches = 0
      copied = copyMetadata(plans, source, target, {
        batchSize,
        // Tests only: dies at a batch boundary, as a killed run would (test/migrate-metadata.test.ts).
        afterBatch: () => {
          if (killAfter > 0 && ++batches >= killAfter) process.kill(process.pid, 'SIGKILL')
        },
      })
    }
    const report = verifyMetadata(plans, source, target)
    const seconds = (Date.now() - started) / 1000
    const rows = report.tables.reduce((n, t) => n + t.rows, 0)
    if (values.json) println(io.stdout, JSON.stringify({ ...report, copied: Object.fromEntries(copied), seconds }))
    else if (report.ok) {
      const written = [...copied.values()].reduce((a, b) => a + b, 0)
      println(
        io.stdout,
        `migrate-metadata: ${report.tables.length} table(s), ${rows} row(s) verified equal in ${source.kind} (${back ? shown(url) : dataDir}) and ${target.kind} (${back ? dataDir : shown(url)}); ${written} row(s) written by this run, in ${seconds.toFixed(1)} s`,
      )
    }
    if (!report.ok) println(io.stderr, `coffer: the copy differs from the source: ${report.difference}`)
    // The S3 secrets just copied are sealed under the data dir's server secret, and its signed
    // links were made with it: the nodes on PostgreSQL must use it, and one that does not is
    // refused from their first start (services/server-secret.ts), not after it served (#30).
    if (report.ok && !back && !values['verify-only']) recordSecret(bridge, io, values['data-dir'], dir)
    return report.ok ? 0 : 1
  } catch (err) {
    if (err instanceof MigrateMetadataError) throw new OperatorError(err.message)
    if (err instanceof PgError && err.code === '42501')
      throw new OperatorError(
        `PostgreSQL refused (${err.message}): the copy switches the tables' triggers off batch by batch (ALTER TABLE … DISABLE TRIGGER USER), which only the tables' owner may: run it as the role that owns the schema`,
      )
    throw err
  } finally {
    db?.close()
    bridge.close()
  }
}
