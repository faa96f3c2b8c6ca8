// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { Readable } from 'node:stream'
import { createHash } from 'node:crypto'
import type { Engine } from '../src/db/engine'
import { commitsFor, EngineCommits, GroupCommit, type Commits } from '../src/db/group-commit'
import { BlobLeasesRepo } from '../src/db/repos/blob-leases'
import { BlobsRepo } from '../src/db/repos/blobs'
import { BucketConfigsRepo } from '../src/db/repos/bucket-configs'
import { FilesRepo } from '../src/db/repos/files'
import { InlineBlobsRepo } from '../src/db/repos/inline-blobs'
import { LeasesRepo } from '../src/db/repos/leases'
import { MultipartRepo } from '../src/db/repos/multipart'
import { ObjectLocksRepo } from '../src/db/repos/object-locks'
import { ObjectsRepo } from '../src/db/repos/objects'
import { OutboxRepo } from '../src/db/repos/outbox'
import { authenticationView, TenantsRepo, type AuthenticatedTenant } from '../src/db/repos/tenants'
import { VersionsRepo } from '../src/db/repos/versions'
import { WorkspacesRepo } from '../src/db/repos/workspaces'
import { DiskBlobStore } from '../src/blobs/disk-blob-store'
import { blobPath } from '../src/blobs/layout'
import type { BlobStore } from '../src/blobs/blob-store'
import { ManualClock } from '../src/lib/clock'
import { AppError } from '../src/errors'
import { S3Error } from '../src/s3/errors'
import { createS3Services } from '../src/s3/services'
import type { S3Deps } from '../src/s3/buckets'
import { BlobWrites } from '../src/services/blob-writes'
import { BucketCache } from '../src/services/bucket-cache'
import { BucketConfigsService } from '../src/services/bucket-configs'
import { Leases } from '../src/services/leases'
import { migrateBlobs } from '../src/services/migrate-blobs'
import { ObjectLock } from '../src/services/object-lock'
import { Quotas } from '../src/services/quotas'
import { RemoteBlobs } from '../src/services/remote-blobs'
import { ObjectVersions } from '../src/services/versions'
import { WorkspaceObjects } from '../src/services/workspace-objects'
import { WorkspacesService } from '../src/services/workspaces'
import { FileEvents } from '../src/webhooks/events'
import { postgres, sqlite, key, T1, T2 } from './pg/repos'
import { withPg } from './pg/fixture'
import { tempDir } from './helper'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

// The S3 front's operations and the services around blobs on both databases (#30): one scenario
// runs on SQLite, on SQLite with every outermost transaction run twice (the first run rolled
// back, as PostgreSQL's engine runs one again after 40001/40P01), and on PostgreSQL; the three
// transcripts must be the same. What the scenario reads back (rows, usage, blobs, stored files)
// is part of the transcript, so a run repeated with an effect outside the database, a counter
// kept from a rolled-back run, or a constraint error that aborts PostgreSQL's transaction shows.

const RETRY = new Error('the first run, rolled back as after a serialization failure')

/**
 * An engine whose outermost transactions run their function twice: the first run is rolled back,
 * then it runs again, as PostgreSQL's engine does after a serialization failure or a deadlock.
 */
function twice(engine: Engine): Engine & { runs: number } {
  let depth = 0
  const wrapped = {
    dialect: engine.dialect,
    runs: 0,
    prepare: engine.prepare.bind(engine),
    pluck: engine.pluck.bind(engine),
    read: engine.read.bind(engine),
    transaction<T>(fn: () => T): T {
      if (depth > 0) return engine.transaction(fn)
      depth++
      try {
        try {
          engine.transaction(() => {
            fn()
            throw RETRY
          })
        } catch (err) {
          if (err !== RETRY) throw err
        }
        wrapped.runs++
        return engine.transaction(fn)
      } finally {
        depth--
      }
    },
  }
  return wrapped as Engine & { runs: number }
}

const MIB = 1024 * 1024
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex')
const body = (b: Buffer) => ({ source: Readable.from([b]), payload: { kind: 'unsigned' as const }, headers: {} })

/** What an operation answered, or the code it failed with. */
async function outcome(fn: () => unknown): Promise<unknown> {
  try {
    const r = await fn()
    return r === undefined ? 'ok' : r
  } catch (err) {
    if (err instanceof S3Error || err instanceof AppError) return { error: err.code }
    throw err
  }
}

