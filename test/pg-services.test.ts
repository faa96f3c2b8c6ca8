// @suites: sqlite
import { constraintViolated, type Engine, type Statement } from '../src/db/engine'
import { PgError } from '../src/db/pg/errors'
import { FilesRepo } from '../src/db/repos/files'
import { OutboxRepo } from '../src/db/repos/outbox'
import { TenantsRepo } from '../src/db/repos/tenants'
import { WorkspacesRepo } from '../src/db/repos/workspaces'
import { WorkspacesService } from '../src/services/workspaces'
import { ManualClock } from '../src/lib/clock'
import type { DiskReserve } from '../src/lib/disk-reserve'
import { BucketConfigsRepo } from '../src/db/repos/bucket-configs'
import { ObjectLocksRepo } from '../src/db/repos/object-locks'
import { VersionsRepo } from '../src/db/repos/versions'
import { BucketConfigsService } from '../src/services/bucket-configs'
import { ObjectLock } from '../src/services/object-lock'
import type { BlobStore } from '../src/blobs/blob-store'
import { BlobsRepo } from '../src/db/repos/blobs'
import { BlobWrites } from '../src/services/blob-writes'
import { GarbageCollector } from '../src/services/gc'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import { DiskBlobStore } from '../src/blobs/disk-blob-store'
import { encryptBlobs } from '../src/services/encrypt-blobs'
import { encryptedStore } from '../src/services/encryption'
import { tempDir } from './helper'
import { EncryptionRepo } from '../src/db/repos/encryption'
import { EncryptionKeyError, openEncryption, rotateMasterKey, SseS3Keys } from '../src/services/encryption'
import { LifecycleRepo } from '../src/db/repos/lifecycle'
import { MultipartRepo } from '../src/db/repos/multipart'
import { BucketCache } from '../src/services/bucket-cache'
import { LifecycleService } from '../src/services/lifecycle'
import { ObjectVersions } from '../src/services/versions'
import { FileEvents } from '../src/webhooks/events'
import { S3CredentialsRepo } from '../src/db/repos/s3-credentials'
import { S3CredentialsService } from '../src/services/s3-credentials'
import { TenantsService } from '../src/services/tenants'
import t, { type Test } from 'tap'
import { withPg } from './pg/fixture'
import { key, onBoth, pending, postgres, sqlite, T1, T2, twoTenants, W1, type Databases } from './pg/repos'

// The services that ran their own better-sqlite3 transactions, on the engine's (#30): each
// scenario runs on SQLite and on PostgreSQL, checked as it goes, and the two transcripts must be
// the same. Each service runs on `retrying(engine)`, whose every transaction runs twice, the first
// run rolled back, as PostgreSQL's engine runs one again after a serialization failure: what a
// transaction counted in memory or did outside the database would show twice. A check-then-insert
// meets the row another node inserted after its check (`afterCheck`).

/**
 * `engine` with each outermost transaction run twice, the first run rolled back, as PostgreSQL's
 * engine does after a serialization failure or a deadlock (40001, 40P01): on PostgreSQL by that
 * engine's own retry, handed a 40001 at the first run's end; on SQLite, which never retries, here.
 * `runs` counts the runs of transactions' functions.
 */
function retrying(engine: Engine): Engine & { runs: number } {
  let depth = 0
  const wrapped = {
    dialect: engine.dialect,
    runs: 0,
    prepare: <P extends unknown[], R>(sql: string): Statement<P, R> => engine.prepare<P, R>(sql),
    pluck: <P extends unknown[], V>(sql: string): Statement<P, V> => engine.pluck<P, V>(sql),
    read: <T>(fn: () => T): T => engine.read(fn),
    transaction<T>(fn: () => T): T {
      if (depth > 0) return engine.transaction(fn)
      let first = true
      const run = (): T => {
        depth++
        try {
          wrapped.runs++
          const result = fn()
          if (first) {
            first = false
            throw new PgError('could not serialize access (made by the test)', '40001')
          }
          return result
        } finally {
          depth--
        }
      }
      if (engine.dialect === 'postgres') return engine.transaction(run)
      try {
        return engine.transaction(run)
      } catch (err) {
        if (!(err instanceof PgError)) throw err
        return engine.transaction(run)
      }
    },
  }
  return wrapped
}

