// @suites: pg-all
import t from 'tap'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { CHUNK_BYTES, HEADER_BYTES, TAG_BYTES } from '../src/lib/chunked-aead'
import { verifyCommand } from '../src/cli/maintenance'
import { encryptBlobsCommand, rotateKeyCommand } from '../src/cli/encryption'
import { backupCommand } from '../src/cli/backup'
import { encryptBlobs } from '../src/services/encrypt-blobs'
import type { EncryptedBlobStore } from '../src/blobs/encrypted-blob-store'
import {
  databaseEnvOf,
  createTenant,
  diskOnly,
  fileBytes,
  filesBelow,
  flipByte,
  makeApp,
  sqliteOnly,
  storedBlobs,
  tempDir,
  upload,
  type TestContext,
} from './helper'
import type { Test } from 'tap'
import { blobPath } from '../src/blobs/layout'

const skip = diskOnly('reads and damages the data dir; the S3 store variant is in s3-encryption.test.ts')

/** A master key in a file outside the data dir; the env that names it. */
function keyEnv(t: Test, key = randomBytes(32)): { env: Record<string, string>; key: Buffer; file: string } {
  const file = path.join(tempDir(t, 'coffer-key-'), 'master.key')
  fs.writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600 })
  return { env: { COFFER_ENCRYPTION_KEY_FILE: file }, key, file }
}

/** Whether any 32-byte window of `plain` (every 4 KiB) appears in the data dir: its files, and its database's inline rows. */
function plaintextIn(ctx: TestContext, plain: Buffer): string[] {
  const probes: Buffer[] = []
  for (let i = 0; i + 32 <= plain.length; i += 4096) probes.push(plain.subarray(i, i + 32))
  const found: string[] = []
  for (const f of filesBelow(ctx.dir)) {
    if (f.endsWith('coffer.db') || f.endsWith('-wal') || f.endsWith('-shm')) continue
    const bytes = fs.readFileSync(f)
    if (probes.some((p) => bytes.includes(p))) found.push(f)
  }
  for (const row of ctx.core.db.prepare('SELECT sha256, content FROM blob_inline').all() as { sha256: string; content: Buffer }[]) {
    if (probes.some((p) => row.content.includes(p))) found.push(`blob_inline ${row.sha256}`)
  }
  return found
}

function shaOf(ctx: TestContext, fileId: string): string {
  return ctx.core.db.pluck('SELECT sha256 FROM files WHERE id = ?').get(fileId) as string
}

function cliIo(dir: string, env: Record<string, string>) {
  const out: string[] = []
  const err: string[] = []
  const sink = (arr: string[]) => ({ write: (s: string) => (arr.push(s), true) }) as unknown as NodeJS.WritableStream
  return { io: { env: { COFFER_DATA_DIR: dir, ...databaseEnvOf(dir), ...env }, stdout: sink(out), stderr: sink(err) }, out, err }
}

/** A GET on a real socket: status, the bytes received, and whether the response ended cleanly. */
function rawGet(port: number, urlPath: string, headers: Record<string, string>): Promise<{ status: number; length: number; bytes: Buffer; clean: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, headers }, (res) => {
      const parts: Buffer[] = []
      res.on('data', (b: Buffer) => parts.push(b))
      const done = (clean: boolean) => resolve({ status: res.statusCode!, length: Number(res.headers['content-length']), bytes: Buffer.concat(parts), clean })
      res.on('end', () => done(res.complete))
      res.on('error', () => done(false))
      res.on('aborted', () => done(false))
    })
    req.on('error', reject)
  })
}