interface World {
  engine: Engine
  other: Engine
  commits: Commits
  dir: string
}

/** The core's S3 front and blob services, built over one engine as core.ts builds them over SQLite. */
function build(w: World, region = 'us-east-1') {
  const { engine } = w
  const clock = new ManualClock(1_800_000_000_000)
  for (const d of ['blobs', 'tmp', 'blobs2', 'tmp2']) fs.mkdirSync(path.join(w.dir, d), { recursive: true })
  const store = new DiskBlobStore(path.join(w.dir, 'blobs'), path.join(w.dir, 'tmp'), new InlineBlobsRepo(engine))
  const files = new FilesRepo(engine)
  const blobs = new BlobsRepo(engine)
  const workspaces = new WorkspacesRepo(engine)
  const tenants = new TenantsRepo(engine)
  const versionsRepo = new VersionsRepo(engine)
  const events = new FileEvents(new OutboxRepo(engine), files, workspaces, clock, versionsRepo)
  const bucketConfigsRepo = new BucketConfigsRepo(engine)
  const cache = new BucketCache({ workspaces, versions: versionsRepo, configs: bucketConfigsRepo }, undefined)
  const versions = new ObjectVersions({ db: engine, clock, versions: versionsRepo, files, events, cache })
  const configs = new BucketConfigsService(bucketConfigsRepo, clock, cache)
  // ObjectLock's own transactions are not this file's: only its reads and applyToNew run here, inside ours.
  const objectLock = new ObjectLock({ db: engine as never, clock, locks: new ObjectLocksRepo(engine), versions: versionsRepo, configs })
  const quotas = new Quotas(tenants, workspaces)
  const writes = new BlobWrites({ db: engine, clock, blobs, store })
  const deps: S3Deps = {
    db: engine,
    commits: w.commits,
    clock,
    store,
    writes,
    workspaces,
    buckets: cache,
    objects: new ObjectsRepo(engine),
    multipart: new MultipartRepo(engine),
    blobs,
    files,
    events,
    quotas,
    versions,
    objectLock,
    region,
    maxObjectBytes: 100 * MIB,
    multipartTtlMs: 60_000,
    reserve: { freeing: (run) => run() },
    leases: new Leases(new LeasesRepo(engine), w.commits, clock, process.pid),
  }
  const s3 = createS3Services(deps)
  const workspacesService = new WorkspacesService(engine, workspaces, files, clock, events, false, objectLock)
  const workspaceObjects = new WorkspaceObjects({ db: engine, objects: deps.objects, files, workspaces: workspacesService, versions, objectLock })
  return { ...s3, deps, clock, store, root: path.join(w.dir, 'blobs'), blobs, tenants, writes, workspaceObjects, versionsService: versions }
}

/** Rows that say what the operations did, without the ids and times each run makes anew. */
function state(engine: Engine, root: string): unknown {
  const inline = new InlineBlobsRepo(engine)
  const blobs = engine.prepare<[], { sha256: string; size: number }>('SELECT sha256, size_bytes AS size FROM blobs ORDER BY sha256').all()
  const deleted = <R extends { deleted_at: unknown }>({ deleted_at, ...r }: R) => ({ ...r, deleted: deleted_at !== null })
  return {
    tenants: engine.prepare('SELECT id, used_bytes FROM tenants ORDER BY id').all(),
    workspaces: engine
      .prepare<[], { deleted_at: unknown }>('SELECT tenant_id, slug, used_bytes, deleted_at FROM workspaces ORDER BY tenant_id, slug')
      .all()
      .map(deleted),
    objects: engine
      .prepare<[], { deleted_at: unknown }>(
        'SELECT object_key, size_bytes, sha256, status, deleted_at FROM files WHERE object_key IS NOT NULL ORDER BY object_key, sha256, status',
      )
      .all()
      .map(deleted),
    uploads: engine.pluck('SELECT count(*) FROM s3_uploads').get(),
    parts: engine.prepare('SELECT part_number, size_bytes, sha256 FROM s3_parts ORDER BY part_number, sha256').all(),
    blobs,
    // Every recorded blob's content is stored (inline, or a file).
    stored: blobs.map((b) => inline.exists(b.sha256) || fs.existsSync(blobPath(root, b.sha256))),
    deferred: engine.pluck('SELECT count(*) FROM blob_releases').get(),
  }
}