/**
 * Another node's row written between a service's check (`target[method]`, its next `calls` calls)
 * and its insert: on PostgreSQL by the second connection right after the last of those checks,
 * committed at once as another node's would be; on SQLite, whose write lock keeps every other
 * connection out until the commit, before the call, the checks seeing the database as it was
 * without it.
 */
function afterCheck<T extends object>(dbs: Databases, target: T, method: keyof T & string, twin: (engine: Engine) => void, calls = 1): void {
  const check = target[method] as (...args: unknown[]) => unknown
  if (dbs.engine.dialect === 'sqlite') twin(dbs.engine)
  let left = calls
  Object.assign(target, {
    [method]: function (this: unknown, ...args: unknown[]) {
      if (--left === 0) Object.assign(target, { [method]: check })
      if (dbs.engine.dialect === 'sqlite') return undefined
      const seen = check.apply(this, args)
      if (left === 0) twin(dbs.other)
      return seen
    },
  })
}

/** onBoth (test/pg/repos.ts) for a scenario that awaits: a service whose work yields between its transactions. */
function onBothAsync(title: string, scenario: (t: Test, dbs: Databases) => Promise<unknown[]>): void {
  t.test(`${title}: the same answers on SQLite and on PostgreSQL`, async (t) => {
    let onSqlite: unknown[] = []
    await t.test('SQLite', async (t) => {
      onSqlite = await scenario(t, await sqlite(t))
    })
    withPg(t, 'PostgreSQL', (url) => {
      void t.test('PostgreSQL', async (t) => {
        t.same(await scenario(t, await postgres(t, url)), onSqlite, "PostgreSQL's answers are SQLite's")
      })
    })
  })
}

/** Random ids (uuidv7) replaced by their order of first appearance, so that two runs compare. */
function normalised(seen: unknown[]): unknown {
  const names = new Map<string, string>()
  const text = JSON.stringify(seen).replace(/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => {
    if (!names.has(id)) names.set(id, `id${names.size}`)
    return names.get(id)!
  })
  return JSON.parse(text)
}

/** What `fn` throws. */
function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  throw new Error('nothing thrown')
}

/** A tenant row for a twin another node inserts. */
const tenantRow = (id: string, name: string, n: number) => ({
  id,
  name,
  keyHash: key(n),
  keyKind: 'live' as const,
  webhookSecret: 'w',
  quotaBytes: 1,
  allowedFileTypes: ['application/pdf'],
  createdAt: 1,
})

