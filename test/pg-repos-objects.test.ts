// @suites: sqlite
import t from 'tap'
import type { Engine } from '../src/db/engine'
import { TenantsRepo } from '../src/db/repos/tenants'
import { WorkspacesRepo } from '../src/db/repos/workspaces'
import { BlobsRepo } from '../src/db/repos/blobs'
import { ObjectsRepo, type ObjectInfo } from '../src/db/repos/objects'
import { MultipartRepo, type MultipartUpload, type Part } from '../src/db/repos/multipart'
import { BucketConfigsRepo } from '../src/db/repos/bucket-configs'
import { LifecycleRepo } from '../src/db/repos/lifecycle'
import { listPage, rollupPage, utf8Compare, type KeysetSource, type ListResult } from '../src/s3/listing'
import { key, onBoth, T1, T2 } from './pg/repos'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

// The S3 objects, multipart and lifecycle repositories on both databases (#30), as
// test/pg-repos.test.ts does the others: the same scenario runs on SQLite and on PostgreSQL, each
// checked as it goes, and the two transcripts must be the same.

/** 5 GiB, S3's largest part: sizes, their sums and offsets are past 2^32. */
const GiB5 = 5 * 2 ** 30
const H = ['0a', 'b1', 'B1', 'ff'].map((x) => x.repeat(32)) as [string, string, string, string]

/** Two tenants, each with a bucket `photos`, and T1 an empty bucket `empty`; the blobs H. */
function buckets(engine: Engine): void {
  const tenants = new TenantsRepo(engine)
  const base = { keyKind: 'live' as const, webhookSecret: 'w', quotaBytes: 2 ** 50, allowedFileTypes: [], createdAt: 1 }
  const ws = new WorkspacesRepo(engine)
  const w = { quotaBytes: null, metadata: null, webhookUrl: null, now: 1 }
  const blobs = new BlobsRepo(engine)
  engine.transaction(() => {
    tenants.insert({ ...base, id: T1, name: 'one', keyHash: key(1) })
    tenants.insert({ ...base, id: T2, name: 'two', keyHash: key(2) })
    ws.insert({ ...w, id: 'w1', tenantId: T1, name: 'photos', slug: 'photos' })
    ws.insert({ ...w, id: 'w2', tenantId: T2, name: 'photos', slug: 'photos' })
    ws.insert({ ...w, id: 'w3', tenantId: T1, name: 'empty', slug: 'empty' })
    H.forEach((h, i) => blobs.insertIfMissing(h, GiB5 * (i + 1), 1))
  })
}

/**
 * Keys whose byte order is not a locale's nor UTF-16's: punctuation around '/', upper case before
 * lower, a precomposed and a decomposed é, U+FFFD (before U+1F600 in UTF-16, after it in UTF-8).
 */
const KEYS = [
  'a',
  'a!',
  'a-b',
  'a.b',
  'a/',
  'a/b',
  'a/c/d',
  'a0',
  'B',
  'b',
  'é',
  'e\u0301',
  '\ufffd',
  '😀',
  '日本/語',
  '日本語',
  'photos/2024/x.jpg',
  'photos/2025/y.jpg',
  'photos/readme',
  'z z',
]

/** A listing's page as names: objects by key, common prefixes with a trailing '…'. */
const names = <R extends { key: string }>(r: ListResult<R>) => [r.entries.map((e) => (e.kind === 'object' ? e.row.key : `${e.prefix}…`)), r.truncated]