t.test('an encrypted data dir: content round-trips, ranges read, and nothing of it is stored in the clear (#27)', { skip }, async (t) => {
  const { env } = keyEnv(t)
  const ctx = await makeApp(t, env)
  const tenant = await createTenant(ctx.app)
  const small = fileBytes('image/png', 3000, 1) // inline in the database
  const large = fileBytes('image/png', 5 * CHUNK_BYTES + 777, 2) // a file of six chunks
  const exact = fileBytes('image/png', 2 * CHUNK_BYTES, 3)
  const ids: Record<string, string> = {}
  for (const [label, bytes] of Object.entries({ small, large, exact })) {
    const r = await upload(ctx.app, tenant.headers, { bytes })
    t.equal(r.put.statusCode, 200, `${label} uploaded`)
    ids[label] = r.fileId
    const got = await ctx.app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
    t.equal(got.statusCode, 200)
    const sha = createHash('sha256').update(bytes).digest('hex')
    t.equal(got.headers.etag, `"${sha}"`, 'the ETag is the SHA-256 of the plaintext')
    t.equal(shaOf(ctx, r.fileId), sha, 'and so is the recorded hash')
    t.ok(got.rawPayload.equals(bytes), `${label} downloads as uploaded`)
    t.same(plaintextIn(ctx, bytes), [], `no plaintext of ${label} in the data dir`)
  }
  const ranges: [number, number][] = [
    [0, 9],
    [CHUNK_BYTES - 3, CHUNK_BYTES + 3],
    [3 * CHUNK_BYTES + 1, 4 * CHUNK_BYTES + 100],
    [large.length - 10, large.length - 1],
  ]
  for (const [start, end] of ranges) {
    const res = await ctx.app.inject({ url: `/api/v1/files/${ids.large}/download`, headers: { ...tenant.headers, range: `bytes=${start}-${end}` } })
    t.equal(res.statusCode, 206)
    t.ok(res.rawPayload.equals(large.subarray(start, end + 1)), `range ${start}-${end}`)
  }
  const tail = await ctx.app.inject({ url: `/api/v1/files/${ids.exact}/download`, headers: { ...tenant.headers, range: `bytes=${CHUNK_BYTES}-` } })
  t.ok(tail.rawPayload.equals(exact.subarray(CHUNK_BYTES)), 'the last chunk of content a multiple of the chunk size')
  // Stored under names that are not the SHA-256, at their sealed size.
  const largeSha = shaOf(ctx, ids.large!)
  const files = filesBelow(ctx.core.dataDir.blobs)
  t.equal(files.length, 2, 'two blob files (the small one is inline)')
  t.notOk(
    files.some((f) => path.basename(f) === largeSha),
    'no blob file is named by its SHA-256',
  )
  t.ok(
    files.some((f) => fs.statSync(f).size === HEADER_BYTES + large.length + 6 * TAG_BYTES),
    'the large blob is sealed in six chunks',
  )
  t.equal(ctx.core.db.pluck('SELECT count(*) FROM blob_inline WHERE sha256 = ?').get(shaOf(ctx, ids.small!)), 0, 'nor an inline row')
  // Equal content is stored once (dedup by name).
  await upload(ctx.app, tenant.headers, { bytes: large })
  t.equal(filesBelow(ctx.core.dataDir.blobs).length, 2, 'the same content uploaded again is not stored again')
  const run = cliIo(ctx.dir, env)
  t.equal(await verifyCommand(['--json'], run.io), 0)
  t.match(JSON.parse(run.out.join('')), { ok: true, checked: 3, corrupt: [], missing: [], orphans: [] })
})