onBoth('TenantsService on the engine', (t, dbs) => {
  const { engine } = dbs
  const seen: unknown[] = []
  const clock = new ManualClock(1_800_000_000_000)
  const repo = new TenantsRepo(engine)
  const db = retrying(engine)
  const service = new TenantsService(db, repo, clock, { files: new FilesRepo(engine), workspaces: new WorkspacesRepo(engine), outbox: new OutboxRepo(engine) })
  const view = ({ webhookSecret: _secret, ...tenant }: { webhookSecret: string }) => tenant

  const a = service.create({ name: 'Acme', quotaBytes: 1000 })
  clock.advance(1)
  const b = service.create({ name: 'Beta', allowedFileTypes: ['application/pdf'] })
  t.throws(() => service.create({ name: 'ACME' }), { code: 'CONFLICT' }, 'a name taken, whatever its case')
  t.equal(service.authenticate(a.apiKey)?.id, a.tenant.id, 'its key authenticates')

  // Two nodes create one name at once: the one whose insert the index refuses answers CONFLICT too.
  afterCheck(dbs, repo, 'getByName', (e) => new TenantsRepo(e).insert(tenantRow(T1, 'gamma', 1)))
  t.throws(() => service.create({ name: 'Gamma' }), { code: 'CONFLICT', message: /"gamma" already exists/ }, "another node's create between check and insert")
  // A unique violation that is not the name's (a fixed key given twice) is not made a CONFLICT.
  const twice = thrown(() => service.create({ name: 'Epsilon' }, a.apiKey))
  t.equal(constraintViolated(twice), 'unique', "a fixed key that is another tenant's: key_hash's violation")
  t.notMatch(twice, { code: 'CONFLICT' }, 'as it is')
  t.throws(() => service.update(b.tenant.id, { name: 'acme' }), { code: 'CONFLICT' }, 'renamed to a name taken')
  afterCheck(dbs, repo, 'getByName', (e) => new TenantsRepo(e).insert(tenantRow(T2, 'delta', 2)))
  t.throws(
    () => service.update(b.tenant.id, { name: 'Delta' }),
    { code: 'CONFLICT', message: /"Delta" already exists/ },
    "another node's rename between check and update",
  )
  clock.advance(1)
  seen.push(view(service.update(b.tenant.id, { name: 'Beta 2', quotaBytes: 5 })))

  const page = service.list({ limit: 2 })
  seen.push(page.tenants.map(view), service.list({ limit: 2, cursor: page.nextCursor! }).tenants.map(view))
  seen.push(view(service.show(a.tenant.id)), service.topByUsage(2).total)

  // Three deleted (their names free again, their placeholders apart), then purged: counted once
  // each although the purge's transaction ran twice.
  for (const id of [b.tenant.id, T1, T2]) service.delete(id)
  t.throws(() => service.show(b.tenant.id), { code: 'TENANT_NOT_FOUND' })
  const runs = db.runs
  t.equal(service.purgeDeleted(), 3, 'three tenants purged')
  t.equal(db.runs - runs, 2, "the purge's transaction ran twice")
  t.equal(service.purgeDeleted(), 0, 'none left to purge')
  seen.push(repo.list().map((x) => x.name))
  return [normalised(seen)]
})

onBoth('S3CredentialsService on the engine', (t, dbs) => {
  const seen: unknown[] = []
  const clock = new ManualClock(1_800_000_000_000)
  const secret = Buffer.alloc(32, 9)
  /** The service of one node: its own connection's repositories. */
  const node = (engine: Engine) => {
    const tenants = new TenantsService(engine, new TenantsRepo(engine), clock, {
      files: new FilesRepo(engine),
      workspaces: new WorkspacesRepo(engine),
      outbox: new OutboxRepo(engine),
    })
    const repo = new S3CredentialsRepo(engine)
    return { tenants, repo, s3: new S3CredentialsService(retrying(engine), repo, new TenantsRepo(engine), clock, secret, () => tenants.authChanges()) }
  }
  const one = node(dbs.engine)
  const two = node(dbs.other)
  const { tenant } = one.tenants.create({ name: 'acme' })

  const made = one.s3.create(tenant.id)
  t.match(made.accessKeyId, /^CK[A-Z0-9]{18}$/)
  seen.push(one.s3.create(tenant.id, { accessKeyId: 'FIXED-ONE', secretAccessKey: 'secret-one' }))
  t.throws(() => one.s3.create(tenant.id, { accessKeyId: 'FIXED-ONE', secretAccessKey: 'other' }), { code: 'CONFLICT' }, 'a fixed id taken')
  // Two nodes create one fixed id at once: the one whose insert the primary key refuses answers CONFLICT too.
  const sealed = { tenantId: tenant.id, secretSealed: Buffer.alloc(40, 1), createdAt: 1 }
  afterCheck(dbs, one.repo, 'get', (e) => new S3CredentialsRepo(e).insert({ ...sealed, accessKeyId: 'FIXED-TWO' }))
  t.throws(
    () => one.s3.create(tenant.id, { accessKeyId: 'FIXED-TWO', secretAccessKey: 'secret-two' }),
    { code: 'CONFLICT' },
    "another node's between check and insert",
  )
  seen.push(one.s3.list(tenant.id).map((c) => c.accessKeyId === made.accessKeyId || c.accessKeyId))

  // Verified and cached on one node; revoked on the other, refused on the first at its next lookup.
  t.same(one.s3.lookup('FIXED-ONE')?.secret, 'secret-one')
  t.same(one.s3.lookup(made.accessKeyId)?.secret, made.secretAccessKey)
  two.s3.revoke(tenant.id, 'FIXED-ONE')
  t.equal(one.s3.lookup('FIXED-ONE'), undefined, "revoked by another node's connection: refused at once")
  one.s3.revoke(tenant.id, made.accessKeyId)
  t.equal(one.s3.lookup(made.accessKeyId), undefined, 'revoked here')
  t.throws(() => one.s3.revoke(tenant.id, made.accessKeyId), { code: 'NOT_FOUND' }, 'revoked once')
  seen.push(one.s3.list(tenant.id))
  return [normalised(seen)]
})

