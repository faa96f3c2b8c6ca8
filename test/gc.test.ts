// @suites: pg s3
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import { createTenant, fileBytes, makeApp, upload, blobFile, storedBlobs, diskOnly, testDatabaseEnv } from './helper'
import { gcCommand, verifyCommand } from '../src/cli/maintenance'
import { ORPHAN_MIN_AGE_MS } from '../src/services/gc'
import { INLINE_MAX_BYTES } from '../src/blobs/disk-blob-store'

t.test('identical content is stored once and survives deleting one of the two files', async (t) => {
  const { app, core, clock } = await makeApp(t, { COFFER_DELETED_RETENTION_SECONDS: '3600' })
  const tenant = await createTenant(app)
  const other = await createTenant(app)
  const bytes = fileBytes('image/png', 4096)
  const one = await upload(app, tenant.headers, { bytes, name: 'one.png' })
  const two = await upload(app, tenant.headers, { bytes, name: 'two.png' })
  const three = await upload(app, other.headers, { bytes, name: 'three.png' })
  t.equal((await storedBlobs(core)).length, 1, 'one blob stored for three files')
  t.equal(core.db.pluck('SELECT count(*) FROM blobs').get(), 1)
  t.equal((await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json().usedBytes, 8192, 'each file counts against its quota')
  await app.inject({ method: 'DELETE', url: `/api/v1/files/${one.fileId}`, headers: tenant.headers })
  clock.advance(3600_000 + 1)
  t.same(await core.gc.collect(), { filesPurged: 1, blobsRemoved: 0, bytesFreed: 0, tenantsPurged: 0 }, 'the deleted row is purged, the shared blob stays')
  for (const [id, headers] of [
    [two.fileId, tenant.headers],
    [three.fileId, other.headers],
  ] as const) {
    const res = await app.inject({ url: `/api/v1/files/${id}/download`, headers })
    t.equal(res.statusCode, 200)
    t.ok(res.rawPayload.equals(bytes))
  }
  await app.inject({ method: 'DELETE', url: `/api/v1/files/${two.fileId}`, headers: tenant.headers })
  await app.inject({ method: 'DELETE', url: `/api/v1/files/${three.fileId}`, headers: other.headers })
  t.same(await core.gc.collect(), { filesPurged: 0, blobsRemoved: 0, bytesFreed: 0, tenantsPurged: 0 }, 'nothing before the retention has passed')
  clock.advance(3600_000 + 1)
  t.same(await core.gc.collect(), { filesPurged: 2, blobsRemoved: 1, bytesFreed: 4096, tenantsPurged: 0 })
  t.same(await storedBlobs(core), [], 'the blob is gone with its last reference')
  t.equal(core.db.pluck('SELECT count(*) FROM files').get(), 0)
})

t.test('a blob collected while an upload of the same content commits is re-linked, not lost', async (t) => {
  const { app, core, clock } = await makeApp(t, { COFFER_DELETED_RETENTION_SECONDS: '0' })
  const tenant = await createTenant(app)
  const bytes = fileBytes('image/png', 2048)
  const first = await upload(app, tenant.headers, { bytes })
  await app.inject({ method: 'DELETE', url: `/api/v1/files/${first.fileId}`, headers: tenant.headers })
  clock.advance(1)
  // The second upload streams while the collector removes the only (now unreferenced) copy.
  const hs = (
    await app.inject({ method: 'POST', url: '/api/v1/upload/request', headers: tenant.headers, payload: { fileType: 'image/png', fileName: 'b.png' } })
  ).json()
  const body = new PassThrough()
  const put = app.inject({ method: 'PUT', url: hs.presignedUrl, headers: { 'content-type': 'image/png' }, payload: body })
  body.write(bytes.subarray(0, 1000))
  await new Promise((r) => setTimeout(r, 30))
  t.equal((await core.gc.collect()).blobsRemoved, 1)
  body.end(bytes.subarray(1000))
  t.equal((await put).statusCode, 200)
  const res = await app.inject({ url: `/api/v1/files/${hs.fileId}/download`, headers: tenant.headers })
  t.equal(res.statusCode, 200)
  t.ok(res.rawPayload.equals(bytes))
})

t.test(
  'BlobStore.ensurePlaced re-links content removed between place and commit',
  { skip: diskOnly('a remote store keeps content by lease (s3-store.test.ts)') },
  async (t) => {
    const { core } = await makeApp(t)
    const size = INLINE_MAX_BYTES + 100
    const staged = await core.store.stage(Readable.from([fileBytes('image/png', size)]), { maxBytes: size, onOverflow: () => new Error('x') })
    t.equal(staged.inline, undefined, 'content larger than INLINE_MAX_BYTES is a file')
    await core.store.place(staged)
    core.store.removeSync(staged.sha256)
    t.notOk(fs.existsSync(blobFile(core, staged.sha256)))
    core.store.ensurePlaced(staged)
    t.ok(fs.existsSync(blobFile(core, staged.sha256)))
    await core.store.discard(staged)
    t.notOk(fs.existsSync(staged.tmpPath))
  },
)

t.test(
  'inline blobs: small content is a database row, written by ensurePlaced, read, hashed, listed and removed like a file',
  { skip: diskOnly('inline blobs are a disk-store optimisation') },
  async (t) => {
    const { core } = await makeApp(t)
    const inlineRow = (sha: string) => core.db.pluck('SELECT content FROM blob_inline WHERE sha256 = ?').get(sha) as Buffer | undefined
    const bytes = fileBytes('image/png', 3000)
    // Announced small: kept in memory, no staging file at all.
    const staged = await core.store.stage(Readable.from([bytes]), { maxBytes: 5000, expectedBytes: 3000, onOverflow: () => new Error('x') })
    t.ok(staged.inline?.equals(bytes))
    t.notOk(fs.existsSync(staged.tmpPath), 'nothing was written to a staging file')
    await core.store.place(staged)
    t.equal(inlineRow(staged.sha256), undefined, 'place leaves it to the commit transaction')
    core.db.transaction(() => core.store.ensurePlaced(staged))
    t.ok(inlineRow(staged.sha256)?.equals(bytes), 'ensurePlaced writes the row')
    t.notOk(fs.existsSync(blobFile(core, staged.sha256)), 'and no blob file')
    const whole = await core.store.open(staged.sha256)
    t.ok(Buffer.isBuffer(whole.body) && whole.body.equals(bytes))
    const part = await core.store.open(staged.sha256, { start: 10, end: 19 })
    t.same({ length: part.length, body: part.body }, { length: 10, body: bytes.subarray(10, 20) }, 'a range of it')
    t.equal(await core.store.hash(staged.sha256), staged.sha256)
    t.same(await storedBlobs(core), [staged.sha256], 'listed')
    // Unannounced length: staged through a file, then kept inline all the same (stored one way by size).
    const again = await core.store.stage(Readable.from([bytes]), { maxBytes: 5000, onOverflow: () => new Error('x') })
    t.ok(again.inline?.equals(bytes))
    t.notOk(fs.existsSync(again.tmpPath), 'its staging file is gone')
    core.db.transaction(() => core.store.removeSync(staged.sha256))
    t.equal(inlineRow(staged.sha256), undefined, 'removeSync deletes the row')
    await t.rejects(core.store.open(staged.sha256), { name: 'BlobNotFoundError' })
    // Identical content already stored as a file (stored before inlining, or under a lower limit) is not stored twice.
    fs.mkdirSync(path.dirname(blobFile(core, staged.sha256)), { recursive: true })
    fs.writeFileSync(blobFile(core, staged.sha256), bytes)
    core.db.transaction(() => core.store.ensurePlaced(again))
    t.equal(inlineRow(staged.sha256), undefined, 'the file copy is used; no row is added')
    const read = await core.store.open(staged.sha256)
    t.ok(Buffer.isBuffer(read.body) && read.body.equals(bytes))
    // Empty content (an empty S3 object) is an inline row too.
    const empty = await core.store.stage(Readable.from([]), { maxBytes: 10, expectedBytes: 0, onOverflow: () => new Error('x') })
    core.db.transaction(() => core.store.ensurePlaced(empty))
    const opened = await core.store.open(empty.sha256)
    t.same({ length: opened.length, bytes: (opened.body as Buffer).length }, { length: 0, bytes: 0 })
  },
)

t.test('coffer gc and coffer verify', { skip: diskOnly('damages blob files; the S3 variant is in s3-store.test.ts') }, async (t) => {
  const { app, core, dir } = await makeApp(t)
  // The commands run on the app's database: its schema on PostgreSQL.
  const dbEnv = await testDatabaseEnv(t, dir)
  const tenant = await createTenant(app)
  const a = await upload(app, tenant.headers, { bytes: fileBytes('image/png', INLINE_MAX_BYTES + 3000, 1) })
  const b = await upload(app, tenant.headers, { bytes: fileBytes('image/png', INLINE_MAX_BYTES + 3000, 2) })
  // Small content is kept inline in the database: checked the same way.
  const c = await upload(app, tenant.headers, { bytes: fileBytes('image/png', 3000, 3) })
  const io = () => {
    const out: string[] = []
    const sink = (arr: string[]) => ({ write: (s: string) => (arr.push(s), true) }) as unknown as NodeJS.WritableStream
    return { io: { env: { COFFER_DATA_DIR: dir, ...dbEnv }, stdout: sink(out), stderr: sink([]) }, out }
  }
  let run = io()
  t.equal(await verifyCommand(['--json'], run.io), 0)
  t.match(JSON.parse(run.out.join('')), { ok: true, checked: 3, missing: [], corrupt: [], orphans: [] })
  const shaA = core.db.pluck('SELECT sha256 FROM files WHERE id = ?').get(a.fileId) as string
  const shaB = core.db.pluck('SELECT sha256 FROM files WHERE id = ?').get(b.fileId) as string
  fs.chmodSync(blobFile(core, shaA), 0o600)
  fs.appendFileSync(blobFile(core, shaA), 'bit rot')
  fs.rmSync(blobFile(core, shaB))
  const orphan = 'f'.repeat(64)
  fs.mkdirSync(path.dirname(blobFile(core, orphan)), { recursive: true })
  fs.writeFileSync(blobFile(core, orphan), 'left by a crash')
  const shaC = core.db.pluck('SELECT sha256 FROM files WHERE id = ?').get(c.fileId) as string
  const rotten = Buffer.concat([core.db.pluck('SELECT content FROM blob_inline WHERE sha256 = ?').get(shaC) as Buffer, Buffer.from('bit rot')])
  t.equal(core.db.prepare('UPDATE blob_inline SET content = ? WHERE sha256 = ?').run(rotten, shaC).changes, 1, 'c is inline')
  const inlineOrphan = 'e'.repeat(64)
  core.db.prepare('INSERT INTO blob_inline (sha256, content, created_at) VALUES (?, ?, ?)').run(inlineOrphan, Buffer.from('x'), Date.now())
  run = io()
  t.equal(await verifyCommand([], run.io), 1, 'exit 1 when content is missing or corrupt')
  const text = run.out.join('')
  t.match(text, /checked 3 blob\(s\): 1 missing, 2 corrupt, 2 orphaned/)
  t.match(text, new RegExp(`corrupt  ${shaA}`))
  t.match(text, new RegExp(`corrupt  ${shaC}`))
  t.match(text, new RegExp(`orphan   ${inlineOrphan}`))
  t.match(text, new RegExp(`missing  ${shaB}`))
  t.match(text, new RegExp(`orphan   ${orphan}`))
  // gc: a young orphan may be mid-commit and is kept; an old one goes.
  run = io()
  t.equal(await gcCommand(['--json'], run.io), 0)
  t.match(JSON.parse(run.out.join('')), { orphansRemoved: 0 })
  const old = new Date(Date.now() - ORPHAN_MIN_AGE_MS - 60_000)
  fs.utimesSync(blobFile(core, orphan), old, old)
  core.db.prepare('UPDATE blob_inline SET created_at = ? WHERE sha256 = ?').run(old.getTime(), inlineOrphan)
  run = io()
  t.equal(await gcCommand([], run.io), 0)
  t.match(run.out.join(''), /and 2 orphaned blob file/)
  t.notOk(fs.existsSync(blobFile(core, orphan)))
  t.equal(core.db.pluck('SELECT count(*) FROM blob_inline WHERE sha256 = ?').get(inlineOrphan), 0, 'the inline orphan is removed too')
})
