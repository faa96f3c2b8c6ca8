import type { Engine } from '../src/db/engine'
import { BlobsRepo } from '../src/db/repos/blobs'
import { FilesRepo, type FileRecord } from '../src/db/repos/files'
import { WorkspacesRepo } from '../src/db/repos/workspaces'
import { onBoth, T1, T2, twoTenants } from './pg/repos'

// The files and versions repositories on both databases (#30): each scenario runs on SQLite and
// on PostgreSQL, checked as it goes, and the two transcripts must be the same. What the triggers
// maintain (usage, file counts) is read back after each step and is part of the transcript.

const TIB = 2 ** 40 // sizes and their sums past 2^32: bigint on PostgreSQL
const [H1, H2, H3] = ['0a', 'b1', 'B1'].map((x) => x.repeat(32)) as [string, string, string]

/** Tenants' and workspaces' usage and the file counts, as the triggers left them. */
function counters(engine: Engine): unknown {
  return {
    tenants: engine.prepare('SELECT id, used_bytes FROM tenants ORDER BY id').all(),
    workspaces: engine.prepare('SELECT id, used_bytes FROM workspaces ORDER BY id').all(),
    counts: engine.prepare('SELECT tenant_id, workspace_id, file_type, context, n FROM file_counts ORDER BY tenant_id, workspace_id, file_type, context').all(),
  }
}

/** Two tenants; T1 has workspaces wa and wb, T2 has wz; three blobs. */
function setUp(engine: Engine): void {
  twoTenants(engine)
  const ws = new WorkspacesRepo(engine)
  const base = { quotaBytes: null, metadata: null, webhookUrl: null, now: 1 }
  ws.insert({ ...base, id: 'wa', tenantId: T1, name: 'a', slug: 'a' })
  ws.insert({ ...base, id: 'wb', tenantId: T1, name: 'b', slug: 'b' })
  ws.insert({ ...base, id: 'wz', tenantId: T2, name: 'z', slug: 'z' })
  const blobs = new BlobsRepo(engine)
  blobs.insertIfMissing(H1, 3 * TIB, 1)
  blobs.insertIfMissing(H2, 5, 1)
  blobs.insertIfMissing(H3, 0, 1)
}

const pending = (id: string, over: Partial<Parameters<FilesRepo['insertPending']>[0]> = {}): Parameters<FilesRepo['insertPending']>[0] => ({
  id,
  tenantId: T1,
  workspaceId: null,
  originalName: `${id}.bin`,
  fileType: 'application/octet-stream',
  sizeBytes: 10,
  declaredSize: null,
  context: '',
  tags: {},
  webhookUrl: null,
  uploadExpiresAt: 1_000,
  createdAt: 100,
  objectKey: null,
  ...over,
})

const ids = (rows: FileRecord[]) => rows.map((f) => f.id)