/** Tenants T1 and T2, T1's workspace W1 (slug 'w'), and rows of object versions in it: [key, version id, file id]. */
function bucketWith(engine: Engine, rows: [string, string, string | null][]): void {
  twoTenants(engine)
  new WorkspacesRepo(engine).insert({ id: W1, tenantId: T1, name: 'w', slug: 'w', quotaBytes: null, metadata: null, webhookUrl: null, now: 1 })
  const insert = engine.prepare(
    `INSERT INTO object_versions (workspace_id, object_key, version_id, seq, tenant_id, file_id, size_bytes, created_at)
     VALUES (?, ?, ?, ?, ?, ?, 0, 1)`,
  )
  engine.transaction(() => rows.forEach(([key, versionId, fileId], i) => insert.run(W1, key, versionId, i + 1, T1, fileId)))
}

onBoth('ObjectLock on the engine', (t, { engine }) => {
  const seen: unknown[] = []
  bucketWith(engine, [
    ['a', 'v1', null],
    ['b', 'v1', null],
  ])
  const clock = new ManualClock(1_800_000_000_000)
  const now = clock.now()
  const versions = new VersionsRepo(engine)
  const db = retrying(engine)
  const lock = new ObjectLock({
    db,
    clock,
    locks: new ObjectLocksRepo(engine),
    versions,
    configs: new BucketConfigsService(new BucketConfigsRepo(engine), clock),
  })
  t.throws(() => lock.putLegalHold(W1, 'a', 'v1', true), { code: 'InvalidRequest' }, 'not before the bucket has lock')

  lock.enableOnNewBucket(W1)
  seen.push(versions.versioning(W1), lock.config(W1))
  const runs = db.runs
  lock.putRetention(W1, 'a', 'v1', { mode: 'COMPLIANCE', until: now + 1000 }, false)
  t.equal(db.runs - runs, 2, 'its transaction ran twice')
  t.throws(() => lock.putRetention(W1, 'a', 'v1', { mode: 'COMPLIANCE', until: now + 999 }, true), { code: 'AccessDenied' }, 'COMPLIANCE never shortened')
  lock.putRetention(W1, 'a', 'v1', { mode: 'COMPLIANCE', until: now + 2000 }, false)
  lock.putRetention(W1, 'b', 'v1', { mode: 'GOVERNANCE', until: now + 1000 }, false)
  t.throws(() => lock.putRetention(W1, 'b', 'v1', null, false), { code: 'AccessDenied' }, 'GOVERNANCE removed only with the bypass')
  lock.putRetention(W1, 'b', 'v1', null, true)
  lock.putLegalHold(W1, 'b', 'v1', true)
  t.throws(() => lock.putLegalHold(W1, 'c', 'v1', true), { code: 'NoSuchVersion' })
  t.throws(() => lock.putRetention(W1, 'b', 'v9', null, true), { code: 'NoSuchVersion' })
  seen.push(lock.get(W1, 'a', 'v1'), lock.get(W1, 'b', 'v1'))
  t.throws(() => lock.checkWorkspaceDeletable(W1), { code: 'OBJECT_LOCKED' })
  t.throws(() => lock.checkTenantDeletable(T1), { code: 'OBJECT_LOCKED' })
  clock.advance(2000)
  lock.putLegalHold(W1, 'b', 'v1', false)
  lock.checkWorkspaceDeletable(W1)
  seen.push(lock.get(W1, 'a', 'v1'), lock.get(W1, 'b', 'v1'))
  return seen
})

