// @suites: sqlite
import t from 'tap'
import type { Engine } from '../src/db/engine'
import type { GroupCommit } from '../src/db/group-commit'
import type { ObjectsRepo } from '../src/db/repos/objects'
import { OutboxRepo } from '../src/db/repos/outbox'
import { TenantsRepo } from '../src/db/repos/tenants'
import { ManualClock } from '../src/lib/clock'
import { TokenSigner } from '../src/lib/tokens'
import { FilesService } from '../src/services/files'
import { FileVersions } from '../src/services/file-versions'
import type { ObjectLock } from '../src/services/object-lock'
import { Quotas } from '../src/services/quotas'
import { SignedUrls } from '../src/services/signed-urls'
import { UploadRecords } from '../src/services/upload-records'
import { BucketCache } from '../src/services/bucket-cache'
import { BucketConfigsRepo } from '../src/db/repos/bucket-configs'
import { ObjectVersions } from '../src/services/versions'
import { WorkspacesService } from '../src/services/workspaces'
import { FileEvents } from '../src/webhooks/events'
import { BlobsRepo } from '../src/db/repos/blobs'
import { FilesRepo, type FileRecord } from '../src/db/repos/files'
import { VersionsRepo, type VersionCursor, type VersionRow } from '../src/db/repos/versions'
import { WorkspacesRepo } from '../src/db/repos/workspaces'
import { onBoth, pending, T1, T2, twoTenants } from './pg/repos'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

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