onBoth('files: rows, states and the triggers behind them', (t, { engine, other }) => {
  const seen: unknown[] = []
  setUp(engine)
  const files = new FilesRepo(engine)
  const now = 1_800_000_000_000 // past 2^32: times are bigint

  engine.transaction(() => {
    // No workspace (an API upload outside any): counted under workspace '' by the triggers.
    files.insertPending(pending('f-nows', { sizeBytes: 2 * TIB, declaredSize: 2 * TIB, tags: { k: 'é', '"q"': '\\' }, webhookUrl: 'http://127.0.0.1/h' }))
    files.insertPending(pending('f-wa', { workspaceId: 'wa', context: 'avatars', objectKey: 'f-wa/é.bin', uploadExpiresAt: now + 5, createdAt: now }))
    files.insertPending(pending('f-wb', { workspaceId: 'wb', fileType: 'image/png', uploadExpiresAt: now + 1, createdAt: now }))
    files.insertPending(pending('f-t2', { tenantId: T2, workspaceId: 'wz', uploadExpiresAt: now, createdAt: now }))
  })
  t.throws(() => files.insertPending(pending('f-wa')), 'an id is unique')
  seen.push(counters(engine))
  const got = new FilesRepo(other).get('f-nows')!
  t.same(
    [got.workspaceId, got.declaredSize, got.sizeBytes, got.sha256, got.completedAt, got.deletedAt, got.objectKey, got.metadata],
    [null, 2 * TIB, 2 * TIB, null, null, null, null, null],
    'NULLs come back as null, sizes as numbers',
  )
  seen.push(got, files.get('nope'), files.getLive(T2, 'f-nows'), files.getLive(T1, 'f-wa'))

  // Expired uploads: strictly before the time, soonest first, limited.
  seen.push(ids(files.expiredPending(now + 5, 10)), ids(files.expiredPending(now + 5, 1)), ids(files.expiredPending(now, 10)))

  // pending → completed, once; a 3 TiB blob.
  t.ok(files.complete('f-nows', 3 * TIB, H1, now + 10))
  t.notOk(files.complete('f-nows', 3 * TIB, H1, now + 11), 'completed once')
  t.throws(() => files.complete('f-wb', 1, 'ff'.repeat(32), now), 'a hash with no blob row is refused (the foreign key)')
  t.ok(files.fail('f-wb', now + 12))
  t.notOk(files.fail('f-wb', now + 13), 'failed once')
  t.notOk(files.complete('f-wb', 5, H2, now + 14), 'a failed upload is not completed')
  t.notOk(files.fail('f-nows', now + 15), 'a completed one does not fail')
  seen.push(files.get('f-nows'), files.get('f-wb'), counters(engine))

  // A pending upload soft-deleted becomes failed and releases its reservation; a completed one stays completed.
  t.ok(files.softDelete(T1, 'f-wa', now + 20))
  t.notOk(files.softDelete(T1, 'f-wa', now + 21), 'deleted once')
  t.notOk(files.softDelete(T1, 'f-t2', now + 21), "not another tenant's")
  seen.push(files.get('f-wa'), files.getLive(T1, 'f-wa'), counters(engine))

  // Workspace-wide and tenant-wide soft deletes, with what is pending in a workspace.
  files.insertPending(pending('f-wa2', { workspaceId: 'wa', createdAt: now + 30 }))
  files.insertPending(pending('f-wa3', { workspaceId: 'wa', createdAt: now + 30 }))
  t.ok(files.complete('f-wa3', 5, H2, now + 31))
  seen.push(files.pendingInWorkspace('wa').sort(), files.pendingInWorkspace('wz'), files.pendingInWorkspace('wb'))
  t.equal(files.softDeleteInWorkspace('wa', now + 40), 2)
  t.equal(files.softDeleteInWorkspace('wa', now + 41), 0, 'nothing live left in wa')
  seen.push(files.get('f-wa2'), files.get('f-wa3'), counters(engine))
  t.equal(files.softDeleteAllOfTenant(T2, now + 50), 1)
  seen.push(files.get('f-t2'), counters(engine))

  // Purgeable: soft-deleted before the time, oldest first, and not a version's file.
  engine
    .prepare(
      `INSERT INTO object_versions (workspace_id, object_key, version_id, seq, tenant_id, file_id, size_bytes, created_at, noncurrent_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .run('wa', 'k', 'v1', 1, T1, 'f-wa3', 5, now + 31, now + 40)
  seen.push(files.purgeable(now + 41, 10), files.purgeable(now + 40, 10), files.purgeable(now + 51, 2), counters(engine))
  t.notOk(files.hardDelete('f-wa3'), "a version's file stays")
  t.notOk(files.hardDelete('f-nows'), 'a live file is not hard-deleted')
  t.ok(files.hardDelete('f-wa'))
  t.notOk(files.hardDelete('f-wa'), 'gone')

  // A noncurrent version's file made live again: charged and counted again; then deleted again.
  engine.prepare('UPDATE object_versions SET noncurrent_at = NULL WHERE file_id = ?').run('f-wa3')
  t.ok(files.restore('f-wa3'))
  t.notOk(files.restore('f-wa3'), 'live already')
  t.notOk(files.restore('f-wa2'), 'a failed upload is not restored')
  seen.push(files.getLive(T1, 'f-wa3'), counters(engine))
  engine.prepare('UPDATE object_versions SET noncurrent_at = ? WHERE file_id = ?').run(now + 60, 'f-wa3')
  t.ok(files.softDelete(T1, 'f-wa3', now + 60))
  files.redelete('f-wa3', now + 70)
  files.redelete('f-nows', now + 70) // live: untouched
  seen.push(files.get('f-wa3')!.deletedAt, files.get('f-nows')!.deletedAt, counters(engine))
  return seen
})

onBoth('files: counts and keyset pages over every filter', (t, { engine }) => {
  const seen: unknown[] = []
  setUp(engine)
  const files = new FilesRepo(engine)
  // Ties on created_at are ordered by id, descending in byte order: 'é' (0xC3…) > 'b' > 'a' > 'B' > 'A'.
  const rows: [string, string | null, string, string, number][] = [
    ['A', 'wa', 'image/png', '', 100],
    ['B', 'wa', 'image/png', 'x', 100],
    ['a', 'wb', 'text/plain', '', 100],
    ['b', null, 'image/png', 'x', 100],
    ['é', 'wa', 'text/plain', 'x', 100],
    ['z', 'wa', 'image/png', '', 50],
    ['zz', null, 'text/plain', '', 200],
    ['del', 'wa', 'image/png', '', 150],
  ]
  engine.transaction(() => {
    for (const [id, workspaceId, fileType, context, createdAt] of rows)
      files.insertPending(pending(id, { workspaceId, fileType, context, createdAt, sizeBytes: TIB }))
    files.insertPending(pending('other', { tenantId: T2, workspaceId: 'wz', createdAt: 100 }))
  })
  t.ok(files.softDelete(T1, 'del', 300))
  t.ok(files.complete('zz', TIB + 1, H1, 300))

  const filters = [
    {},
    { workspaceId: 'wa' },
    { fileType: 'image/png' },
    { context: '' },
    { context: 'x' },
    { workspaceId: 'wa', fileType: 'image/png', context: '' },
    { workspaceId: 'wb', context: 'x' },
  ]
  for (const f of filters) {
    // Every page of two, each strictly after the last row of the one before.
    const pages: string[][] = []
    let cursor: { createdAt: number; id: string } | undefined
    for (;;) {
      const page = files.list(T1, f, cursor, 2)
      if (page.length === 0) break
      pages.push(ids(page))
      const last = page.at(-1)!
      cursor = { createdAt: last.createdAt, id: last.id }
    }
    seen.push([f, files.count(T1, f), pages])
  }
  t.same(ids(files.list(T1, {}, undefined, 100)), ['zz', 'é', 'b', 'a', 'B', 'A', 'z'], 'newest first, ties by id in byte order, the deleted one left out')
  t.equal(files.count(T1, {}), 7, 'live files of the tenant, NULL workspace included')
  seen.push(
    files.count(T2, {}),
    files.count(T2, { workspaceId: 'wa' }),
    ids(files.list(T2, { workspaceId: 'wa' }, undefined, 10)),
    ids(files.list(T2, {}, undefined, 10)),
  )
  seen.push(counters(engine))
  return seen
})
