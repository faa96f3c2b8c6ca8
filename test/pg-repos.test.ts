// @suites: sqlite
import t, { type Test } from 'tap'
import { TenantsRepo } from '../src/db/repos/tenants'
import { S3CredentialsRepo } from '../src/db/repos/s3-credentials'
import { WorkspacesRepo } from '../src/db/repos/workspaces'
import { LeasesRepo } from '../src/db/repos/leases'
import { BlobLeasesRepo } from '../src/db/repos/blob-leases'
import { BucketConfigsRepo } from '../src/db/repos/bucket-configs'
import { InlineBlobsRepo } from '../src/db/repos/inline-blobs'
import { OutboxRepo } from '../src/db/repos/outbox'
import { BlobsRepo } from '../src/db/repos/blobs'
import { EncryptionRepo } from '../src/db/repos/encryption'
import { ObjectLocksRepo } from '../src/db/repos/object-locks'
import { withPg } from './pg/fixture'
import { key, onBoth, postgres, sqlite, T1, T2, twoTenants, W1, type Databases } from './pg/repos'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

// The tenants and S3 credentials repositories on both databases (#30): the same scenario runs on
// SQLite and on PostgreSQL, each checked as it goes, and the two transcripts must be the same.

/** The scenario; returns what it saw, for the comparison of the two databases. */
function scenario(t: Test, { engine, other }: Databases): unknown[] {
  const seen: unknown[] = []
  const tenants = new TenantsRepo(engine)
  const base = { keyKind: 'live' as const, webhookSecret: 'whsec', quotaBytes: 1000, allowedFileTypes: ['image/png'] }
  // Created in the same millisecond: the listing's order between them is their ids' (binary) order.
  const ids = [T1, '00000000-0000-4000-8000-00000000000B', '00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-000000000002']
  const names = ['Acme', 'Straße', 'Zed', 'ünïcode']
  engine.transaction(() => ids.forEach((id, i) => tenants.insert({ ...base, id, name: names[i]!, keyHash: key(i + 1), createdAt: 1_700_000_000_000 })))
  t.throws(
    () => tenants.insert({ ...base, id: '00000000-0000-4000-8000-000000000009', name: 'ACME', keyHash: key(9), createdAt: 2 }),
    'a name taken case-folded',
  )
  t.throws(() => tenants.insert({ ...base, id: '00000000-0000-4000-8000-000000000009', name: 'new', keyHash: key(1), createdAt: 2 }), 'a key hash taken')

  const got = tenants.get(T1)
  t.match(got, { id: T1, name: 'Acme', quotaBytes: 1000, usedBytes: 0, allowedFileTypes: ['image/png'], keyKind: 'live', createdAt: 1_700_000_000_000 })
  const byKey = tenants.getByKeyHash(key(1))
  t.ok(byKey && Buffer.isBuffer(byKey.keyHash) && byKey.keyHash.equals(key(1)), 'the stored key hash comes back as a Buffer')
  t.equal(tenants.getByName('STRASSE')?.id, ids[1], 'names compared case-folded: ß is ss')
  t.equal(tenants.getByName('ÜNÏCODE')?.id, ids[3])
  seen.push(tenants.list().map((x) => x.id))
  const first = tenants.page(undefined, 2)
  const last = first.at(-1)!
  seen.push(
    first.map((x) => x.id),
    tenants.page({ createdAt: last.createdAt, id: last.id }, 10).map((x) => x.id),
  )

  // Usage and counts, maintained by the triggers of both schemas; the statements are the same text.
  const run = (sql: string, ...params: unknown[]) => engine.prepare(sql).run(...params)
  engine.transaction(() => {
    run('INSERT INTO workspaces (id, tenant_id, name, slug, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)', W1, T1, 'w', 'w', 1, 1)
    run('INSERT INTO blobs (sha256, size_bytes, created_at) VALUES (?, ?, ?)', 'ab'.repeat(32), 300, 1)
    for (const [id, status] of [
      ['f1', 'completed'],
      ['f2', 'completed'],
      ['f3', 'pending'],
    ] as const) {
      run(
        `INSERT INTO files (id, tenant_id, workspace_id, original_name, file_type, status, size_bytes, sha256, upload_expires_at, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        id,
        T1,
        W1,
        `${id}.png`,
        'image/png',
        status,
        300,
        status === 'completed' ? 'ab'.repeat(32) : null,
        9,
        1,
      )
    }
    run("UPDATE files SET status = 'failed' WHERE id = ?", 'f3')
    run('UPDATE files SET deleted_at = ? WHERE id = ?', 5, 'f2')
  })
  t.equal(tenants.get(T1)!.usedBytes, 300, 'one live completed file charged; the failed and the deleted ones not')
  t.equal(tenants.fileCount(T1), 2, 'live files (any status)')
  seen.push(tenants.get(T1)!.usedBytes, tenants.fileCount(T1))

  // Another connection's change to a key shows in dataVersion (the authentication caches' signal).
  const before = tenants.dataVersion()
  const otherTenants = new TenantsRepo(other)
  t.ok(otherTenants.rotate(ids[2]!, key(30), 'whsec2'))
  t.not(tenants.dataVersion(), before, "another connection's key rotation changes dataVersion")
  t.equal(tenants.signingGeneration(ids[2]!), 1)
  t.equal(tenants.getByKeyHash(key(3)), undefined, 'the old key finds nothing')
  t.ok(tenants.update({ id: ids[2]!, name: 'Zed renamed', quotaBytes: 5, allowedFileTypes: [], selfServiceS3Credentials: false }))
  // Self-service S3 credentials (#31): on by default, off once updated so.
  t.equal(tenants.get(T1)!.selfServiceS3Credentials, true, 'self-service S3 credentials are on by default')
  t.equal(tenants.get(ids[2]!)!.selfServiceS3Credentials, false)
  // The admin overview's usage table: most bytes first, ties by id (binary order), and the count.
  t.same(
    tenants.topByUsage(3).map((x) => [x.id, x.usedBytes]),
    [
      [T1, 300],
      [ids[3], 0],
      [ids[1], 0],
    ],
  )
  t.equal(tenants.liveCount(), 4)
  seen.push(
    tenants.topByUsage(10).map((x) => [x.id, x.usedBytes, x.selfServiceS3Credentials]),
    tenants.liveCount(),
  )
  t.ok(tenants.markDeleted(ids[3]!, 10, `deleted:${ids[3]}`, key(40)))
  t.equal(tenants.get(ids[3]!), undefined)
  t.equal(tenants.signingGeneration(ids[3]!), undefined, 'a deleted tenant has no generation')
  t.same(tenants.purgeable(10), [ids[3]], 'a deleted tenant without files is purgeable')
  t.ok(tenants.purge(ids[3]!))
  seen.push(tenants.list().map((x) => [x.name, x.quotaBytes, x.allowedFileTypes]))

  // S3 credentials: the sealed secret is bytes both ways; listing in creation order.
  const creds = new S3CredentialsRepo(engine)
  creds.insert({ accessKeyId: 'AKIDB', tenantId: T1, secretSealed: Buffer.from([1, 2, 3, 0, 255]), createdAt: 20 })
  creds.insert({ accessKeyId: 'AKIDA', tenantId: T1, secretSealed: Buffer.from([9]), createdAt: 20 })
  t.throws(() => creds.insert({ accessKeyId: 'AKIDA', tenantId: T1, secretSealed: Buffer.from([9]), createdAt: 21 }), 'an access key id is unique')
  const c = creds.get('AKIDB')!
  t.ok(Buffer.isBuffer(c.secretSealed) && c.secretSealed.equals(Buffer.from([1, 2, 3, 0, 255])))
  seen.push(creds.listByTenant(T1).map((x) => [x.accessKeyId, [...x.secretSealed], x.createdAt]))
  const mid = otherTenants.dataVersion()
  t.ok(creds.delete(T1, 'AKIDA'))
  t.notOk(creds.delete(T1, 'AKIDA'), 'deleted once')
  t.equal(creds.get('AKIDA'), undefined)
  t.not(otherTenants.dataVersion(), mid, 'a revoked credential changes dataVersion for the other connection')
  return seen
}

t.test('the same scenario, the same answers, on SQLite and on PostgreSQL', async (t) => {
  let onSqlite: unknown[] = []
  await t.test('SQLite', async (t) => {
    onSqlite = scenario(t, await sqlite(t))
  })
  withPg(t, 'PostgreSQL', (url) => {
    void t.test('PostgreSQL', async (t) => {
      const onPg = scenario(t, await postgres(t, url))
      t.same(onPg, onSqlite, "PostgreSQL's answers are SQLite's")
    })
  })
})

onBoth('workspaces', (t, { engine }) => {
  const seen: unknown[] = []
  twoTenants(engine)
  const ws = new WorkspacesRepo(engine)
  const base = { quotaBytes: null, metadata: null, webhookUrl: null, now: 100 }
  // Created in the same millisecond: listed by id in byte order (upper case before lower case).
  const ids = ['ws-b', 'ws-B', 'ws-a', 'ws-A']
  engine.transaction(() => ids.forEach((id, i) => ws.insert({ ...base, id, tenantId: T1, name: `n${i}`, slug: `s${i}` })))
  ws.insert({ ...base, id: 'ws-z', tenantId: T1, name: 'old', slug: 'shared', now: 50, quotaBytes: 7, metadata: { a: [1, 'é'] }, webhookUrl: 'http://x/' })
  ws.insert({ ...base, id: 'ws-2', tenantId: T2, name: 'two', slug: 'shared' })
  t.throws(() => ws.insert({ ...base, id: 'ws-dup', tenantId: T1, name: 'dup', slug: 's0' }), 'a live slug is unique in its tenant')
  t.throws(() => ws.insert({ ...base, id: 'ws-b', tenantId: T2, name: 'dup', slug: 'other' }), 'an id is unique')
  const z = ws.getLive(T1, 'ws-z')!
  t.same([z.quotaBytes, z.metadata, z.webhookUrl, z.usedBytes], [7, { a: [1, 'é'] }, 'http://x/', 0])
  const b = ws.getLive(T1, 'ws-b')!
  t.same([b.quotaBytes, b.metadata, b.webhookUrl], [null, null, null], 'NULLs come back as null')
  t.equal(ws.getLive(T2, 'ws-z'), undefined, "another tenant's workspace is not found")
  seen.push(
    ws.list(T1).map((w) => w.id),
    ws.getBySlug(T1, 'S0'),
    ws.getBySlug(T1, 's0')?.id,
  )
  seen.push(
    ws
      .bySlugAnyTenant('shared')
      .map((w) => w.id)
      .sort(),
    ws.bySlugAnyTenant('s1').map((w) => w.id),
  )

  t.ok(ws.update({ id: 'ws-z', tenantId: T1, name: 'new', quotaBytes: null, metadata: null, webhookUrl: null, now: 200 }))
  t.notOk(ws.update({ id: 'ws-z', tenantId: T2, name: 'x', quotaBytes: null, metadata: null, webhookUrl: null, now: 200 }), 'not through another tenant')
  seen.push(ws.getLive(T1, 'ws-z'))
  t.ok(ws.softDelete(T1, 'ws-z', 300))
  t.notOk(ws.softDelete(T1, 'ws-z', 301), 'deleted once')
  t.equal(ws.getLive(T1, 'ws-z'), undefined)
  ws.insert({ ...base, id: 'ws-z2', tenantId: T1, name: 'again', slug: 'shared' })
  t.equal(ws.getBySlug(T1, 'shared')?.id, 'ws-z2', "a deleted workspace's slug is reusable")
  t.notOk(ws.update({ id: 'ws-z', tenantId: T1, name: 'x', quotaBytes: null, metadata: null, webhookUrl: null, now: 400 }), 'a deleted one is not updated')
  t.equal(ws.softDeleteAllOfTenant(T1, 500), 5)
  seen.push(
    ws.list(T1),
    ws.list(T2).map((w) => w.id),
  )
  return seen
})

onBoth('leases', (t, { engine, other }) => {
  const seen: unknown[] = []
  const a = new LeasesRepo(engine)
  const b = new LeasesRepo(other)
  const now = 1_800_000_000_000 // past 2^32: times are bigint
  t.ok(a.take('gc', 'node-a', now, now + 1000), 'a free name is taken')
  t.notOk(b.take('gc', 'node-b', now + 999, now + 2000), "another holder's unexpired lease is refused")
  t.same(a.get('gc'), { name: 'gc', holder: 'node-a', expiresAt: now + 1000 }, 'a refused take changes nothing')
  t.ok(a.take('gc', 'node-a', now + 500, now + 3000), 'its holder renews it')
  t.notOk(b.take('gc', 'node-b', now + 2999, now + 4000))
  t.ok(b.take('gc', 'node-b', now + 3000, now + 4000), 'taken over once expired (at expires_at exactly)')
  seen.push(a.get('gc'), b.get('nothing'))
  a.release('gc', 'node-a')
  t.equal(a.get('gc')?.holder, 'node-b', 'released only by its holder')
  b.release('gc', 'node-b')
  t.equal(a.get('gc'), undefined)
  t.ok(a.take('gc', 'node-a', now, now + 1))
  t.ok(a.take('outbox', 'node-a', now, now + 1))
  t.equal(b.clear(), 2)
  seen.push(a.get('gc'), a.clear())
  return seen
})

onBoth('blob leases and tombstones', (t, { engine, other }) => {
  const seen: unknown[] = []
  const r = new BlobLeasesRepo(engine)
  const o = new BlobLeasesRepo(other)
  const [h1, h2, h3] = ['a1', 'b2', 'c3'].map((x) => x.repeat(32))
  const now = 1_800_000_000_000
  r.lease('up-1', h1!, now + 100)
  r.lease('up-1', h2!, now + 200) // the same upload again: replaces its hash and expiry, no conflict
  r.lease('up-2', h2!, now + 50)
  t.notOk(o.held('up-1', h1!, now), 'the replaced hash is no longer held')
  t.ok(o.held('up-1', h2!, now + 199))
  t.notOk(o.held('up-1', h2!, now + 200), 'not at its expiry')
  seen.push(o.leased(h2!, now + 100), o.leased(h1!, now), r.dropExpired(now + 50), o.leased(h2!, now + 10))
  r.release('up-1')
  t.notOk(r.leased(h2!, now))

  r.tombstone(h1!, 30)
  r.tombstone(h1!, 31) // again: ignored, no conflict
  r.tombstone(h3!, 10)
  r.tombstone(h2!, 20)
  t.equal(r.count(), 3, 'a count is a number')
  seen.push(r.claimable(now, 10), r.claimable(now, 2))
  t.ok(r.claim(h3!, now, now + 1000))
  t.notOk(o.claim(h3!, now + 999, now + 2000), 'a running claim is not taken')
  seen.push(r.claimable(now + 999, 10))
  t.ok(o.claim(h3!, now + 1000, now + 2000), 'an expired claim is')
  r.unclaim(h3!)
  seen.push(r.claimable(0, 10), r.tombstoned(h3!), r.tombstoned('ff'.repeat(32)))
  r.bury(h3!)
  t.notOk(r.tombstoned(h3!))
  seen.push(r.count())
  return seen
})

onBoth('bucket configurations', (t, { engine }) => {
  const seen: unknown[] = []
  twoTenants(engine)
  const ws = new WorkspacesRepo(engine)
  const base = { quotaBytes: null, metadata: null, webhookUrl: null, now: 1 }
  ws.insert({ ...base, id: 'w1', tenantId: T1, name: 'a', slug: 'photos' })
  ws.insert({ ...base, id: 'w2', tenantId: T2, name: 'b', slug: 'photos' })
  ws.insert({ ...base, id: 'w3', tenantId: T1, name: 'c', slug: 'other' })
  const c = new BucketConfigsRepo(engine)
  const doc = JSON.stringify({ rules: [{ id: 'é\u0000"x' }] })
  c.put('w1', 'lifecycle', doc, 10)
  c.put('w1', 'lifecycle', '{"v":2}', 11) // again: replaced, no conflict
  c.put('w1', 'cors', doc, 10)
  c.put('w2', 'lifecycle', '{"v":"two"}', 10)
  seen.push(c.get('w1', 'lifecycle'), c.get('w1', 'cors') === doc, c.get('w3', 'cors'))
  seen.push(c.ofBucket(T1, 'photos', 'lifecycle'), c.ofBucket(T2, 'photos', 'lifecycle'), c.ofBucket(T2, 'photos', 'cors'), c.ofBucket(T1, 'PHOTOS', 'cors'))
  seen.push(c.byBucketName('photos', 'lifecycle').sort())
  // Every document of a bucket in one read (the bucket state cache, #29).
  seen.push([...c.allOf('w1')].sort(), [...c.allOf('w3')])
  t.same(
    new Map(c.allOf('w1')),
    new Map([
      ['lifecycle', '{"v":2}'],
      ['cors', doc],
    ]),
  )
  t.ok(c.delete('w1', 'cors'))
  t.notOk(c.delete('w1', 'cors'), 'deleted once')
  t.ok(ws.softDelete(T2, 'w2', 20))
  t.equal(c.get('w2', 'lifecycle'), undefined, "a deleted workspace's documents go with it (the trigger)")
  seen.push(c.byBucketName('photos', 'lifecycle'), c.get('w1', 'cors'))
  return seen
})

onBoth('inline blobs', (t, { engine }) => {
  const seen: unknown[] = []
  const r = new InlineBlobsRepo(engine)
  const bytes = Buffer.from([0, 255, 0x5c, 0x27, 0, 1]) // NUL, high bytes, a backslash and a quote
  const hashes = ['0a', 'b1', 'B1', 'ff'].map((x) => x.repeat(32))
  r.insertIfMissing(hashes[1]!, bytes, 1_800_000_000_000)
  r.insertIfMissing(hashes[1]!, Buffer.from('other'), 5) // again: the first stays, no conflict
  r.insertIfMissing(hashes[2]!, Buffer.alloc(0), 2)
  r.insertIfMissing(hashes[3]!, Buffer.alloc(70_000, 7), 3)
  const got = r.get(hashes[1]!)
  t.ok(Buffer.isBuffer(got) && got.equals(bytes), 'the content comes back byte for byte, as a Buffer')
  t.ok(r.get(hashes[2]!)?.equals(Buffer.alloc(0)), 'an empty blob is an empty Buffer, not null')
  seen.push(r.exists(hashes[1]!), r.exists(hashes[0]!), r.get(hashes[0]!))
  // Hash order is byte order: 'B1…' before 'b1…'.
  seen.push(r.after('', 10), r.after(hashes[2]!, 1))
  r.delete(hashes[1]!)
  seen.push(
    r.exists(hashes[1]!),
    r.after('', 10).map((x) => x.sha256),
  )
  return seen
})

onBoth('webhook outbox', (t, { engine }) => {
  const seen: unknown[] = []
  twoTenants(engine)
  const o = new OutboxRepo(engine)
  const now = 1_800_000_000_000
  t.equal(o.nextDueAt(), null, 'nothing pending: null')
  const ev = { fileId: 'f', event: 'file.uploaded' as const, url: 'http://127.0.0.1/hook', payload: '{"a":"é"}' }
  // T1 has a backlog; T2 one event. Same times: ties in byte order of ids ('E…' before 'e…').
  engine.transaction(() => {
    for (const id of ['e3', 'E3', 'e1', 'e2']) o.insert({ ...ev, id, tenantId: T1, now })
    o.insert({ ...ev, id: 'z1', tenantId: T2, now: now + 1, event: 'file.deleted' })
  })
  t.throws(() => o.insert({ ...ev, id: 'e1', tenantId: T2, now }), 'an id is unique')
  t.throws(() => o.insert({ ...ev, id: 'bad', tenantId: T2, now, event: 'file.nope' as 'file.failed' }), 'an unknown event is refused')
  seen.push(
    o.dueFair(now + 1, 2, 10).map((e) => e.id),
    o.dueFair(now, 10, 10).map((e) => e.id),
    o.dueFair(now + 1, 10, 3).map((e) => e.id),
  )
  seen.push(o.nextDueAt(), o.get('z1'))

  // An attempt's failure is recorded for the node that claimed the event (#30).
  t.same(o.claim(['e1', 'nope'], 'n1', now + 2, now + 50), ['e1'], 'a claim takes the due events it names')
  t.same(o.claim(['e1'], 'n2', now + 2, now + 50), [], 'a claimed event is no longer due')
  t.notOk(o.markFailed('e1', 'n2', 'not mine', now + 2, now + 100, 2), 'nor is a failure recorded by another node')
  o.markFailed('e1', 'n1', 'x'.repeat(600), now + 2, now + 100, 2)
  t.equal(o.get('e1')!.lastError!.length, 500, 'the error is cut at 500 characters')
  t.same([o.get('e1')!.status, o.get('e1')!.attempts], ['pending', 1])
  o.claim(['e1'], 'n1', now + 100, now + 150)
  o.markFailed('e1', 'n1', 'again', now + 3, now + 200, 2)
  t.same([o.get('e1')!.status, o.get('e1')!.attempts, o.get('e1')!.nextAttemptAt], ['dead', 2, now + 200], 'dead after its last attempt')
  o.markDelivered('E3', now + 4)
  o.markDelivered('E3', now + 5) // once only
  seen.push(o.get('E3'), o.counts(), o.nextDueAt())
  seen.push(
    o.list(null, 10).map((e) => e.id),
    o.list('dead', 10).map((e) => e.id),
    o.listForTenant(T1, null, 2).map((e) => e.id),
    o.listForTenant(T2, 'pending', 10).map((e) => e.id),
    o.getForTenant(T2, 'e1'),
  )
  t.notOk(o.retryDead(T2, 'e1', now + 6), 'not through another tenant')
  t.ok(o.retryDead(T1, 'e1', now + 6))
  t.notOk(o.retry('e1', now + 7), 'already pending')
  t.ok(o.retry('E3', now + 7), 'a delivered one is re-driven')
  o.claim(['e2'], 'n1', now + 8, now + 9)
  o.markFailed('e2', 'n1', 'boom', now + 8, now + 9, 1)
  t.equal(o.retryAllDead(now + 10), 1)
  seen.push(o.get('e1'), o.get('E3'), o.counts())
  t.equal(o.dropPending(T1), 4)
  seen.push(
    o.counts(),
    o.list(null, 10).map((e) => [e.id, e.status]),
  )
  return seen
})

onBoth('blobs', (t, { engine }) => {
  const seen: unknown[] = []
  twoTenants(engine)
  const b = new BlobsRepo(engine)
  const [h1, h2, h3, h4] = ['0a', 'b1', 'B1', 'ff'].map((x) => x.repeat(32))
  const big = 5 * 2 ** 40 // 5 TiB: sizes and their sum are bigint
  seen.push(b.stats())
  engine.transaction(() => {
    b.insertIfMissing(h1!, big, 1)
    b.insertIfMissing(h1!, 1, 2) // again: ignored, the totals unchanged
    b.insertIfMissing(h2!, big + 3, 1)
    b.insertIfMissing(h3!, 0, 1)
    b.insertIfMissing(h4!, 7, 1)
  })
  t.same(b.stats(), { bytes: 2 * big + 10, count: 4 }, 'the totals past 2^32, as numbers')
  seen.push(b.exists(h1!), b.exists('00'.repeat(32)), b.sizeOf(h1!), b.sizeOf('00'.repeat(32)), b.sizeOf(h3!))
  // Hash order is byte order: 'B1…' before 'b1…'.
  seen.push(b.shasAfter('', 10), b.shasAfter(h3!, 1), b.sizesAfter(h1!, 10))

  // A file row (any status, deleted or not) or a multipart part keeps a blob referenced.
  engine.prepare('INSERT INTO workspaces (id, tenant_id, name, slug, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)').run(W1, T1, 'w', 'w', 1, 1)
  engine
    .prepare(
      `INSERT INTO files (id, tenant_id, workspace_id, original_name, file_type, status, size_bytes, sha256, upload_expires_at, created_at, deleted_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .run('f1', T1, W1, 'a', 'text/plain', 'completed', big, h1, 9, 1, 5)
  seen.push(b.sizeIfUnreferenced(h1!), b.sizeIfUnreferenced(h2!), b.sizeIfUnreferenced('00'.repeat(32)))

  b.deferRelease(h4!, 10)
  b.deferRelease(h2!, 11)
  b.deferRelease(h2!, 12) // again: ignored
  seen.push(b.deferred(10), b.deferred(1))
  b.undefer(h2!)
  b.delete(h4!)
  b.delete(h2!)
  seen.push(b.deferred(10), b.stats(), b.shasAfter('', 10))
  return seen
})

onBoth('encryption', (t, { engine, other }) => {
  const seen: unknown[] = []
  const e = new EncryptionRepo(engine)
  seen.push(e.get())
  const wrapped = Buffer.from([0, 1, 0x5c, 255, 0])
  e.insert(wrapped, 3, true, 1_800_000_000_000)
  t.throws(() => e.insert(Buffer.from([1]), 4, false, 2), 'one row only')
  const got = new EncryptionRepo(other).get()!
  t.ok(Buffer.isBuffer(got.wrappedKey) && got.wrappedKey.equals(wrapped), 'the wrapped key comes back byte for byte, as a Buffer')
  seen.push(got)
  e.rewrap(Buffer.from([9, 8]))
  e.markSealedAll()
  seen.push(e.get())
  return seen
})

onBoth('object locks', (t, { engine }) => {
  const seen: unknown[] = []
  const insert = engine.prepare(
    `INSERT INTO object_versions (workspace_id, object_key, version_id, seq, tenant_id, file_id, size_bytes, created_at)
     VALUES (?, ?, ?, ?, ?, ?, 0, 1)`,
  )
  // Keys in byte order: 'B' before 'a' before 'b'; w2's version is a delete marker (no file).
  engine.transaction(() => {
    insert.run('w1', 'b', 'v1', 1, T1, 'fb')
    insert.run('w1', 'B', 'v1', 1, T1, 'fB')
    insert.run('w1', 'a', 'v1', 1, T1, 'fa')
    insert.run('w2', 'a', 'v1', 1, T1, null)
    insert.run('w3', 'z', 'v1', 1, T2, 'fz')
  })
  const l = new ObjectLocksRepo(engine)
  const now = 1_800_000_000_000
  seen.push(l.get('w1', 'a', 'v1'), l.get('w1', 'a', 'nope'), l.ofFile('fa'), l.ofFile('nope'))
  l.setRetention('w1', 'b', 'v1', 'COMPLIANCE', now + 10)
  l.setRetention('w1', 'B', 'v1', 'GOVERNANCE', now)
  l.setLegalHold('w1', 'a', 'v1', true)
  l.setRetention('w2', 'a', 'v1', 'GOVERNANCE', now + 1)
  l.setLegalHold('w3', 'z', 'v1', true)
  seen.push(l.get('w1', 'b', 'v1'), l.ofFile('fa'))
  seen.push(l.lockedInWorkspace('w1', now), l.lockedInWorkspace('w1', now - 1), l.lockedInWorkspace('w1', now, 1))
  seen.push(l.lockedOfTenant(T1, now), l.lockedOfTenant(T2, now), l.lockedOfTenant(T1, now + 10))
  seen.push(l.fileLockedAt('fb', now + 9), l.fileLockedAt('fb', now + 10), l.fileLockedAt('fB', now), l.fileLockedAt('nope', now))
  l.setRetention('w1', 'b', 'v1', null, null)
  l.setLegalHold('w1', 'a', 'v1', false)
  seen.push(l.get('w1', 'b', 'v1'), l.get('w1', 'a', 'v1'), l.lockedInWorkspace('w1', 0))
  t.equal(l.lockedInWorkspace('w1', 0).length, 1, 'only the GOVERNANCE retention left in w1')
  return seen
})

withPg(t, 'PostgreSQL only', (url) => {
  t.test("on PostgreSQL, the usage the upload path updates does not move the authentication caches' version", async (t) => {
    const { engine } = await postgres(t, url)
    const tenants = new TenantsRepo(engine)
    tenants.insert({ id: T1, name: 'a', keyHash: key(1), keyKind: 'live', webhookSecret: 'w', quotaBytes: 10, allowedFileTypes: [], createdAt: 1 })
    const v = tenants.dataVersion()
    engine.prepare('UPDATE tenants SET used_bytes = used_bytes + ? WHERE id = ?').run(5, T1)
    t.equal(tenants.dataVersion(), v)
    t.equal(tenants.get(T1)!.usedBytes, 5)
  })
})