async function scenario(t: Test, w: World): Promise<unknown[]> {
  const seen: unknown[] = []
  const c = build(w)
  const tenantsRepo = new TenantsRepo(w.engine)
  const base = { keyKind: 'live' as const, webhookSecret: 'w', quotaBytes: 100 * MIB, allowedFileTypes: [], createdAt: 1 }
  tenantsRepo.insert({ ...base, id: T1, name: 'one', keyHash: key(1) })
  tenantsRepo.insert({ ...base, id: T2, name: 'two', keyHash: key(2) })
  const one: AuthenticatedTenant = authenticationView(tenantsRepo.get(T1)!)
  const two: AuthenticatedTenant = authenticationView(tenantsRepo.get(T2)!)

  // Buckets: created, created again (us-east-1: 200, the same bucket), another tenant's own.
  const photos = c.buckets.create(one, 'photos')
  seen.push(c.buckets.create(one, 'photos').id === photos.id, c.buckets.create(two, 'photos').tenantId === T2)
  c.buckets.create(one, 'empty')

  // Another node creates `race` between this one's check and its insert: the unique index refuses
  // the insert (on PostgreSQL it aborts the transaction), and the answer is the one a second
  // request gets: the bucket (us-east-1), BucketAlreadyOwnedByYou elsewhere, never a 500.
  const racing = (region: string) => {
    let stale = true
    const workspaces = Object.create(c.deps.workspaces) as WorkspacesRepo
    workspaces.getBySlug = (tenantId, slug) => {
      if (stale) return ((stale = false), undefined)
      return c.deps.workspaces.getBySlug(tenantId, slug)
    }
    return createS3Services({ ...c.deps, workspaces, region }).buckets
  }
  const otherNode = new WorkspacesRepo(w.other)
  otherNode.insert({ id: 'race-1', tenantId: T1, name: 'race', slug: 'race', quotaBytes: null, metadata: null, webhookUrl: null, now: 2 })
  seen.push(await outcome(() => racing('us-east-1').create(one, 'race').id))
  otherNode.insert({ id: 'race-2', tenantId: T1, name: 'race2', slug: 'race2', quotaBytes: null, metadata: null, webhookUrl: null, now: 2 })
  seen.push(await outcome(() => racing('eu-west-1').create(one, 'race2').id))
  t.equal(c.deps.workspaces.getBySlug(T1, 'race')?.id, 'race-1', "the other node's bucket is the one kept")

  // PutObject (group commit), a conditional one refused, HeadObject, tags, a shared copy.
  const hello = Buffer.from('hello, both databases')
  const put = await c.objects.put(one, 'photos', 'a.txt', body(hello), { contentType: 'text/plain', meta: { who: 'é' } })
  seen.push(put.etag === `"${md5(hello)}"`, put.row.sha256 === sha(hello))
  seen.push(await outcome(() => c.objects.put(one, 'photos', 'a.txt', body(Buffer.from('no')), { contentType: 'text/plain', meta: {} }, { ifNoneMatch: '*' })))
  const tagged = c.objects.setTags(one, 'photos', 'a.txt', { colour: 'blue' })
  seen.push(tagged.info?.tags, c.objects.head(one, 'photos', 'a.txt').info?.tags)
  const copied = c.objects.copy(one, { bucket: 'photos', key: 'a.txt' }, { bucket: 'photos', key: 'b.txt' }, { copy: true }, 'copy', () => {})
  seen.push(copied.row.sha256 === put.row.sha256, copied.row.info?.tags, copied.row.info?.meta)
  seen.push(await outcome(() => c.objects.copy(one, { bucket: 'photos', key: 'nope' }, { bucket: 'photos', key: 'c.txt' }, { copy: true }, 'copy', () => {})))
  seen.push(await outcome(() => c.objects.head(two, 'photos', 'a.txt').key), state(w.engine, c.root))

  // DeleteObject with a condition that fails, then DeleteObjects with one of each outcome.
  seen.push(await outcome(() => c.objects.delete(one, 'photos', 'a.txt', undefined, { ifMatch: '"0"' })))
  seen.push(c.objects.deleteVersions(one, 'photos', ['a.txt', 'missing', { key: 'b.txt', ifMatch: '"bad"' }, { key: '' }]))
  seen.push(c.objects.delete(one, 'photos', 'b.txt'), state(w.engine, c.root))
  // Deferred releases (a crash after a commit that deferred them): content nothing references
  // goes, counted once however often its transaction ran; content still referenced stays.
  const unreferenced = 'd0'.repeat(32)
  c.blobs.insertIfMissing(unreferenced, 7, c.clock.now())
  c.blobs.deferRelease(unreferenced, c.clock.now())
  c.blobs.deferRelease(sha(hello), c.clock.now())
  seen.push(state(w.engine, c.root), await c.writes.releaseDeferred(), state(w.engine, c.root))

  // A versioned bucket: two writes keep both versions; a delete adds a marker.
  const v = c.buckets.create(one, 'versioned')
  c.versionsService.setStatus(v.id, 'Enabled')
  await c.objects.put(one, 'versioned', 'k', body(Buffer.from('one')), { contentType: 'text/plain', meta: {} })
  await c.objects.put(one, 'versioned', 'k', body(Buffer.from('two')), { contentType: 'text/plain', meta: {} })
  const marker = c.objects.delete(one, 'versioned', 'k')
  seen.push(marker.deleteMarker, await outcome(() => c.objects.head(one, 'versioned', 'k')), state(w.engine, c.root))

  // Multipart: part 1 uploaded twice (the first content released in the second's transaction),
  // part 2, completion (the parts' content released after its commit); an abort; an expiry.
  const up = c.multipart.create(one, 'photos', 'big', { contentType: 'application/octet-stream', meta: {} })
  const [p1a, p1b, p2] = [Buffer.alloc(5 * MIB, 'a'), Buffer.alloc(5 * MIB, 'b'), Buffer.from('tail')]
  await c.multipart.uploadPart(one, 'photos', 'big', up.id, 1, body(p1a))
  seen.push(state(w.engine, c.root))
  const e1 = await c.multipart.uploadPart(one, 'photos', 'big', up.id, 1, body(p1b))
  const e2 = await c.multipart.uploadPart(one, 'photos', 'big', up.id, 2, body(p2))
  seen.push(e1.etag, e2.etag, state(w.engine, c.root))
  seen.push(await outcome(() => c.multipart.uploadPart(two, 'photos', 'big', up.id, 3, body(p2))))
  const big = await c.multipart.complete(one, 'photos', 'big', up.id, [
    { partNumber: 1, etag: e1.etag, checksums: {} },
    { partNumber: 2, etag: e2.etag, checksums: {} },
  ])
  seen.push(big.size, big.info?.etag, big.sha256 === sha(Buffer.concat([p1b, p2])), state(w.engine, c.root))
  const aborted = c.multipart.create(one, 'photos', 'gone', { contentType: 'text/plain', meta: {} })
  await c.multipart.uploadPart(one, 'photos', 'gone', aborted.id, 1, body(Buffer.from('abort me')))
  await c.multipart.abort(one, 'photos', 'gone', aborted.id)
  seen.push(await outcome(() => c.multipart.listParts(one, 'photos', 'gone', aborted.id, 0, 10)))
  const expiring = c.multipart.create(one, 'photos', 'late', { contentType: 'text/plain', meta: {} })
  await c.multipart.uploadPart(one, 'photos', 'late', expiring.id, 1, body(Buffer.from('expire me')))
  c.clock.advance(61_000)
  seen.push(c.multipart.reclaim(), state(w.engine, c.root))

  // Buckets and workspaces deleted only when empty.
  seen.push(await outcome(() => c.buckets.delete(one, 'photos')), await outcome(() => c.buckets.delete(one, 'empty')))
  seen.push(
    await outcome(() => c.workspaceObjects.deleteIfEmpty(one, v.id)),
    await outcome(() => c.workspaceObjects.deleteIfEmpty(one, c.deps.workspaces.getBySlug(T1, 'race')!.id)),
  )
  seen.push(state(w.engine, c.root))

  // migrate-blobs: every recorded blob into a second disk store, verified; run again: all present.
  const to = new DiskBlobStore(path.join(w.dir, 'blobs2'), path.join(w.dir, 'tmp2'))
  seen.push(await migrateBlobs({ db: w.engine, from: c.store, to }), await migrateBlobs({ db: w.engine, from: c.store, to }))
  return seen
}