t.test('a flipped byte is never served: the download is cut, not ended cleanly, and coffer verify reports it (#27)', { skip }, async (t) => {
  const { env } = keyEnv(t)
  const ctx = await makeApp(t, env)
  const tenant = await createTenant(ctx.app)
  const large = fileBytes('image/png', 8 * CHUNK_BYTES, 4)
  const small = fileBytes('image/png', 2000, 5)
  const a = await upload(ctx.app, tenant.headers, { bytes: large })
  const b = await upload(ctx.app, tenant.headers, { bytes: small })
  const [file] = filesBelow(ctx.core.dataDir.blobs)
  // A byte in chunk 5: chunks 0..4 go out before the damage is met.
  flipByte(file!, HEADER_BYTES + 5 * (CHUNK_BYTES + TAG_BYTES) + 100)
  const shaB = shaOf(ctx, b.fileId)
  const row = ctx.core.db.prepare('SELECT sha256, content FROM blob_inline').get() as { sha256: string; content: Buffer }
  row.content[HEADER_BYTES + 10]! ^= 0x01
  ctx.core.db.prepare('UPDATE blob_inline SET content = ? WHERE sha256 = ?').run(row.content, row.sha256)

  await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const port = (ctx.app.server.address() as { port: number }).port
  const got = await rawGet(port, `/api/v1/files/${a.fileId}/download`, tenant.headers)
  t.equal(got.status, 200)
  t.equal(got.length, large.length, 'the headers announced the whole content')
  t.notOk(got.clean, 'the connection was destroyed, not ended cleanly')
  t.ok(got.bytes.length <= 5 * CHUNK_BYTES, `only the chunks before the damage were sent (${got.bytes.length} bytes)`)
  t.ok(large.subarray(0, got.bytes.length).equals(got.bytes), 'and they were authentic')
  const before = await rawGet(port, `/api/v1/files/${a.fileId}/download`, { ...tenant.headers, range: `bytes=0-${CHUNK_BYTES - 1}` })
  t.ok(before.clean && before.bytes.equals(large.subarray(0, CHUNK_BYTES)), 'a range of intact chunks still reads')
  const damaged = await ctx.app.inject({ url: `/api/v1/files/${b.fileId}/download`, headers: tenant.headers })
  t.equal(damaged.statusCode, 500, 'damaged small content fails before any byte is sent')
  t.notOk(damaged.rawPayload.includes(small.subarray(100, 140)), 'and none of it is in the answer')

  const run = cliIo(ctx.dir, env)
  t.equal(await verifyCommand(['--json'], run.io), 1)
  const report = JSON.parse(run.out.join('')) as { corrupt: string[] }
  t.same(report.corrupt.sort(), [shaOf(ctx, a.fileId), shaB].sort(), 'coffer verify reports both as corrupt')
})

