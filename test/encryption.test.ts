import t from 'tap'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { CHUNK_BYTES, HEADER_BYTES, TAG_BYTES } from '../src/lib/chunked-aead'
import { verifyCommand } from '../src/cli/maintenance'
import { createTenant, diskOnly, fileBytes, makeApp, tempDir, upload, type TestContext } from './helper'
import type { Test } from 'tap'

const skip = diskOnly('reads and damages the data dir; the S3 store variant is in s3-encryption.test.ts')

/** A master key in a file outside the data dir; the env that names it. */
function keyEnv(t: Test, key = randomBytes(32)): { env: Record<string, string>; key: Buffer; file: string } {
  const file = path.join(tempDir(t, 'coffer-key-'), 'master.key')
  fs.writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600 })
  return { env: { COFFER_ENCRYPTION_KEY_FILE: file }, key, file }
}

/** Every file under `dir`, recursively. */
function walk(dir: string): string[] {
  if (!fs.existsSync(dir)) return []
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]))
}

/** Whether any 32-byte window of `plain` (every 4 KiB) appears in the data dir: its files, and its database's inline rows. */
function plaintextIn(ctx: TestContext, plain: Buffer): string[] {
  const probes: Buffer[] = []
  for (let i = 0; i + 32 <= plain.length; i += 4096) probes.push(plain.subarray(i, i + 32))
  const found: string[] = []
  for (const f of walk(ctx.dir)) {
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
  return ctx.core.db.prepare('SELECT sha256 FROM files WHERE id = ?').pluck().get(fileId) as string
}

function cliIo(dir: string, env: Record<string, string>) {
  const out: string[] = []
  const err: string[] = []
  const sink = (arr: string[]) => ({ write: (s: string) => (arr.push(s), true) }) as unknown as NodeJS.WritableStream
  return { io: { env: { COFFER_DATA_DIR: dir, ...env }, stdout: sink(out), stderr: sink(err) }, out, err }
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
  const files = walk(ctx.core.dataDir.blobs)
  t.equal(files.length, 2, 'two blob files (the small one is inline)')
  t.notOk(
    files.some((f) => path.basename(f) === largeSha),
    'no blob file is named by its SHA-256',
  )
  t.ok(
    files.some((f) => fs.statSync(f).size === HEADER_BYTES + large.length + 6 * TAG_BYTES),
    'the large blob is sealed in six chunks',
  )
  t.equal(ctx.core.db.prepare('SELECT count(*) FROM blob_inline WHERE sha256 = ?').pluck().get(shaOf(ctx, ids.small!)), 0, 'nor an inline row')
  // Equal content is stored once (dedup by name).
  await upload(ctx.app, tenant.headers, { bytes: large })
  t.equal(walk(ctx.core.dataDir.blobs).length, 2, 'the same content uploaded again is not stored again')
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
  const [file] = walk(ctx.core.dataDir.blobs)
  // A byte in chunk 5: chunks 0..4 go out before the damage is met.
  const fd = fs.openSync(file!, 'r+')
  const at = HEADER_BYTES + 5 * (CHUNK_BYTES + TAG_BYTES) + 100
  const one = Buffer.alloc(1)
  fs.readSync(fd, one, 0, 1, at)
  one[0]! ^= 0x20
  fs.writeSync(fd, one, 0, 1, at)
  fs.closeSync(fd)
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
  const start = (e: Record<string, string>) => () => createCore(loadConfig(e, { 'data-dir': ctx.dir })).close()
  t.throws(start({}), { name: 'ConfigError', message: /this data dir is encrypted: set COFFER_ENCRYPTION_KEY_FILE/ })
  t.throws(start({ COFFER_ENCRYPTION_KEY: randomBytes(32).toString('hex') }), { name: 'ConfigError', message: /is not this data dir's/ })
  t.throws(start({ COFFER_ENCRYPTION_KEY: 'short' }), { name: 'ConfigError', message: /64 hex digits or the base64 of 32 bytes/ })
  const inside = path.join(ctx.dir, 'master.key')
  fs.writeFileSync(inside, randomBytes(32).toString('hex'))
  t.throws(() => loadConfig({ COFFER_ENCRYPTION_KEY_FILE: inside }, { 'data-dir': ctx.dir }), { name: 'ConfigError', message: /must be outside the data dir/ })
  t.doesNotThrow(start(env), 'the right key starts')
})