onBoth('versions: rows, the current one, keyset pages and deleted keys', (t, { engine, other }) => {
  const seen: unknown[] = []
  setUp(engine)
  const files = new FilesRepo(engine)
  const v = new VersionsRepo(engine)
  const now = 1_800_000_000_000
  const info = JSON.stringify({ etag: '"e"', contentType: 'text/plain', meta: { é: '\u0000"' } })
  /** A completed file holding a version's content; soft-deleted when the version is noncurrent. */
  const content = (id: string, tenantId: string, workspaceId: string, key: string, size: number, noncurrent: boolean) => {
    files.insertPending(pending(id, { tenantId, workspaceId, objectKey: key, sizeBytes: size, createdAt: now }))
    t.ok(files.complete(id, size, size === 5 ? H2 : H1, now))
    engine.prepare('UPDATE files SET object_info = ? WHERE id = ?').run(info, id)
    if (noncurrent) t.ok(files.softDelete(tenantId, id, now + 1))
  }
  const version = (r: Partial<VersionRow> & Pick<VersionRow, 'workspaceId' | 'key' | 'versionId' | 'seq'>): VersionRow => ({
    tenantId: T1,
    fileId: null,
    size: 0,
    createdAt: now,
    noncurrentAt: null,
    ...r,
  })

  seen.push(v.versioning('wa'), v.versioning('nope'))
  v.setVersioning('wa', 'Enabled')
  v.setVersioning('wb', 'Suspended')
  seen.push(v.versioning('wa'), new VersionsRepo(other).versioning('wb'))

  // wa's keys in byte order: 'B' < 'a' < 'a/b' < 'a0' < 'b' < 'é'.
  engine.transaction(() => {
    content('fa1', T1, 'wa', 'a', 5, true)
    content('fa3', T1, 'wa', 'a', 3 * TIB, false)
    v.insert(version({ workspaceId: 'wa', key: 'a', versionId: 'v1', seq: 1, fileId: 'fa1', size: 5, noncurrentAt: now + 1 }))
    v.insert(version({ workspaceId: 'wa', key: 'a', versionId: 'v2', seq: 2, noncurrentAt: now + 2, createdAt: now + 1 }))
    v.insert(version({ workspaceId: 'wa', key: 'a', versionId: 'v3', seq: 3, fileId: 'fa3', size: 3 * TIB, createdAt: now + 2 }))
    content('fab1', T1, 'wa', 'a/b', 5, true)
    v.insert(version({ workspaceId: 'wa', key: 'a/b', versionId: 'v1', seq: 1, fileId: 'fab1', size: 5, noncurrentAt: now + 10 }))
    v.insert(version({ workspaceId: 'wa', key: 'a/b', versionId: 'v2', seq: 2, createdAt: now + 10 }))
    v.insert(version({ workspaceId: 'wa', key: 'a0', versionId: 'v1', seq: 1, createdAt: now + 20 })) // a lone marker: nothing to restore
    content('fB1', T1, 'wa', 'B', 3 * TIB, true)
    v.insert(version({ workspaceId: 'wa', key: 'B', versionId: 'v1', seq: 1, fileId: 'fB1', size: 3 * TIB, noncurrentAt: now + 10 }))
    v.insert(version({ workspaceId: 'wa', key: 'B', versionId: 'v2', seq: 2, createdAt: now + 10 }))
    content('fe', T1, 'wa', 'é', 5, false)
    v.insert(version({ workspaceId: 'wa', key: 'é', versionId: 'null', seq: 1, fileId: 'fe', size: 5 }))
    content('fb1', T1, 'wa', 'b', 5, false)
    v.insert(version({ workspaceId: 'wa', key: 'b', versionId: 'v1', seq: 1, fileId: 'fb1', size: 5 }))
    // The same time as wa's markers: ties by workspace, then key, descending in byte order.
    content('fwb', T1, 'wb', 'a/b', 5, true)
    v.insert(version({ workspaceId: 'wb', key: 'a/b', versionId: 'v1', seq: 1, fileId: 'fwb', size: 5, noncurrentAt: now + 10 }))
    v.insert(version({ workspaceId: 'wb', key: 'a/b', versionId: 'v2', seq: 2, createdAt: now + 10 }))
    content('fz', T2, 'wz', 'x', 5, true)
    v.insert(version({ workspaceId: 'wz', key: 'x', versionId: 'v1', seq: 1, tenantId: T2, fileId: 'fz', size: 5, noncurrentAt: now + 10 }))
    v.insert(version({ workspaceId: 'wz', key: 'x', versionId: 'v2', seq: 2, tenantId: T2, createdAt: now + 10 }))
  })
  t.throws(() => v.insert(version({ workspaceId: 'wa', key: 'a', versionId: 'v3', seq: 9 })), 'a version id is unique in its key')
  t.throws(() => v.insert(version({ workspaceId: 'wa', key: 'a', versionId: 'v9', seq: 3 })), 'a seq is unique in its key')
  t.throws(() => v.insert(version({ workspaceId: 'wa', key: 'z', versionId: 'v1', seq: 1, size: 1 })), 'a delete marker has no size')
  seen.push(counters(engine))

  seen.push(v.latest('wa', 'a'), v.latest('wa', 'A'), v.byId('wa', 'a', 'v2'), v.byId('wa', 'a', 'nope'), v.byFile('fa1'), v.byFile('nope'))
  seen.push(v.objectById('wa', 'a', 'v3'), v.objectById('wa', 'a', 'v2'), v.objectById('wb', 'a', 'v3'))
  seen.push(v.previous('wa', 'a', 3), v.previous('wa', 'a', 1), v.countOfKey('wa', 'a'), v.countOfKey('wa', 'nope'), v.hasAny('wa'), v.hasAny('nope'))
  seen.push(v.ofKey('wa', 'a', undefined, 10), v.ofKey('wa', 'a', 3, 1), v.ofKey('wa', 'a', 1, 10))

  // Every page of two, each after the last version of the one before (inside a key or past it).
  const walk = (bounds: { from?: string; below?: string }, size: number) => {
    const pages: [string, string][][] = []
    let after: VersionCursor | undefined
    for (;;) {
      const page = [...v.page('wa', { ...bounds, after }, size)]
      if (page.length === 0) return pages
      pages.push(page.map((x) => [x.key, x.versionId]))
      after = { key: page.at(-1)!.key, seq: page.at(-1)!.seq }
    }
  }
  seen.push(walk({}, 2), walk({}, 3), walk({ from: 'a/', below: 'b' }, 2), walk({ from: 'a0' }, 1))
  t.same(
    [...v.page('wa', {}, 100)].map((x) => x.key),
    ['B', 'B', 'a', 'a', 'a', 'a/b', 'a/b', 'a0', 'b', 'é'],
    'keys in byte order, each newest first',
  )
  // A cursor past the whole key, a cursor inside a key outside the bounds, a reader that stops early.
  seen.push([...v.page('wa', { after: { key: 'a' } }, 3)].map((x) => [x.key, x.versionId, x.sha256, x.info, x.fileType]))
  seen.push([...v.page('wa', { after: { key: 'a', seq: 3 }, from: 'a/' }, 10)].map((x) => [x.key, x.versionId]))
  const early: string[] = []
  for (const x of v.page('wa', {}, 5)) {
    early.push(`${x.key} ${x.versionId}`)
    if (early.length === 2) break // closes the statement's iterator (SQLite's connection is busy until then)
  }
  seen.push(early)

  // Deleted keys: the current version a marker, with content below it; newest deletion first.
  const deleted = (tenantId: string, ws: string | undefined, size: number) => {
    const pages: unknown[] = []
    let after: { deletedAt: number; workspaceId: string; key: string } | undefined
    for (;;) {
      const page = v.deletedKeys(tenantId, ws, after, size)
      if (page.length === 0) return pages
      pages.push(page)
      const last = page.at(-1)!
      after = { deletedAt: last.deletedAt, workspaceId: last.workspaceId, key: last.key }
    }
  }
  seen.push(deleted(T1, undefined, 1), deleted(T1, 'wa', 2), deleted(T2, undefined, 10), deleted(T2, 'wa', 10))
  seen.push(v.countDeletedKeys(T1, undefined), v.countDeletedKeys(T1, 'wa'), v.countDeletedKeys(T2, undefined), v.countDeletedKeys(T1, 'wz'))
  t.same(
    v.deletedKeys(T1, undefined, undefined, 10).map((d) => [d.workspaceId, d.key]),
    [
      ['wb', 'a/b'],
      ['wa', 'a/b'],
      ['wa', 'B'],
    ],
    'ties by workspace, then key, descending in byte order; the lone marker left out',
  )

  // Current ↔ noncurrent moves the version's bytes in the usage; a delete of a noncurrent one releases them.
  t.ok(files.softDelete(T1, 'fb1', now + 30))
  v.setNoncurrent('wa', 'b', 'v1', now + 30)
  seen.push(v.latest('wa', 'b'), counters(engine))
  v.setNoncurrent('wa', 'b', 'v1', null)
  t.ok(files.restore('fb1'))
  seen.push(counters(engine))
  // A marker made noncurrent (its delete undone): the key is no longer deleted.
  v.setNoncurrent('wa', 'B', 'v2', now + 40)
  seen.push(
    v.countDeletedKeys(T1, 'wa'),
    v.deletedKeys(T1, 'wa', undefined, 10).map((d) => d.key),
  )
  t.ok(v.delete('wa', 'a', 'v1'))
  t.notOk(v.delete('wa', 'a', 'v1'), 'deleted once')
  seen.push(v.countOfKey('wa', 'a'), counters(engine))
  v.deleteInWorkspace('wb')
  seen.push(v.hasAny('wb'), counters(engine))
  v.deleteAllOfTenant(T2)
  seen.push(v.hasAny('wz'), v.hasAny('wa'), counters(engine))
  return seen
})