/** RemoteBlobs' leases and tombstones over a store that records its deletions. */
async function remoteScenario(t: Test, w: World): Promise<unknown[]> {
  const seen: unknown[] = []
  const clock = new ManualClock(1_800_000_000_000)
  const removed: string[] = []
  const store = { remove: async (sha256: string) => void removed.push(sha256) } as unknown as BlobStore
  const blobs = new BlobsRepo(w.engine)
  const remote = new RemoteBlobs({ db: w.engine, clock, leases: new BlobLeasesRepo(w.engine), blobs, store, timeoutMs: 1000 })
  const [H1, H2] = ['c1', 'c2'].map((x) => x.repeat(32)) as [string, string]
  await remote.lease('u1', H1)
  seen.push(
    w.engine.transaction(() => remote.condemnInTx(H1)),
    remote.pendingDeletions(),
  )
  await remote.discardIfUnused('u1', H1)
  seen.push(removed.slice(), remote.pendingDeletions())
  // A tombstone a deleter left: the next upload of the content finishes its deletion, then leases it.
  w.engine.transaction(() => remote.condemnInTx(H2))
  await remote.lease('u2', H2)
  seen.push(removed.slice(), remote.pendingDeletions())
  w.engine.transaction(() => remote.settleInTx('u2', H2))
  seen.push(await outcome(() => w.engine.transaction(() => remote.settleInTx('u2', H2))))
  remote.release('u3')
  seen.push(await remote.drain())
  t.pass('remote leases and tombstones')
  return seen
}