onBoth('objects', (t, { engine, other }) => {
  const seen: unknown[] = []
  buckets(engine)
  const o = new ObjectsRepo(engine)
  const info = (etag: string): ObjectInfo => ({ etag, contentType: 'text/plain', meta: { note: 'é\u0000"' }, checksum: { algorithm: 'crc32', value: 'AAAA' } })
  const base = { tenantId: T1, workspaceId: 'w1', fileType: 'text/plain', sha256: H[0], now: 1_800_000_000_000 }
  // Inserted out of order; the listing orders them.
  engine.transaction(() => {
    ;[...KEYS].reverse().forEach((k, i) => o.insertCompleted({ ...base, id: `f${i}`, key: k, originalName: k, size: GiB5 + i, info: info(`"${i}"`) }))
    o.insertCompleted({ ...base, id: 'g-a', tenantId: T2, workspaceId: 'w2', key: 'a', originalName: 'a', size: 1, info: info('"two"') })
  })
  t.throws(
    () => o.insertCompleted({ ...base, id: 'dup', key: 'a/b', originalName: 'b', size: 1, info: info('"d"') }),
    'a key is unique among the live files of a bucket',
  )
  // A pending upload to a key, a failed one, and a deleted (noncurrent) file at a listed key.
  const file = engine.prepare(
    `INSERT INTO files (id, tenant_id, workspace_id, original_name, file_type, status, size_bytes, sha256, upload_expires_at, created_at, deleted_at, object_key)
     VALUES (?, ?, ?, ?, 'text/plain', ?, 3, ?, 9, 1, ?, ?)`,
  )
  file.run('p1', T1, 'w1', 'pending', 'pending', null, null, 'pending')
  file.run('x1', T1, 'w3', 'failed', 'failed', null, null, 'failed')
  file.run('old', T1, 'w1', 'b', 'completed', H[1], 5, 'a/b')

  seen.push(o.get('w1', 'é'), o.get('w2', 'a')?.fileId, o.get('w1', 'e\u0301')?.fileId, o.get('w1', 'pending'), o.get('w1', 'nope'))
  t.equal(o.get('w1', '😀')!.size, GiB5 + KEYS.length - 1 - KEYS.indexOf('😀'), 'a size past 2^32 as a number')
  seen.push(o.getInBucket(T1, 'photos', 'a/b'), o.getInBucket(T2, 'photos', 'a/b'), o.getInBucket(T2, 'photos', 'a')?.fileId)
  seen.push(o.getInBucket(T1, 'PHOTOS', 'a'), o.getInBucket(T1, 'empty', 'a'))
  t.equal(new ObjectsRepo(other).getInBucket(T1, 'photos', '日本/語')?.key, '日本/語', 'read by another connection')
  seen.push(o.liveIdByKey('w1', 'pending'), o.liveIdByKey('w1', 'a/b'), o.liveIdByKey('w2', 'pending'))
  seen.push(o.hasLiveFiles('w1'), o.hasLiveFiles('w3'), o.hasLiveFiles('w2'))

  // The version a file is and its bucket's versioning; a noncurrent one's file is deleted but retained.
  const a = o.get('w1', 'a')!
  engine.prepare(`UPDATE workspaces SET versioning = 'Enabled' WHERE id = ?`).run('w1')
  engine
    .prepare(
      `INSERT INTO object_versions (workspace_id, object_key, version_id, seq, tenant_id, file_id, size_bytes, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .run('w1', 'a', 'v-a', 1, T1, a.fileId, a.size, 1)
  seen.push(o.get('w1', 'a'), o.byFile(a.fileId), o.byFile('old'), o.byFile('p1'), o.byFile('nope'))
  t.equal(o.byFile('old')!.isLatest, false, "a deleted file is a noncurrent version's")
  t.ok(o.setInfo('old', { ...info('"new"'), acl: 'public-read' }), "a noncurrent version's attributes are set")
  t.notOk(o.setInfo('p1', info('"p"')), 'not those of a pending file')
  seen.push(o.byFile('old')!.info)

  // Every key, a page of 3 at a time from the last one: the keyset walk is in UTF-8 byte order.
  const all: string[] = []
  for (let after: string | undefined; ;) {
    const page = [...o.page('w1', after === undefined ? {} : { after }, 3)].map((r) => r.key)
    all.push(...page)
    if (page.length < 3) break
    after = page.at(-1)
  }
  t.same(all, [...KEYS].sort(utf8Compare), 'every live completed key once, in byte order')
  seen.push(all)
  seen.push([...o.page('w1', { from: 'a/', below: 'a0' }, 10)].map((r) => r.key))
  seen.push([...o.page('w1', { after: 'a/b', from: 'a/', below: 'a0' }, 10)].map((r) => r.key))
  seen.push([...o.page('w1', { from: '\ufffd' }, 2)].map((r) => r.key))
  for (const r of o.page('w1', {}, 100)) {
    t.equal(r.key, 'B', 'a page read as the caller iterates, and left early')
    break
  }

  // ListObjects: prefix and delimiter, paged by the last entry (a key or a common prefix).
  const pages = (q: { prefix: string; delimiter: string }, maxKeys: number) => {
    const out: unknown[] = []
    let after: string | undefined
    for (;;) {
      const r = listPage(o, 'w1', { ...q, after, maxKeys })
      out.push(names(r))
      if (!r.truncated) return out
      after = r.last!.kind === 'object' ? r.last!.row.key : r.last!.prefix
    }
  }
  seen.push(pages({ prefix: '', delimiter: '/' }, 4))
  seen.push(pages({ prefix: 'a', delimiter: '/' }, 2))
  seen.push(pages({ prefix: 'photos/', delimiter: '/' }, 1))
  seen.push(pages({ prefix: '日本', delimiter: '/' }, 1000))
  seen.push(pages({ prefix: '', delimiter: '' }, 7))
  seen.push(pages({ prefix: 'é', delimiter: '' }, 1), pages({ prefix: '\uffff', delimiter: '/' }, 5))
  t.same(listPage(o, 'w2', { prefix: '', delimiter: '', after: undefined, maxKeys: 10 }).entries.length, 1, "another tenant's bucket holds its own key only")

  // A multipart object's part layout, offsets summed past 2^32; a copy shares it.
  const mp = o.get('w1', 'photos/readme')!
  engine.transaction(() =>
    o.insertParts(mp.fileId, [
      { partNumber: 1, size: GiB5, checksum: 'c1' },
      { partNumber: 2, size: GiB5 },
      { partNumber: 7, size: 10, checksum: 'c7' },
    ]),
  )
  t.throws(() => o.insertParts(mp.fileId, [{ partNumber: 2, size: 1 }]), 'a part number once per object')
  seen.push(o.part(mp.fileId, 1), o.part(mp.fileId, 7), o.part(mp.fileId, 3), o.part('nope', 1))
  t.equal(o.part(mp.fileId, 7)!.offset, 2 * GiB5, 'the offset of a part past 2^32, as a number')
  seen.push(o.partsPage(mp.fileId, 0, 2), o.partsPage(mp.fileId, 2, 10), o.partsPage(mp.fileId, 7, 10))
  const z = o.get('w1', 'z z')!
  o.copyParts(mp.fileId, z.fileId)
  seen.push(o.partsPage(z.fileId, 0, 10), o.part(z.fileId, 7))

  // A version restored by copy: the source's content under a new id, with the attributes given.
  engine.transaction(() => {
    engine.prepare('UPDATE files SET deleted_at = ? WHERE id = ?').run(10, z.fileId)
    t.ok(o.insertCopy('restored', z.fileId, info('"r"'), 1_800_000_000_100))
    t.notOk(o.insertCopy('nothing', 'p1', null, 11), 'a pending file has no content to copy')
    t.notOk(o.insertCopy('nothing', 'nope', null, 11))
  })
  t.throws(() => o.insertCopy('again', 'old', null, 12), "not over the key's live object")
  seen.push(o.get('w1', 'z z'), o.byFile('nothing'))
  return seen
})

onBoth('multipart uploads', (t, { engine, other }) => {
  const seen: unknown[] = []
  buckets(engine)
  const m = new MultipartRepo(engine)
  const ws = new WorkspacesRepo(engine)
  const tenants = new TenantsRepo(engine)
  const now = 1_800_000_000_000
  const upload = (id: string, key: string, createdAt: number, workspaceId = 'w1', tenantId = T1): MultipartUpload => ({
    id,
    tenantId,
    workspaceId,
    key,
    info: { contentType: 'text/plain', meta: { a: 'é' }, checksumAlgorithm: 'crc32', checksumType: 'COMPOSITE' },
    createdAt,
    expiresAt: createdAt + 1000,
  })
  // Several uploads of one key, ids in byte order ('U…' before 'u…'); keys around '/' and multibyte.
  engine.transaction(() => {
    for (const [id, k, at] of [
      ['u-b', 'k', now],
      ['U-z', 'k', now + 1],
      ['u-a', 'k', now + 2],
      ['u-c', 'k/1', now + 3],
      ['u-d', 'k-1', now + 4],
      ['u-e', 'é/x', now + 5],
      ['u-f', '😀', now + 6],
      ['u-g', '\ufffd', now + 7],
    ] as const)
      m.insert(upload(id, k, at))
    m.insert(upload('t2', 'k', now - 2, 'w2', T2))
    m.insert(upload('gone', 'k', now - 1, 'w3'))
  })
  t.throws(() => m.insert(upload('u-a', 'other', now)), 'an upload id is unique')
  seen.push(m.get('w1', 'u-a'), m.get('w2', 'u-a'), m.get('w1', 't2'), new MultipartRepo(other).get('w2', 't2')?.key)

  // ListMultipartUploads: (key, upload id) order, paged by (key, id), rolled up at the delimiter.
  const source = (workspaceId: string): KeysetSource<MultipartUpload, { key: string; id: string }> => ({
    fetch: (range, limit) => m.list(workspaceId, range, limit),
    key: (u) => u.key,
    cursor: (u) => ({ key: u.key, id: u.id }),
  })
  const pages = (q: { prefix: string; delimiter: string }, maxKeys: number) => {
    const out: unknown[] = []
    let after: { key: string; cursor: { key: string; id: string } } | undefined
    for (;;) {
      const r = rollupPage(source('w1'), { ...q, after, maxKeys })
      out.push([r.entries.map((e) => (e.kind === 'object' ? `${e.row.key}#${e.row.id}` : `${e.prefix}…`)), r.truncated])
      if (!r.truncated) return out
      const last = r.last!
      after =
        last.kind === 'object'
          ? { key: last.row.key, cursor: { key: last.row.key, id: last.row.id } }
          : { key: last.prefix, cursor: { key: last.prefix, id: '\uffff' } }
    }
  }
  const all = [...m.list('w1', {}, 100)].map((u) => [u.key, u.id])
  t.same(
    all,
    [...all].sort((a, b) => utf8Compare(a[0]!, b[0]!) || utf8Compare(a[1]!, b[1]!)),
    'uploads in byte order of (key, id)',
  )
  seen.push(all, pages({ prefix: '', delimiter: '' }, 3), pages({ prefix: '', delimiter: '/' }, 2), pages({ prefix: 'k', delimiter: '/' }, 10))
  // A key marker alone skips every upload of that key (U+FFFF after every id); with an id, resumes after it.
  seen.push([...m.list('w1', { after: { key: 'k', id: '\uffff' } }, 2)].map((u) => u.id))
  seen.push([...m.list('w1', { after: { key: 'k', id: 'U-z' } }, 2)].map((u) => u.id))
  seen.push([...m.list('w1', { from: 'k', below: 'k0' }, 10)].map((u) => u.id))

  // Parts: a retried UploadPart replaces its row; the triggers charge the parts, sizes past 2^32.
  const part = (partNumber: number, size: number, sha256: string, checksum: string | null = null): Part => ({
    partNumber,
    size,
    md5: `md5-${partNumber}-${size}`,
    sha256,
    checksum,
    createdAt: now,
  })
  const used = () => [tenants.get(T1)!.usedBytes, ws.getLive(T1, 'w1')!.usedBytes, tenants.get(T2)!.usedBytes]
  const before = used()
  engine.transaction(() => {
    m.putPart('u-a', part(1, GiB5, H[0], 'c1'))
    m.putPart('u-a', part(2, GiB5, H[1]))
    m.putPart('u-a', part(3, 7, H[2]))
    m.putPart('t2', part(1, 9, H[3]))
  })
  t.equal(m.usage('u-a'), 2 * GiB5 + 7, 'usage past 2^32, as a number')
  m.putPart('u-a', part(1, 11, H[3])) // retried: replaces part 1, its bytes released
  t.equal(m.usage('u-a'), GiB5 + 18)
  t.same(used(), [before[0]! + GiB5 + 18, before[1]! + GiB5 + 18, before[2]! + 9], 'the triggers charge the parts to their own tenant and bucket')
  t.throws(() => m.putPart('u-a', part(10001, 1, H[0])), 'a part number past 10,000 is refused')
  t.throws(() => m.putPart('nope', part(1, 1, H[0])), 'a part of no upload is refused')
  seen.push(m.usage('u-a'), m.usage('u-b'), m.parts('u-a'), m.partsPage('u-a', 1, 1), m.partsPage('u-a', 3, 10), m.part('u-a', 1), m.part('u-a', 4))

  // The TTL sweep's selection: expired strictly before now, oldest first; orphans of deleted buckets.
  seen.push(
    m.expired(now + 1001, 10).map((u) => u.id),
    m.expired(now + 1000, 10).map((u) => u.id),
    m.expired(now + 1005, 3).map((u) => u.id),
  )
  seen.push(m.orphaned(10))
  t.ok(ws.softDelete(T1, 'w3', now))
  seen.push(
    m.orphaned(10).map((u) => u.id),
    m.idsInWorkspace('w1').sort(),
    m.idsInWorkspace('w2'),
  )
  seen.push(m.delete('u-a').sort(), m.delete('u-a'), m.get('w1', 'u-a'), m.parts('u-a'), m.usage('u-a'))
  t.same(used(), [before[0]!, before[1]!, before[2]! + 9], 'an aborted upload releases its parts')

  // Completed uploads remembered for a retried Complete, until (and at) their expiry; then forgotten.
  m.insertCompleted('u-b', 'w1', 'file-b', now + 10)
  m.insertCompleted('u-c', 'w1', 'file-c', now + 20)
  m.insertCompleted('t2', 'w2', 'file-t2', now + 5)
  t.throws(() => m.insertCompleted('u-b', 'w1', 'again', now), 'completed once')
  seen.push(m.completedFile('w1', 'u-b', now + 10), m.completedFile('w1', 'u-b', now + 11), m.completedFile('w2', 'u-b', now), m.completedFile('w2', 't2', now))
  seen.push(m.forgetCompleted(now + 10, 10), m.forgetCompleted(now + 100, 1), m.forgetCompleted(now + 100, 10), m.completedFile('w1', 'u-c', now))
  return seen
})

