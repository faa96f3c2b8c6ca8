import { DATA_DIR_OPTION, parse, println, withCore, type CliIO } from './io'

export const GC_HELP = `Usage: coffer gc [--data-dir DIR] [--json]

Purges files soft-deleted longer than COFFER_DELETED_RETENTION_SECONDS ago, removes every blob no
file references, and blob files left without a record by a crash (older than an hour).
The server does the first two on its own every ten minutes.`

export const VERIFY_HELP = `Usage: coffer verify [--data-dir DIR] [--read-data] [--json]

Checks every blob the database records and reports blobs that are missing, whose content no longer
matches its SHA-256, stored blobs no record refers to (orphaned), and recorded blobs nothing uses
any more (unreferenced: released content whose removal a crash cut short; the server removes them
at start and every ten minutes, coffer gc at once). Exits 1 when anything is missing or corrupt.
On disk every blob is re-hashed. With COFFER_BLOB_STORE=s3 one listing of the bucket is compared
(existence and size); --read-data downloads and re-hashes every object as well.`

export async function gcCommand(args: string[], io: CliIO): Promise<number> {
  const { values } = parse(args, { ...DATA_DIR_OPTION, json: { type: 'boolean' } })
  if (values.help) return (println(io.stdout, GC_HELP), 0)
  return withCore(io, values['data-dir'], async (core) => {
    const collected = await core.gc.collect(true)
    const orphansRemoved = await core.gc.removeOrphans()
    const result = { ...collected, orphansRemoved }
    if (values.json) println(io.stdout, JSON.stringify(result))
    else {
      println(
        io.stdout,
        `purged ${result.filesPurged} deleted file(s) and ${result.tenantsPurged} deleted tenant(s); removed ${result.blobsRemoved} blob(s) (${result.bytesFreed} bytes) and ${orphansRemoved} orphaned blob file(s)`,
      )
    }
    if (collected.storeFailures) {
      println(io.stderr, `coffer: the blob store refused ${collected.storeFailures} deletion(s); run coffer gc again once it is back`)
      return 1
    }
  })
}

export async function verifyCommand(args: string[], io: CliIO): Promise<number> {
  const { values } = parse(args, { ...DATA_DIR_OPTION, json: { type: 'boolean' }, 'read-data': { type: 'boolean' } })
  if (values.help) return (println(io.stdout, VERIFY_HELP), 0)
  return withCore(io, values['data-dir'], async (core) => {
    const report = await core.gc.verify(values['read-data'] === true)
    const ok = report.missing.length === 0 && report.corrupt.length === 0
    if (values.json) println(io.stdout, JSON.stringify({ ok, ...report }))
    else {
      println(
        io.stdout,
        `checked ${report.checked} blob(s)${report.readData ? '' : ' (listing only; --read-data re-hashes)'}: ${report.missing.length} missing, ${report.corrupt.length} corrupt, ${report.orphans.length} orphaned, ${report.unreferenced.length} unreferenced`,
      )
      for (const sha of report.missing) println(io.stdout, `missing  ${sha}`)
      for (const sha of report.corrupt) println(io.stdout, `corrupt  ${sha}`)
      for (const sha of report.orphans) println(io.stdout, `orphan   ${sha}`)
      for (const sha of report.unreferenced) println(io.stdout, `unreferenced ${sha}`)
    }
    return ok ? 0 : 1
  })
}