onBothAsync('LifecycleService on the engine', async (t, { engine }) => {
  bucketWith(engine, [])
  // Delete markers (no file), noncurrent since long ago or current; logs/d's noncurrent one under a legal hold.
  const version = engine.prepare(
    `INSERT INTO object_versions (workspace_id, object_key, version_id, seq, tenant_id, file_id, size_bytes, created_at, noncurrent_at, legal_hold)
     VALUES (?, ?, ?, ?, ?, NULL, 0, 1, ?, ?)`,
  )
  for (const [key, seq, noncurrentAt, hold] of [
    ['logs/a', 1, 1, 0],
    ['logs/a', 2, null, 0],
    ['logs/b', 1, null, 0],
    ['logs/d', 1, 1, 1],
    ['logs/d', 2, null, 0],
    ['other/c', 1, null, 0],
  ] as const)
    version.run(W1, key, `v${seq}`, seq, T1, noncurrentAt, hold)
  const multipart = new MultipartRepo(engine)
  for (const [id, key] of [
    ['u1', 'logs/x'],
    ['u2', 'other/y'],
  ] as const)
    multipart.insert({ id, tenantId: T1, workspaceId: W1, key, info: { contentType: 'text/plain', meta: {} }, createdAt: 1, expiresAt: 9e15 })

  const clock = new ManualClock(1_800_000_000_000)
  const db = retrying(engine)
  const files = new FilesRepo(engine)
  const versionsRepo = new VersionsRepo(engine)
  const workspaces = new WorkspacesRepo(engine)
  const configs = new BucketConfigsRepo(engine)
  const events = new FileEvents(new OutboxRepo(engine), files, workspaces, clock, versionsRepo)
  const cache = new BucketCache({ workspaces, versions: versionsRepo, configs }, undefined)
  const lifecycle = new LifecycleService({
    db,
    clock,
    configs: new BucketConfigsService(configs, clock),
    repo: new LifecycleRepo(engine),
    versions: new ObjectVersions({ db, clock, versions: versionsRepo, files, events, cache }),
    reserve: { freeing: (fn) => fn() } as DiskReserve,
    // As the S3 front's abortInTx: rows only, inside the caller's transaction.
    abortUpload: (id) => void multipart.delete(id),
    dayMs: 1000,
  })
  lifecycle.put(W1, {
    rules: [
      {
        id: 'logs',
        status: 'Enabled',
        filter: { prefix: 'logs/' },
        expiration: { expiredObjectDeleteMarker: true },
        noncurrentExpiration: { noncurrentDays: 1 },
        abortIncompleteMultipartUpload: { daysAfterInitiation: 1 },
      },
    ],
  })
  const runs = db.runs
  const outcome = await lifecycle.pass()
  // Counted once although every transaction ran twice: logs/a's noncurrent marker, then its lone
  // current one and logs/b's; logs/d's is held; u1 aborted, u2 outside the prefix.
  t.match(outcome, { expired: 0, noncurrentDeleted: 1, markersRemoved: 2, uploadsAborted: 1, complete: true })
  t.ok(db.runs - runs >= 4, 'each transaction ran twice')
  const left = engine.prepare('SELECT object_key, version_id, noncurrent_at FROM object_versions ORDER BY object_key, seq').all()
  t.match(await lifecycle.pass(), { expired: 0, noncurrentDeleted: 0, markersRemoved: 0, uploadsAborted: 0, keys: 2 }, 'a second pass finds nothing more to do')
  return [outcome, left, engine.pluck('SELECT id FROM s3_uploads ORDER BY id').all()]
})