onBoth('lifecycle', (t, { engine, other }) => {
  const seen: unknown[] = []
  buckets(engine)
  const ws = new WorkspacesRepo(engine)
  const configs = new BucketConfigsRepo(engine)
  const l = new LifecycleRepo(engine)
  const now = 1_800_000_000_000
  // Buckets by id in byte order ('w-B' before 'w-a' before 'w1'); one has only a CORS document.
  const w = { quotaBytes: null, metadata: null, webhookUrl: null, now: 1 }
  ws.insert({ ...w, id: 'w-a', tenantId: T1, name: 'cors', slug: 'cors' })
  ws.insert({ ...w, id: 'w-B', tenantId: T2, name: 'logs', slug: 'logs' })
  const doc = (id: string) => JSON.stringify({ rules: [{ id, status: 'Enabled', prefix: 'é' }] })
  for (const id of ['w1', 'w2', 'w-B', 'w3']) configs.put(id, 'lifecycle', doc(id), 1)
  configs.put('w-a', 'cors', '{}', 1)
  t.ok(ws.softDelete(T1, 'w3', 2))
  seen.push(l.buckets('', 10), l.buckets('', 1), l.buckets('w-B', 1), l.buckets('w2', 10))
  seen.push(l.bucket('w1'), l.bucket('w-a'), l.bucket('w3'), new LifecycleRepo(other).bucket('w-B'))

  // Versions of keys: the current one's file live, a noncurrent one's file deleted, a delete marker.
  const o = new ObjectsRepo(engine)
  const file = (id: string, key: string, size: number, deleted: boolean) => {
    o.insertCompleted({
      id,
      tenantId: T1,
      workspaceId: 'w1',
      key: deleted ? `${key}#${id}` : key,
      originalName: id,
      fileType: 'text/plain',
      size,
      sha256: H[0],
      info: { etag: `"${id}"`, contentType: 'text/plain', meta: {} },
      now: 1,
    })
    if (deleted) engine.prepare('UPDATE files SET deleted_at = 5 WHERE id = ?').run(id)
  }
  const version = engine.prepare(
    `INSERT INTO object_versions (workspace_id, object_key, version_id, seq, tenant_id, file_id, size_bytes, created_at, noncurrent_at, lock_until, legal_hold)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
  engine.transaction(() => {
    file('f3', 'a/1', GiB5, false)
    file('f2', 'a/1', GiB5 + 1, true)
    file('f9', 'B', 3, false)
    version.run('w1', 'a/1', 'v3', 3, T1, 'f3', GiB5, now, null, now, 0) // retained until now: expirable at now
    version.run('w1', 'a/1', 'v2', 2, T1, 'f2', GiB5 + 1, now - 10, now, now + 1, 0) // retained past now
    version.run('w1', 'a/1', 'v1', 1, T1, null, 0, now - 20, now - 10, null, 1) // a delete marker under a legal hold
    version.run('w1', 'B', 'vB', 1, T1, 'f9', 3, now, null, null, 0)
    for (const [i, k] of ['é', 'e\u0301', '😀', '\ufffd', 'a/2', 'a0'].entries()) version.run('w1', k, `m${i}`, 1, T1, null, 0, now, null, null, 0)
    version.run('w2', 'a/1', 'x', 1, T2, null, 0, now, null, null, 0)
  })
  seen.push(l.keys('w1', '', '', 100), l.keys('w1', 'B', '', 2), l.keys('w1', '', 'a/', 3), l.keys('w1', 'a/1', 'a/', 100), l.keys('w1', '😀', '', 10))
  t.same(l.keys('w1', '', '', 100), [...l.keys('w1', '', '', 100)].sort(utf8Compare), 'keys in UTF-8 byte order')
  seen.push(
    l.versions('w1', 'a/1', now),
    l.versions('w1', 'a/1', now + 1),
    l.versions('w1', 'a/1', now - 1).map((v) => v.expirable),
  )
  seen.push(l.versions('w2', 'a/1', now), l.versions('w1', 'nope', now))
  t.same(
    l.versions('w1', 'a/1', now).map((v) => [v.versionId, v.size, v.expirable]),
    [
      ['v3', GiB5, true],
      ['v2', GiB5 + 1, false],
      ['v1', 0, false],
    ],
    'newest first; retained until now is expirable at now, a legal hold never',
  )

  // AbortIncompleteMultipartUpload's selection: under the prefix (é, not e + U+0301), initiated at or before.
  const m = new MultipartRepo(engine)
  const up = (id: string, key: string, createdAt: number, workspaceId = 'w1') =>
    m.insert({ id, tenantId: T1, workspaceId, key, info: { contentType: 'text/plain', meta: {} }, createdAt, expiresAt: createdAt + 10 ** 9 })
  engine.transaction(() => {
    up('u1', 'é/late', now + 1)
    up('u2', 'éa', now)
    up('u3', 'e\u0301a', now - 1)
    up('u4', 'é/x', now - 2)
    up('u5', 'x/é', now - 3)
    up('u6', 'é', now - 4, 'w-a')
  })
  seen.push(
    l.uploadsInitiatedBefore('w1', 'é', now, 10),
    l.uploadsInitiatedBefore('w1', 'é', now + 1, 1),
    l.uploadsInitiatedBefore('w1', '', now, 10),
    l.uploadsInitiatedBefore('w1', 'é/', now, 10),
    l.uploadsInitiatedBefore('w-a', 'é', now, 10),
    l.uploadsInitiatedBefore('w1', 'x/é/', now, 10),
  )
  return seen
})