t.test('a missing or wrong master key is refused at start; so is a key file inside the data dir (#27)', { skip }, async (t) => {
  const { env } = keyEnv(t)
  const ctx = await makeApp(t, env)
  const tenant = await createTenant(ctx.app)
  await upload(ctx.app, tenant.headers, { bytes: fileBytes('image/png', 100_000, 6) })
  const start = (e: Record<string, string>) => () => createCore(loadConfig({ ...databaseEnvOf(ctx.dir), ...e }, { 'data-dir': ctx.dir })).close()
  t.throws(start({}), { name: 'ConfigError', message: /this data dir is encrypted: set COFFER_ENCRYPTION_KEY_FILE/ })
  t.throws(start({ COFFER_ENCRYPTION_KEY: randomBytes(32).toString('hex') }), { name: 'ConfigError', message: /is not this data dir's/ })
  t.throws(start({ COFFER_ENCRYPTION_KEY: 'short' }), { name: 'ConfigError', message: /64 hex digits or the base64 of 32 bytes/ })
  const inside = path.join(ctx.dir, 'master.key')
  fs.writeFileSync(inside, randomBytes(32).toString('hex'))
  t.throws(() => loadConfig({ COFFER_ENCRYPTION_KEY_FILE: inside }, { 'data-dir': ctx.dir }), { name: 'ConfigError', message: /must be outside the data dir/ })
  t.doesNotThrow(start(env), 'the right key starts')
})

t.test('turning encryption on for a data dir with content: read in the clear until coffer encrypt-blobs seals it, resumably (#27)', { skip }, async (t) => {
  const dir = tempDir(t)
  const plainCtx = await makeApp(t, {}, { dir })
  const tenant = await createTenant(plainCtx.app)
  const contents = [fileBytes('image/png', 2500, 7), fileBytes('image/png', 3 * CHUNK_BYTES + 5, 8), fileBytes('image/png', 200_000, 9)]
  const ids: string[] = []
  for (const bytes of contents) ids.push((await upload(plainCtx.app, tenant.headers, { bytes })).fileId)
  await plainCtx.app.close()
  plainCtx.core.close()

  const { env } = keyEnv(t)
  const ctx = await makeApp(t, env, { dir })
  const read = async (i: number) => (await ctx.app.inject({ url: `/api/v1/files/${ids[i]}/download`, headers: tenant.headers })).rawPayload
  for (let i = 0; i < contents.length; i++) t.ok((await read(i)).equals(contents[i]!), `content ${i} stored in the clear still reads`)
  // Content uploaded now is sealed at once, even when the same content is also in the clear.
  const again = await upload(ctx.app, tenant.headers, { bytes: contents[1]! })
  t.equal(again.put.statusCode, 200)
  t.ok(plaintextIn(ctx, contents[2]!).length > 0, 'before the migration, old content is in the clear')

  // A first run cut short: the second blob's read fails once.
  const store = ctx.core.store as EncryptedBlobStore
  const sha2 = shaOf(ctx, ids[2]!)
  const innerOpen = store.inner.open.bind(store.inner)
  let failed = false
  store.inner.open = async (sha, range) => {
    if (sha === sha2 && !failed) {
      failed = true
      throw new Error('the disk went away')
    }
    return innerOpen(sha, range)
  }
  await t.rejects(encryptBlobs({ db: ctx.core.db, store }), /the disk went away/)
  store.inner.open = innerOpen
  const run = cliIo(dir, env)
  t.equal(await encryptBlobsCommand(['--json'], run.io), 0)
  const report = JSON.parse(run.out.join('')) as { checked: number; sealed: number; present: number; done: boolean }
  t.match(report, { checked: 3, done: true })
  t.ok(report.present >= 1 && report.sealed >= 1 && report.sealed + report.present === 3, `resumed: ${report.sealed} sealed, ${report.present} present`)
  for (let i = 0; i < contents.length; i++) {
    t.ok((await read(i)).equals(contents[i]!), `content ${i} reads after the migration`)
    t.same(plaintextIn(ctx, contents[i]!), [], `content ${i} is no longer in the clear`)
  }
  t.equal(ctx.core.db.pluck('SELECT plain_remaining FROM encryption').get(), 0, 'the data dir is marked sealed')
  const verify = cliIo(dir, env)
  t.equal(await verifyCommand(['--json'], verify.io), 0)
  t.match(JSON.parse(verify.out.join('')), { ok: true, checked: 3, orphans: [] })
  // Once sealed, content placed in the clear under its SHA-256 is never served.
  const sha0 = shaOf(ctx, ids[0]!)
  ctx.core.db.prepare('INSERT INTO blob_inline (sha256, content, created_at) VALUES (?, ?, ?)').run(sha0, Buffer.from('planted'), Date.now())
  const name0 = ctx.core.db.pluck('SELECT sha256 FROM blob_inline WHERE sha256 != ?').all(sha0) as string[]
  ctx.core.db.prepare(`DELETE FROM blob_inline WHERE sha256 IN (${name0.map(() => '?').join(',')})`).run(...name0)
  const planted = await ctx.app.inject({ url: `/api/v1/files/${ids[0]}/download`, headers: tenant.headers })
  t.not(planted.statusCode, 200, 'content in the clear is not read once the data dir is sealed')
  t.notOk(planted.rawPayload.includes(Buffer.from('planted')))
})

t.test('coffer rotate-key wraps the data dir key under a new master key; blobs stay as they are (#27)', { skip }, async (t) => {
  const old = keyEnv(t)
  const ctx = await makeApp(t, old.env)
  const tenant = await createTenant(ctx.app)
  const bytes = fileBytes('image/png', 150_000, 10)
  const r = await upload(ctx.app, tenant.headers, { bytes })
  const before = filesBelow(ctx.core.dataDir.blobs).map((f) => fs.readFileSync(f).toString('base64'))
  await ctx.app.close()
  ctx.core.close()
  const next = keyEnv(t)
  const run = cliIo(ctx.dir, old.env)
  t.equal(await rotateKeyCommand(['--new-key-file', next.file], run.io), 0)
  t.same(
    filesBelow(path.join(ctx.dir, 'blobs')).map((f) => fs.readFileSync(f).toString('base64')),
    before,
    'no blob rewritten',
  )
  t.throws(
    () => createCore(loadConfig({ ...databaseEnvOf(ctx.dir), ...old.env }, { 'data-dir': ctx.dir })),
    { name: 'ConfigError', message: /is not this data dir's/ },
    'the old key is refused',
  )
  const ctx2 = await makeApp(t, next.env, { dir: ctx.dir })
  const got = await ctx2.app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
  t.ok(got.rawPayload.equals(bytes), 'the new key reads the content')
  const bad = cliIo(ctx.dir, next.env)
  await t.rejects(rotateKeyCommand(['--new-key-file', path.join(ctx.dir, 'nope')], bad.io), /--new-key-file .* cannot be read/)
})

t.test('garbage collection and the orphan sweep on an encrypted data dir: stored names map back to their hashes (#27)', { skip }, async (t) => {
  const { env } = keyEnv(t)
  const ctx = await makeApp(t, { ...env, COFFER_DELETED_RETENTION_SECONDS: '0' })
  const tenant = await createTenant(ctx.app)
  const kept = await upload(ctx.app, tenant.headers, { bytes: fileBytes('image/png', 200_000, 11) })
  const gone = await upload(ctx.app, tenant.headers, { bytes: fileBytes('image/png', 150_000, 12) })
  const small = await upload(ctx.app, tenant.headers, { bytes: fileBytes('image/png', 1000, 13) })
  t.same((await storedBlobs(ctx.core)).sort(), [kept, gone, small].map((r) => shaOf(ctx, r.fileId)).sort(), 'the listing gives the recorded hashes')
  await ctx.app.inject({ method: 'DELETE', url: `/api/v1/files/${gone.fileId}`, headers: tenant.headers })
  await ctx.app.inject({ method: 'DELETE', url: `/api/v1/files/${small.fileId}`, headers: tenant.headers })
  ctx.clock.advance(1)
  t.match(await ctx.core.gc.collect(), { blobsRemoved: 2 })
  t.equal(filesBelow(ctx.core.dataDir.blobs).length, 1, 'the collected blob file is gone')
  t.equal(ctx.core.db.pluck('SELECT count(*) FROM blob_inline').get(), 0, 'and the inline row')
  // A sealed blob no record maps to (a crash between placing and committing): swept once old enough.
  const orphan = blobPath(ctx.core.dataDir.blobs, 'abcd' + '0'.repeat(60))
  fs.mkdirSync(path.dirname(orphan), { recursive: true })
  fs.writeFileSync(orphan, Buffer.alloc(HEADER_BYTES + TAG_BYTES))
  ctx.clock.set(Date.now() + 2 * 3600_000)
  t.equal(await ctx.core.gc.removeOrphans(), 1, 'one orphan removed')
  t.notOk(fs.existsSync(orphan))
  t.equal(filesBelow(ctx.core.dataDir.blobs).length, 1, 'the kept blob stays')
  const got = await ctx.app.inject({ url: `/api/v1/files/${kept.fileId}/download`, headers: tenant.headers })
  t.ok(got.rawPayload.equals(fileBytes('image/png', 200_000, 11)))
})

t.test(
  'coffer backup of an encrypted data dir copies the sealed blobs under their names; the copy opens with the same key (#27)',
  { skip: skip || sqliteOnly('coffer backup copies a data dir whose metadata is its SQLite file; on PostgreSQL it points at pg_dump (#30)') },
  async (t) => {
    const { env } = keyEnv(t)
    const ctx = await makeApp(t, env)
    const tenant = await createTenant(ctx.app)
    const contents = [fileBytes('image/png', 1500, 31), fileBytes('image/png', 250_000, 32)]
    const ids: string[] = []
    for (const bytes of contents) ids.push((await upload(ctx.app, tenant.headers, { bytes })).fileId)
    const dest = path.join(tempDir(t, 'coffer-backup-'), 'copy')
    const run = cliIo(ctx.dir, env)
    t.equal(await backupCommand([dest, '--json'], run.io), 0, run.err.join(''))
    t.match(JSON.parse(run.out.join('')), { blobs: 2, inline: 1, missing: [] })
    const copy = await makeApp(t, env, { dir: dest })
    for (const [i, id] of ids.entries()) {
      const got = await copy.app.inject({ url: `/api/v1/files/${id}/download`, headers: tenant.headers })
      t.ok(got.rawPayload.equals(contents[i]!), `file ${i} reads from the copy`)
    }
    for (const c of contents) t.same(plaintextIn(copy, c), [], 'no plaintext in the copy')
    const verify = cliIo(dest, env)
    t.equal(await verifyCommand(['--json'], verify.io), 0)
  },
)