onBothAsync('GarbageCollector on the engine', async (t, { engine }) => {
  twoTenants(engine)
  const clock = new ManualClock(1_800_000_000_000)
  const [H1, H2, H3, H4] = ['a1', 'b2', 'c3', 'd4'].map((x) => x.repeat(32)) as [string, string, string, string]
  const blobs = new BlobsRepo(engine)
  const files = new FilesRepo(engine)
  blobs.insertIfMissing(H1, 3, 1)
  blobs.insertIfMissing(H2, 5, 1)
  blobs.insertIfMissing(H3, 7, 1)
  // f1 and f2 deleted long ago (f1 the only one with H1), f3 live with H2; H3 referenced by nothing.
  const file = (n: number) => `00000000-0000-7000-8000-${String(n).padStart(12, '0')}`
  for (const [n, sha, size, deleted] of [
    [1, H1, 3, true],
    [2, H2, 5, true],
    [3, H2, 5, false],
  ] as const) {
    const id = file(n)
    files.insertPending(pending(id, { originalName: `${n}.bin`, sizeBytes: size }))
    files.complete(id, size, sha, 200)
    if (deleted) files.softDelete(T1, id, 300)
  }
  // T2 deleted, with no file left: its row goes after the files.
  const db = retrying(engine)
  const tenants = new TenantsService(db, new TenantsRepo(engine), clock, { files, workspaces: new WorkspacesRepo(engine), outbox: new OutboxRepo(engine) })
  tenants.delete(T2)

  // The disk store as the collector uses it: removals inside the transaction, idempotent; H4 is
  // stored with no row (an orphan), old enough to go.
  const removed = new Set<string>()
  const stored = [H1, H2, H3, H4]
  const store = {
    remote: false,
    removeSync: (sha: string) => void removed.add(sha),
    async *list() {
      for (const sha256 of stored) if (!removed.has(sha256)) yield { sha256, size: 1, mtimeMs: 0 }
    },
  } as unknown as BlobStore
  // BlobWrites' own transactions (its deferred releases) are not this test's: there are none to release here.
  const writes = new BlobWrites({ db: engine as never, clock, blobs, store })
  writes.releaseDeferred = async () => ({ blobs: 0, bytes: 0 })
  const gc = new GarbageCollector({
    db,
    clock,
    files,
    blobs,
    store,
    tenants,
    retentionMs: 1000,
    writes,
    reserve: { freeing: (fn) => fn(), ensure: () => 'off' },
  })

  const runs = db.runs
  // Counted once although each transaction ran twice: f1 and f2 purged, H1 released, H2 kept for f3, then H3 (full).
  const collected = await gc.collect(true)
  t.same(collected, { filesPurged: 2, blobsRemoved: 2, bytesFreed: 10, tenantsPurged: 1 })
  t.ok(db.runs - runs >= 6, 'each transaction ran twice')
  t.same([...removed].sort(), [H1, H3], 'H1 and H3 removed from the store')
  t.equal(await gc.removeOrphans(), 1, 'the orphan H4, counted once')
  t.same(await gc.collect(true), { filesPurged: 0, blobsRemoved: 0, bytesFreed: 0, tenantsPurged: 0 }, 'nothing left to collect')
  return [
    collected,
    [...removed].sort(),
    engine.pluck('SELECT sha256 FROM blobs ORDER BY sha256').all(),
    engine.pluck('SELECT id FROM files ORDER BY id').all(),
    engine.pluck('SELECT id FROM tenants ORDER BY id').all(),
  ]
})

onBoth('encryption at start, the SSE-S3 key and rotation on the engine', (t, dbs) => {
  const { engine, other } = dbs
  const seen: unknown[] = []
  const [master, next] = [Buffer.alloc(32, 1), Buffer.alloc(32, 2)]
  const db = retrying(engine)
  // Without a master key: the SSE-S3 key made by two nodes at once is the first one's for both.
  t.equal(openEncryption(db, undefined, 1), undefined, 'not encrypted')
  const mine = new SseS3Keys(db, undefined, () => 1)
  const theirs = new SseS3Keys(retrying(other), undefined, () => 2)
  const made = theirs.key(true)
  t.same(mine.key(true), made, "the other node's key, kept")

  // Two nodes turn encryption on at once: the one whose insert the primary key refuses is told so.
  const row = (e: Engine) => new EncryptionRepo(e).insert(Buffer.alloc(60, 7), 9, false, 1)
  // Its two checks: before the transaction and inside it.
  afterCheck(dbs, EncryptionRepo.prototype, 'get', row, 2)
  t.throws(() => openEncryption(db, master, 1), new EncryptionKeyError('another process turned encryption on at the same time; start again'))
  engine.prepare('DELETE FROM encryption WHERE id = 1').run()

  const opened = openEncryption(db, master, 1)!
  t.ok(opened, 'encrypted from now on')
  seen.push(opened.repo.get()?.plainRemaining, opened.repo.sseS3Key()?.wrapped)
  t.same(new SseS3Keys(db, master, () => 1).key(), made, 'the SSE-S3 key, wrapped under the master key, opens with it')
  const keyId = opened.keys.keyId
  rotateMasterKey(db, master, next)
  t.throws(() => openEncryption(db, master, 1), EncryptionKeyError, 'the old master key no longer opens it')
  t.equal(openEncryption(db, next, 1)!.keys.keyId, keyId, 'the new one opens the same data-dir key')
  t.same(new SseS3Keys(db, next, () => 1).key(), made, 'and the same SSE-S3 key')
  t.throws(() => rotateMasterKey(db, master, next), EncryptionKeyError, 'a rotation from a key that is not the current one')
  return seen
})