/** Group commit: each unit committed (or rolled back) alone, answered once durable; unflushed units at once. */
async function commitScenario(t: Test, w: World): Promise<unknown[]> {
  const tenants = new TenantsRepo(w.engine)
  const base = { keyKind: 'live' as const, webhookSecret: 'w', quotaBytes: 10, allowedFileTypes: [], createdAt: 1 }
  const ins = (id: string, n: number) => () => tenants.insert({ ...base, id, name: `n${n}`, keyHash: key(n) })
  const units = [
    w.commits.run(ins(T1, 1)),
    w.commits.run(() => {
      ins(T2, 2)()
      throw new Error('this unit fails')
    }),
    // A duplicate id: refused by the primary key, rolled back alone (on PostgreSQL too).
    w.commits.run(ins(T1, 3)),
    w.commits.run(() => tenants.get(T1)?.name),
  ]
  const settled = await Promise.allSettled(units)
  const seen: unknown[] = settled.map((s) => (s.status === 'fulfilled' ? (s.value ?? 'ok') : 'rejected'))
  seen.push(w.commits.runUnflushed(() => tenants.list().map((x) => x.name)))
  await w.commits.flush()
  seen.push(new TenantsRepo(w.other).list().map((x) => x.name))
  t.equal(w.commits.stats.jobs, 2, 'the units committed by run() are counted')
  return seen
}

/** Runs `body` on SQLite, on SQLite with every transaction run twice, and on PostgreSQL: the same transcript from each. */
function onAll(title: string, body: (t: Test, w: World) => Promise<unknown[]>): void {
  t.test(`${title}: the same answers on SQLite, on SQLite run twice and on PostgreSQL`, async (t) => {
    let onSqlite: unknown[] = []
    await t.test('SQLite', async (t) => {
      const dbs = await sqlite(t)
      const commits = commitsFor(dbs.engine)
      t.teardown(() => commits.close())
      t.ok(commits instanceof GroupCommit, "SQLite's group commit")
      onSqlite = await body(t, { ...dbs, commits, dir: tempDir(t) })
    })
    await t.test('SQLite, each transaction run twice', async (t) => {
      const dbs = await sqlite(t)
      const engine = twice(dbs.engine)
      const got = await body(t, { engine, other: dbs.other, commits: new EngineCommits(engine), dir: tempDir(t) })
      t.ok(engine.runs > 0, `${engine.runs} transactions ran twice`)
      t.same(got, onSqlite, 'a second run changes no answer')
    })
    withPg(t, 'PostgreSQL', (url) => {
      void t.test('PostgreSQL', async (t) => {
        const dbs = await postgres(t, url)
        const commits = commitsFor(dbs.engine)
        t.ok(commits instanceof EngineCommits, 'one engine transaction a unit')
        t.same(await body(t, { ...dbs, commits, dir: tempDir(t) }), onSqlite, "PostgreSQL's answers are SQLite's")
      })
    })
  })
}

onAll('the S3 front: buckets, objects, versions, multipart, deletes and blobs', scenario)
onAll('remote blobs: leases, tombstones and the drain', remoteScenario)
onAll('group commit', commitScenario)