/** Random ids (workspaces, versions, events) replaced by their order of first appearance, so two runs compare. */
function normalised(seen: unknown[]): unknown {
  const names = new Map<string, string>()
  const text = JSON.stringify(seen).replace(/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-z]{10}[0-9A-Za-z._]{22}/g, (id) => {
    if (!names.has(id)) names.set(id, `id${names.size}`)
    return names.get(id)!
  })
  return JSON.parse(text)
}

onBoth("services' transactions around files and versions", (t, { engine, other }) => {
  const seen: unknown[] = []
  setUp(engine)
  const clock = new ManualClock(1_800_000_000_000)
  const tenantsRepo = new TenantsRepo(engine)
  const filesRepo = new FilesRepo(engine)
  const versionsRepo = new VersionsRepo(engine)
  const workspacesRepo = new WorkspacesRepo(engine)
  const outbox = new OutboxRepo(engine)
  const events = new FileEvents(outbox, filesRepo, workspacesRepo, clock, versionsRepo)
  // No data-version source: the cache keeps nothing and reads the rows, as it does on PostgreSQL.
  const cache = new BucketCache({ workspaces: workspacesRepo, versions: versionsRepo, configs: new BucketConfigsRepo(engine) }, undefined)
  const objectVersions = new ObjectVersions({ db: engine, clock, versions: versionsRepo, files: filesRepo, events, cache })
  const workspaces = new WorkspacesService(engine, workspacesRepo, filesRepo, clock, events, true)
  const urls = new SignedUrls(new TokenSigner(Buffer.alloc(32, 7), (id) => tenantsRepo.signingGeneration(id)), filesRepo, clock)
  const service = new FilesService(engine, filesRepo, workspaces, urls, clock, events, { freeing: (fn) => fn() }, objectVersions)
  // fail() does not use the group commit, nor list() and deleted() the objects or the locks (their repositories are #30's next).
  const records = new UploadRecords({
    db: engine,
    commits: {} as GroupCommit,
    clock,
    files: filesRepo,
    workspaces: workspacesRepo,
    quotas: new Quotas(tenantsRepo, workspacesRepo),
    events,
  })
  const fileVersions = new FileVersions({
    db: engine,
    clock,
    files: filesRepo,
    objects: {} as ObjectsRepo,
    versions: versionsRepo,
    objectVersions,
    workspaces: workspacesRepo,
    workspacesService: workspaces,
    quotas: new Quotas(tenantsRepo, workspacesRepo),
    objectLock: {} as ObjectLock,
    events,
  })
  const tenant = tenantsRepo.get(T1)!

  const ws = workspaces.create(tenant, { name: 'photos', slug: 'photos', webhookUrl: 'http://127.0.0.1/hook' })
  t.throws(() => workspaces.create(tenant, { name: 'again', slug: 'photos' }), { code: 'CONFLICT' }, 'a slug taken')
  clock.advance(1)
  seen.push(workspaces.update(tenant, ws.id, { name: 'renamed' }))
  objectVersions.setStatus(ws.id, 'Enabled')
  seen.push(objectVersions.status(ws.id))

  // Three writes of one key in the versioned workspace, as an upload settles each, and an upload still pending.
  const id = (n: number) => `00000000-0000-7000-8000-${String(n).padStart(12, '0')}`
  const write = (n: number, size: number) =>
    engine.transaction(() => {
      clock.advance(10)
      const now = clock.now()
      objectVersions.retire(ws.id, 'k', now)
      filesRepo.insertPending(pending(id(n), { workspaceId: ws.id, objectKey: 'k', createdAt: now, sizeBytes: size }))
      filesRepo.complete(id(n), size, size === 5 ? H2 : H1, now)
      objectVersions.record(T1, ws.id, 'k', id(n), size, now)
      events.settled(id(n))
    })
  write(1, 5)
  write(2, 3 * TIB)
  write(3, 5)
  filesRepo.insertPending(pending(id(4), { workspaceId: ws.id, createdAt: clock.now() + 1, uploadExpiresAt: clock.now() + 100 }))
  filesRepo.insertPending(pending(id(5), { workspaceId: ws.id, createdAt: clock.now() + 2, uploadExpiresAt: clock.now() + 100 }))

  // A page and its total read in one snapshot: a file another connection adds between the two
  // statements is in neither (SQLite's deferred transaction; PostgreSQL's REPEATABLE READ).
  const count = filesRepo.count.bind(filesRepo)
  filesRepo.count = (tenantId, f) => {
    new FilesRepo(other).insertPending(pending(id(9), { workspaceId: ws.id, createdAt: clock.now() + 3 }))
    return count(tenantId, f)
  }
  const page = service.list(tenant, { limit: 2 }, undefined)
  filesRepo.count = count
  t.equal(page.total, 3, 'the total of the page read, not counting the file added meanwhile')
  seen.push(page)
  seen.push(
    service.list(tenant, { limit: 10, workspaceId: ws.id }, undefined).files.map((f) => f.id),
    service.list(tenant, { limit: 10 }, ws.id).total,
  )

  // The current file deleted: a delete marker; the key shows in the deleted list with its versions.
  clock.advance(10)
  service.delete(tenant, id(3))
  t.throws(() => service.delete(tenant, id(3)), { code: 'FILE_NOT_FOUND' }, 'deleted once')
  seen.push(fileVersions.deleted(tenant, { limit: 10 }, undefined), fileVersions.list(tenant, id(1), { limit: 2 }))
  seen.push(fileVersions.list(tenant, id(1), { limit: 2, cursor: fileVersions.list(tenant, id(1), { limit: 2 }).nextCursor! }))
  // A pending upload deleted fails; another fails once.
  service.delete(tenant, id(4))
  t.ok(records.fail(id(5), 'BAD', 'bad body'))
  t.notOk(records.fail(id(5), 'BAD', 'again'), 'failed once')
  seen.push(filesRepo.get(id(4))!.status, filesRepo.get(id(5))!.status, counters(engine))

  // The workspace deleted: its pending uploads fail with their events, its versions go.
  clock.advance(10)
  workspaces.delete(tenant, ws.id)
  seen.push(
    filesRepo.get(id(9))!.status,
    versionsRepo.hasAny(ws.id),
    counters(engine),
    // Sorted: events of one millisecond are listed in the order of their random ids.
    outbox
      .list(null, 100)
      .map((e) => [e.fileId, e.event, e.status, JSON.parse(e.payload)] as const)
      .sort((a, b) => `${a[0]} ${a[1]}`.localeCompare(`${b[0]} ${b[1]}`)),
  )
  return [normalised(seen)]
})