onBothAsync('encrypt-blobs on the engine', async (t, { engine }) => {
  const db = retrying(engine)
  const blobs = new BlobsRepo(engine)
  // Two blobs stored in the clear on disk, recorded; then encryption turned on.
  const dir = tempDir(t)
  const disk = new DiskBlobStore(path.join(dir, 'blobs'), dir)
  const contents = [Buffer.from('first content'), Buffer.alloc(70_000, 'x')]
  for (const bytes of contents) {
    const staged = await disk.stage(Readable.from([bytes]), { maxBytes: bytes.length, expectedBytes: bytes.length, onOverflow: () => new Error('longer') })
    await disk.place(staged)
    disk.ensurePlaced(staged)
    await disk.discard(staged)
    blobs.insertIfMissing(staged.sha256, staged.size, 1)
  }
  const { keys, repo } = openEncryption(db, Buffer.alloc(32, 5), 1)!
  const store = encryptedStore(db, disk, keys, repo)
  t.equal(repo.get()?.plainRemaining, true, 'content stored before is in the clear')

  const report = await encryptBlobs({ db, store })
  t.match(report, { checked: 2, sealed: 2, present: 0, missing: [], corrupt: [], done: true })
  t.equal(repo.get()?.plainRemaining, false, 'the data dir is marked sealed')
  for (const bytes of contents) {
    const sha = createHash('sha256').update(bytes).digest('hex')
    t.equal(await disk.hash(sha), undefined, 'no longer in the clear')
    const opened = await store.open(sha)
    const body = Buffer.isBuffer(opened.body) ? opened.body : Buffer.concat(await opened.body.toArray())
    t.ok(body.equals(bytes), 'read back through the sealing store')
  }
  const again = await encryptBlobs({ db, store })
  t.match(again, { checked: 2, sealed: 0, present: 2, done: true }, 'a second run finds it done')
  return [report, again]
})

onBoth('WorkspacesService.create when another node creates the same slug between its check and its insert', (t, dbs) => {
  const { engine } = dbs
  twoTenants(engine)
  const clock = new ManualClock(1_800_000_000_000)
  const repo = new WorkspacesRepo(engine)
  const files = new FilesRepo(engine)
  const events = new FileEvents(new OutboxRepo(engine), files, repo, clock, new VersionsRepo(engine))
  const service = new WorkspacesService(retrying(engine), repo, files, clock, events, true)
  const tenant = new TenantsRepo(engine).get(T1)!
  const twin = (e: Engine) =>
    new WorkspacesRepo(e).insert({ id: W1, tenantId: T1, name: 'theirs', slug: 'photos', quotaBytes: null, metadata: null, webhookUrl: null, now: 1 })
  afterCheck(dbs, repo, 'getBySlug', twin)
  t.throws(
    () => service.create(tenant, { name: 'mine', slug: 'photos' }),
    { code: 'CONFLICT', message: 'A workspace with slug "photos" already exists', details: { field: 'slug' } },
    "the index's refusal is the check's CONFLICT",
  )
  t.throws(() => service.create(tenant, { name: 'again', slug: 'photos' }), { code: 'CONFLICT' }, 'and the check finds it after')
  // Another tenant's slug is its own: no conflict.
  const other = service.create(new TenantsRepo(engine).get(T2)!, { name: 'theirs too', slug: 'photos' })
  return [repo.getBySlug(T1, 'photos')?.name, other.slug, engine.pluck('SELECT count(*) FROM workspaces').get()]
})
