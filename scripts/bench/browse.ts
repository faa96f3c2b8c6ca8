/**
 * The bucket browser's listing (#31) in a bucket of a million keys: seeds one workspace through
 * the database layer (one prepared INSERT per row in large transactions, as seed.ts does; the
 * triggers keep usage and file_counts as uploads do), prints the query plan of the page statement
 * that ListObjectsV2 and GET /api/v1/workspaces/:id/objects share, and times pages of the service
 * the route calls: the top level rolled up by "/", a folder of 100 sub-folders, the first and the
 * last page of a flat folder of 900,000 keys, and a name filter.
 *
 * Usage: npm run bench -- browse [keys] (default 1,000,000; a temp data dir, removed at the end).
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { loadConfig } from '../../src/config'
import { createCore } from '../../src/core'
import { uuidv7 } from '../../src/lib/ids'

const BATCH = 50_000

/** Key n: 90% in one flat folder, the rest spread over 100 albums. */
const keyOf = (n: number, total: number): string =>
  n < total * 0.9 ? `logs/2026/${String(n).padStart(7, '0')}.json` : `photos/album-${String(n % 100).padStart(3, '0')}/${n}.jpg`

export function main(keys: number): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-browse-'))
  const core = createCore(loadConfig({ COFFER_LOG_LEVEL: 'silent' }, { 'data-dir': dir }))
  try {
    const db = core.sqlite!
    db.pragma('synchronous = OFF')
    const { tenant } = core.tenants.create({ name: 'browse', quotaBytes: Number.MAX_SAFE_INTEGER })
    const auth = { ...tenant, allowedFileTypes: tenant.allowedFileTypes } as Parameters<typeof core.workspaces.create>[0]
    const ws = core.workspaces.create(auth, { name: 'big', slug: 'big' })
    const sha = createHash('sha256').update('browse').digest('hex')
    db.prepare('INSERT INTO blobs (sha256, size_bytes, created_at) VALUES (?, 1000, ?)').run(sha, Date.now())
    const insert = db.prepare(
      `INSERT INTO files (id, tenant_id, workspace_id, original_name, file_type, status, size_bytes, declared_size,
         sha256, context, tags, upload_expires_at, created_at, completed_at, object_key)
       VALUES (?, ?, ?, ?, 'application/octet-stream', 'completed', 1000, NULL, ?, '', '{}', ?, ?, ?, ?)`,
    )
    const started = performance.now()
    const t0 = Date.UTC(2026, 0, 1)
    const batch = db.transaction((from: number, to: number) => {
      for (let n = from; n < to; n++) {
        const key = keyOf(n, keys)
        insert.run(uuidv7(t0 + n), tenant.id, ws.id, key.slice(key.lastIndexOf('/') + 1), sha, t0 + n, t0 + n, t0 + n, key)
      }
    })
    for (let from = 0; from < keys; from += BATCH) batch(from, Math.min(keys, from + BATCH))
    db.pragma('wal_checkpoint(TRUNCATE)')
    console.log(`seeded ${keys.toLocaleString('en')} keys in ${((performance.now() - started) / 1000).toFixed(1)} s`)

    // The plans of the statements pages run (ObjectsRepo.page, one per shape of bounds): a search
    // of the unique (workspace_id, object_key) index on both bounds, no sort, no scan.
    for (const [name, source] of pageStatements(core)) {
      const plan = db.prepare(`EXPLAIN QUERY PLAN ${source}`).all({ workspaceId: ws.id, lo: 'logs/', below: 'logs0', limit: 101 }) as { detail: string }[]
      console.log(`plan of ${name}: ${plan.map((r) => r.detail).join('; ')}`)
    }

    const time = (label: string, q: { prefix?: string; delimiter?: string; after?: string; limit?: number }) => {
      const runs: number[] = []
      let page = core.workspaceObjects.list(auth, ws.id, q)
      for (let i = 0; i < 50; i++) {
        const at = performance.now()
        page = core.workspaceObjects.list(auth, ws.id, q)
        runs.push(performance.now() - at)
      }
      runs.sort((a, b) => a - b)
      const median = runs[runs.length >> 1]!
      console.log(
        `${label}: ${page.prefixes.length} prefixes, ${page.objects.length} objects; median ${median.toFixed(2)} ms, max ${runs.at(-1)!.toFixed(2)} ms`,
      )
    }
    time('top level, delimiter /', { delimiter: '/', limit: 100 })
    time('photos/, 100 folders', { prefix: 'photos/', delimiter: '/', limit: 100 })
    time('logs/2026/, first page of 100', { prefix: 'logs/2026/', delimiter: '/', limit: 100 })
    const last = keyOf(Math.floor(keys * 0.9) - 101, keys)
    time('logs/2026/, last page of 100 (after its 899,899th key)', { prefix: 'logs/2026/', delimiter: '/', after: last, limit: 100 })
    time('name filter logs/2026/05 (a longer prefix)', { prefix: 'logs/2026/05', delimiter: '/', limit: 100 })
  } finally {
    core.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** The SQL text of ObjectsRepo's page statements, as prepared (better-sqlite3 keeps it as `source`). */
function pageStatements(core: ReturnType<typeof createCore>): [string, string][] {
  const repo = (core.workspaceObjects as unknown as { deps: { objects: { stmts: Record<string, { source: string }> } } }).deps.objects
  return Object.entries(repo.stmts)
    .filter(([name]) => name.startsWith('page'))
    .map(([name, stmt]) => [name, stmt.source])
}

main(Number(process.argv[2] ?? 1_000_000))
