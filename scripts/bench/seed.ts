/**
 * Seeds a Coffer data dir through the database layer, not HTTP: createCore() runs the migrations
 * and creates the tenant (a real API key), then file rows go in with one prepared INSERT per row in
 * large transactions. The schema's triggers charge the tenant's usage and maintain file_counts
 * exactly as they do for uploads, so the server sees a data dir it could have built itself.
 *
 * Seeded rows are completed files that share a pool of blob rows; the blob contents are not
 * written to disk (listing and metadata reads never open them, and downloads are measured on
 * files uploaded over HTTP).
 *
 * Usage (bundled by scripts/bench/run.mjs): seed.cjs <data-dir> <files> [--tenant-id ID --append]
 * Prints one JSON line: { tenantId, apiKey, files, seconds, sampleIds, lastPageCursor }.
 */
import { createHash } from 'node:crypto'
import { loadConfig } from '../../src/config'
import { createCore } from '../../src/core'
import { encodeCursor } from '../../src/services/files'
import { uuidv7 } from '../../src/lib/ids'
import { FILE_TYPES } from '../../src/lib/file-types'

const BATCH = 50_000
const BLOB_POOL = 1000
const CONTEXTS = ['', 'invoices', 'avatars', 'reports', 'scans']
/** Seeded files are one second apart from a fixed start: a 1M-file tenant spans about twelve days. */
const FIRST_CREATED_AT = Date.UTC(2025, 0, 1)
const SPACING_MS = 1000

export interface SeedResult {
  tenantId: string
  apiKey: string
  files: number
  seconds: number
  /** Up to 1000 ids spread over the whole dataset, for metadata reads. */
  sampleIds: string[]
  /** The cursor whose page is the last one (the 20 oldest files) at limit=20; null below 21 files. */
  lastPageCursor: string | null
}

export function seed(dataDir: string, files: number, opts: { apiKey?: string; tenantId?: string } = {}): SeedResult {
  const started = performance.now()
  const core = createCore(loadConfig({ COFFER_LOG_LEVEL: 'silent' }, { 'data-dir': dataDir }))
  const db = core.sqlite!
  try {
    // Seeding only: the rows are rebuilt from scratch if the machine dies, so skip the per-commit
    // fsync; a large page cache keeps the randomly ordered sha256 index from thrashing.
    db.pragma('synchronous = OFF')
    db.pragma('cache_size = -262144')
    let tenantId = opts.tenantId
    let apiKey = opts.apiKey ?? ''
    if (tenantId === undefined) {
      const created = core.tenants.create({ name: 'bench', quotaBytes: Number.MAX_SAFE_INTEGER })
      tenantId = created.tenant.id
      apiKey = created.apiKey
    }
    const now = Date.now()
    const blobs = Array.from({ length: BLOB_POOL }, (_, i) => createHash('sha256').update(`bench-blob-${i}`).digest('hex'))
    const insertBlob = db.prepare('INSERT INTO blobs (sha256, size_bytes, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING')
    const insertFile = db.prepare(
      `INSERT INTO files (id, tenant_id, workspace_id, original_name, file_type, status, size_bytes, declared_size,
         sha256, context, tags, upload_expires_at, created_at, completed_at)
       VALUES (?, ?, NULL, ?, ?, 'completed', ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    // Appending continues the sequence: row n is created at FIRST_CREATED_AT + n seconds.
    const existing = db.prepare<[string], number>('SELECT count(*) FROM files WHERE tenant_id = ?').pluck().get(tenantId) as number
    db.transaction(() => {
      blobs.forEach((sha, i) => insertBlob.run(sha, 1000 + i, now))
    })()
    const insertBatch = db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) {
        const n = existing + i
        const createdAt = FIRST_CREATED_AT + n * SPACING_MS
        const type = FILE_TYPES[n % FILE_TYPES.length]!
        const size = 1000 + (n % BLOB_POOL)
        insertFile.run(
          uuidv7(createdAt),
          tenantId,
          `file-${n}.${type.split('/')[1]}`,
          type,
          size,
          size,
          blobs[n % BLOB_POOL],
          CONTEXTS[n % CONTEXTS.length],
          n % 3 === 0 ? `{"batch":"${Math.floor(n / 1000)}"}` : '{}',
          createdAt + 900_000,
          createdAt,
          createdAt + 50,
        )
      }
    })
    for (let from = 0; from < files; from += BATCH) insertBatch(from, Math.min(files, from + BATCH))
    db.pragma('wal_checkpoint(TRUNCATE)')
    const total = existing + files
    const step = Math.max(1, Math.floor(total / 1000))
    const sampleIds = db
      .prepare<[string, number], string>(`SELECT id FROM files WHERE tenant_id = ? AND deleted_at IS NULL AND rowid % ? = 0 LIMIT 1000`)
      .pluck()
      .all(tenantId, step)
    // The 21st-oldest file: the page after it holds the 20 oldest, the last page of the listing.
    const pivot = db
      .prepare<[string], { created_at: number; id: string }>(
        `SELECT created_at, id FROM files WHERE tenant_id = ? AND deleted_at IS NULL ORDER BY created_at ASC, id ASC LIMIT 1 OFFSET 20`,
      )
      .get(tenantId)
    return {
      tenantId,
      apiKey,
      files: total,
      seconds: (performance.now() - started) / 1000,
      sampleIds,
      lastPageCursor: pivot ? encodeCursor({ createdAt: pivot.created_at, id: pivot.id }) : null,
    }
  } finally {
    core.close()
  }
}

// CLI: seed.cjs <data-dir> <files> [<tenant-id> <api-key>]; the last two append to an existing tenant.
if (require.main === module) {
  const [dir, files, tenantId, apiKey] = process.argv.slice(2)
  if (dir === undefined || !/^\d+$/.test(files ?? '')) {
    console.error('usage: seed.cjs <data-dir> <files> [<tenant-id> <api-key>]')
    process.exit(2)
  }
  const r = seed(dir, Number(files), tenantId === undefined ? {} : { tenantId, apiKey: apiKey ?? '' })
  process.stdout.write(`${JSON.stringify(r)}\n`)
}
