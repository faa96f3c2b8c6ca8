// @suites: pg-all
import t, { type Test } from 'tap'
import net from 'node:net'
import fs from 'node:fs'
import { createHash } from 'node:crypto'
import { PassThrough } from 'node:stream'
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { databaseEnvOf, createTenant, fileBytes, makeApp, sqliteOnly, storedBlobs, testStoreEnv, upload } from './helper'
import { fixtureEnv } from './s3/fixture'
import { gcCommand, verifyCommand } from '../src/cli/maintenance'
import { backupCommand } from '../src/cli/backup'
import { migrateBlobsCommand } from '../src/cli/migrate-blobs'
import { ORPHAN_MIN_AGE_MS } from '../src/services/gc'
import { BlobLeasesRepo } from '../src/db/repos/blob-leases'

// The S3 blob store against a real gateway: the Ceph fixture the tap `before` hook started. Without
// it (not root, no apt) these tests skip with the reason; under CI=true that is a failure.
const fixture = fixtureEnv()
if ('unavailable' in fixture) {
  if (process.env.CI === 'true') t.fail(`the Ceph fixture is required in CI: ${fixture.unavailable}`)
  else t.test('S3 blob store against the Ceph gateway', { skip: `needs the Ceph fixture (scripts/ceph-fixture.sh): ${fixture.unavailable}` }, () => {})
} else {
  run(fixture.env)
}

const MiB = 1024 * 1024
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

function run(env: Record<string, string>): void {
  const client = new S3Client({
    endpoint: env.COFFER_BLOB_S3_ENDPOINT!,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: env.COFFER_BLOB_S3_ACCESS_KEY_ID!, secretAccessKey: env.COFFER_BLOB_S3_SECRET_ACCESS_KEY! },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  })
  t.teardown(() => client.destroy())
  const bucket = env.COFFER_BLOB_S3_BUCKET!

  /** An app on the S3 store with a key prefix of its own. */
  async function s3App(t: Test, extra: Record<string, string> = {}) {
    const storeEnv = testStoreEnv('s3')
    const ctx = await makeApp(t, { ...storeEnv, ...extra })
    const prefix = storeEnv.COFFER_BLOB_S3_PREFIX!
    const key = (hex: string) => `${prefix}sha256/${hex.slice(0, 2)}/${hex.slice(2, 4)}/${hex}`
    const object = async (hex: string) => {
      const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key(hex) }))
      return Buffer.from(await res.Body!.transformToByteArray())
    }
    return { ...ctx, prefix, key, object }
  }

  t.test('an upload lands in the bucket under <prefix>sha256/aa/bb/<hex>, once per content, and downloads with ranges', async (t) => {
    const { app, core, key, object } = await s3App(t)
    const tenant = await createTenant(app)
    const bytes = fileBytes('image/png', 300_000)
    const one = await upload(app, tenant.headers, { bytes })
    t.equal(one.put.statusCode, 200)
    t.ok((await object(sha(bytes))).equals(bytes), 'the object holds the exact bytes')
    const two = await upload(app, tenant.headers, { bytes, name: 'again.png' })
    t.equal(two.put.statusCode, 200)
    t.same(await storedBlobs(core), [sha(bytes)], 'identical content is stored once')
    t.same(fs.readdirSync(core.dataDir.tmp), [], 'the staging file is gone')
    t.same(fs.readdirSync(core.dataDir.blobs), [], 'nothing in the data dir')

    const full = await app.inject({ url: `/api/v1/files/${one.fileId}/download`, headers: tenant.headers })
    t.equal(full.statusCode, 200)
    t.equal(full.headers['content-length'], String(bytes.length))
    t.equal(full.headers.etag, `"${sha(bytes)}"`)
    t.ok(full.rawPayload.equals(bytes))
    const part = await app.inject({ url: `/api/v1/files/${one.fileId}/download`, headers: { ...tenant.headers, range: 'bytes=1000-1999' } })
    t.equal(part.statusCode, 206)
    t.equal(part.headers['content-range'], `bytes 1000-1999/${bytes.length}`)
    t.ok(part.rawPayload.equals(bytes.subarray(1000, 2000)), 'the range is passed through')
    const tail = await app.inject({ url: `/api/v1/files/${one.fileId}/download`, headers: { ...tenant.headers, range: 'bytes=-10' } })
    t.ok(tail.rawPayload.equals(bytes.subarray(-10)))
    const head = await app.inject({ method: 'HEAD', url: `/api/v1/files/${one.fileId}/download`, headers: tenant.headers })
    t.equal(head.statusCode, 200)
    t.equal(head.headers['content-length'], String(bytes.length))

    // Content gone from the bucket behind Coffer's back: the contract's 404, logged.
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key(sha(bytes)) }))
    const gone = await app.inject({ url: `/api/v1/files/${one.fileId}/download`, headers: tenant.headers })
    t.equal(gone.statusCode, 404)
    t.equal(gone.json().error.code, 'FILE_NOT_FOUND')
  })

  t.test('a large upload goes up in parallel parts and comes back byte for byte', async (t) => {
    const { app, core, key } = await s3App(t)
    const tenant = await createTenant(app)
    const bytes = fileBytes('application/pdf', 20 * MiB + 12345, 7)
    const r = await upload(app, tenant.headers, { type: 'application/pdf', name: 'big.pdf', bytes })
    t.equal(r.put.statusCode, 200)
    t.equal(r.put.json().sizeBytes, bytes.length)
    const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key(sha(bytes)) }))
    t.equal(head.ContentLength, bytes.length)
    t.match(head.ETag ?? '', /-\d+"?$|^$/, 'a multipart object (Ceph 16 may leave its ETag empty)')
    const res = await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
    t.equal(sha(res.rawPayload), sha(bytes))
    const mid = await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: { ...tenant.headers, range: `bytes=${10 * MiB}-${10 * MiB + 99}` } })
    t.ok(mid.rawPayload.equals(bytes.subarray(10 * MiB, 10 * MiB + 100)))
    t.same(fs.readdirSync(core.dataDir.tmp), [])
  })

  t.test('a store that is down: 503 STORE_UNAVAILABLE with Retry-After, the upload failed and released, /ready says so', async (t) => {
    const closed = await freePort()
    const { app, core } = await makeApp(t, {
      ...testStoreEnv('s3'),
      COFFER_BLOB_S3_ENDPOINT: `http://127.0.0.1:${closed}`,
      COFFER_BLOB_S3_TIMEOUT_SECONDS: '2',
    })
    const tenant = await createTenant(app)
    const started = Date.now()
    const r = await upload(app, tenant.headers, { bytes: fileBytes('image/png', 5000) })
    t.equal(r.put.statusCode, 503)
    t.equal(r.put.headers['retry-after'], '5')
    t.same(r.put.json().error, {
      code: 'STORE_UNAVAILABLE',
      message: 'The storage backend is unavailable; nothing was stored or read. Retry later',
      details: {},
    })
    t.ok(Date.now() - started < 10_000, 'answered within the timeout, not hung')
    const file = (await app.inject({ url: `/api/v1/files/${r.fileId}`, headers: tenant.headers })).json()
    t.match(file, { processingStatus: 'failed', sizeBytes: 0 })
    t.equal((await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json().usedBytes, 0, 'the reservation was released')
    t.same(fs.readdirSync(core.dataDir.tmp), [], 'no staging file left')
    const ready = await app.inject({ url: '/ready' })
    t.equal(ready.statusCode, 503)
    t.match(ready.json().error.details.checks, { database: 'ok', storage: 'ok', blobStore: 'failed: STORE_UNAVAILABLE' })
    const metrics = (await app.inject({ url: '/metrics' })).body
    t.match(metrics, /coffer_blob_store_errors_total\{operation="head",kind="unreachable"\} [1-9]/)
    t.match(metrics, /coffer_uploads_total\{outcome="store_unavailable"\} 1/)
  })

  t.test('a store that accepts and never answers (a full OSD): 503 after the timeout, never a hang', async (t) => {
    const sockets: net.Socket[] = []
    const silent = net.createServer((s) => sockets.push(s))
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r))
    t.teardown(() => {
      sockets.forEach((s) => s.destroy())
      silent.close()
    })
    const port = (silent.address() as net.AddressInfo).port
    const { app } = await makeApp(t, { ...testStoreEnv('s3'), COFFER_BLOB_S3_ENDPOINT: `http://127.0.0.1:${port}`, COFFER_BLOB_S3_TIMEOUT_SECONDS: '1' })
    const tenant = await createTenant(app)
    const started = Date.now()
    const r = await upload(app, tenant.headers, { bytes: fileBytes('image/png', 2000) })
    t.equal(r.put.statusCode, 503)
    t.equal(r.put.json().error.code, 'STORE_UNAVAILABLE')
    t.ok(Date.now() - started < 8_000, `gave up after ${Date.now() - started} ms`)
    const metrics = (await app.inject({ url: '/metrics' })).body
    t.match(metrics, /coffer_blob_store_errors_total\{operation="head",kind="timeout"\} 1/)
  })

  t.test('working store: /ready reports it, metrics time each operation', async (t) => {
    const { app } = await s3App(t)
    const ready = await app.inject({ url: '/ready' })
    t.equal(ready.statusCode, 200)
    t.same(ready.json().checks, { database: 'ok', storage: 'ok', blobStore: 'ok' })
    const tenant = await createTenant(app)
    const r = await upload(app, tenant.headers)
    await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
    const metrics = (await app.inject({ url: '/metrics' })).body
    for (const op of ['head', 'put', 'get', 'probe']) t.match(metrics, new RegExp(`coffer_blob_store_operation_seconds_count\\{operation="${op}"\\} [1-9]`), op)
  })

  t.test('collection deletes the object; an upload holding a lease on the same content keeps it', async (t) => {
    const { app, core, clock, object } = await s3App(t, { COFFER_DELETED_RETENTION_SECONDS: '0' })
    const tenant = await createTenant(app)
    const bytes = fileBytes('image/png', 4000, 3)
    const first = await upload(app, tenant.headers, { bytes })
    await app.inject({ method: 'DELETE', url: `/api/v1/files/${first.fileId}`, headers: tenant.headers })
    clock.advance(1)
    // An upload of the same content has leased it (between its lease and its commit).
    const leases = new BlobLeasesRepo(core.db)
    leases.lease('upload-in-flight', sha(bytes), clock.now() + 60_000)
    t.match(await core.gc.collect(), { filesPurged: 1, blobsRemoved: 0 }, 'the leased blob stays')
    t.ok((await object(sha(bytes))).equals(bytes))
    leases.release('upload-in-flight')
    t.match(await core.gc.collect(true), { blobsRemoved: 1, bytesFreed: 4000 }, 'a full collection takes it once the lease is gone')
    t.same(await storedBlobs(core), [], 'the object is deleted')
    t.equal(leases.count(), 0, 'no tombstone left')
    // Uploading it again writes it again.
    const again = await upload(app, tenant.headers, { bytes })
    t.equal(again.put.statusCode, 200)
    t.ok((await object(sha(bytes))).equals(bytes))
  })

  t.test('an upload that meets a deletion in progress finishes it, then stores its own copy', async (t) => {
    const { app, core, clock, object } = await s3App(t, { COFFER_DELETED_RETENTION_SECONDS: '0' })
    const tenant = await createTenant(app)
    const bytes = fileBytes('image/png', 3000, 5)
    const first = await upload(app, tenant.headers, { bytes })
    await app.inject({ method: 'DELETE', url: `/api/v1/files/${first.fileId}`, headers: tenant.headers })
    clock.advance(1)
    // A collector that crashed after tombstoning (its claim long run out) left the object and its tombstone.
    const leases = new BlobLeasesRepo(core.db)
    core.db.transaction(() => {
      core.db.prepare('DELETE FROM files WHERE id = ?').run(first.fileId)
      core.db.prepare('DELETE FROM blobs WHERE sha256 = ?').run(sha(bytes))
      leases.tombstone(sha(bytes), clock.now())
    })
    const hs = (
      await app.inject({ method: 'POST', url: '/api/v1/upload/request', headers: tenant.headers, payload: { fileType: 'image/png', fileName: 'b.png' } })
    ).json()
    const body = new PassThrough()
    const put = app.inject({ method: 'PUT', url: hs.presignedUrl, headers: { 'content-type': 'image/png' }, payload: body })
    body.end(bytes)
    t.equal((await put).statusCode, 200)
    t.notOk(leases.tombstoned(sha(bytes)), 'the tombstone was completed')
    t.ok((await object(sha(bytes))).equals(bytes), 'and the new upload stored its content after the deletion')
    const res = await app.inject({ url: `/api/v1/files/${hs.fileId}/download`, headers: tenant.headers })
    t.ok(res.rawPayload.equals(bytes))
  })

  t.test('coffer verify and coffer gc on the bucket: missing, corrupt, orphans, --read-data', async (t) => {
    const { app, core, clock, dir, key, prefix } = await s3App(t)
    const tenant = await createTenant(app)
    const a = fileBytes('image/png', 3000, 11)
    const b = fileBytes('image/png', 3000, 12)
    await upload(app, tenant.headers, { bytes: a })
    await upload(app, tenant.headers, { bytes: b })
    const cliEnv = { ...env, COFFER_BLOB_STORE: 's3', COFFER_S3_PORT: 'off', COFFER_BLOB_S3_PREFIX: prefix, COFFER_DATA_DIR: dir, ...databaseEnvOf(dir) }
    const io = () => {
      const out: string[] = []
      const err: string[] = []
      const sink = (arr: string[]) => ({ write: (s: string) => (arr.push(s), true) }) as unknown as NodeJS.WritableStream
      return { io: { env: cliEnv, stdout: sink(out), stderr: sink(err) }, out, err }
    }
    let r = io()
    t.equal(await verifyCommand(['--json'], r.io), 0)
    t.match(JSON.parse(r.out.join('')), { ok: true, checked: 2, missing: [], corrupt: [], orphans: [], readData: false })
    // Same size, other bytes: only --read-data can tell.
    const rotten = Buffer.from(a)
    rotten[100] = rotten[100]! ^ 0xff
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key(sha(a)), Body: rotten }))
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key(sha(b)) }))
    const orphan = 'e'.repeat(64)
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key(orphan), Body: 'left by a crash' }))
    r = io()
    t.equal(await verifyCommand([], r.io), 1)
    t.match(r.out.join(''), /checked 2 blob\(s\) \(listing only; --read-data re-hashes\): 1 missing, 0 corrupt, 1 orphaned/)
    r = io()
    t.equal(await verifyCommand(['--read-data'], r.io), 1)
    t.match(r.out.join(''), /checked 2 blob\(s\): 1 missing, 1 corrupt, 1 orphaned/)
    t.match(r.out.join(''), new RegExp(`corrupt  ${sha(a)}`))
    t.match(r.out.join(''), new RegExp(`orphan   ${orphan}`))
    // gc spares a young orphan (it may be mid-commit); an old one goes.
    r = io()
    t.equal(await gcCommand(['--json'], r.io), 0)
    t.match(JSON.parse(r.out.join('')), { orphansRemoved: 0 })
    clock.set(Date.now() + ORPHAN_MIN_AGE_MS + 60_000)
    t.equal(await core.gc.removeOrphans(), 1)
    t.notOk((await storedBlobs(core)).includes(orphan))
  })

  t.test(
    'coffer backup copies the metadata and says the content stays in the store',
    { skip: sqliteOnly('coffer backup copies a data dir whose metadata is its SQLite file; on PostgreSQL it points at pg_dump (#30)') },
    async (t) => {
      const { app, dir, prefix } = await s3App(t)
      const tenant = await createTenant(app)
      await upload(app, tenant.headers)
      const dest = `${dir}-backup`
      t.teardown(() => fs.rmSync(dest, { recursive: true, force: true }))
      const out: string[] = []
      const sink = (arr: string[]) => ({ write: (s: string) => (arr.push(s), true) }) as unknown as NodeJS.WritableStream
      const io = {
        env: { ...env, COFFER_BLOB_STORE: 's3', COFFER_S3_PORT: 'off', COFFER_BLOB_S3_PREFIX: prefix, COFFER_DATA_DIR: dir, ...databaseEnvOf(dir) },
        stdout: sink(out),
        stderr: sink([]),
      }
      t.equal(await backupCommand([dest], io), 0)
      t.match(
        out.join(''),
        /backed up the metadata: 1 file record\(s\) referring to 1 blob\(s\).*The content stays in the object store \(s3 http:\/\/127\.0\.0\.1:\d+\/coffer\/t-/,
      )
      t.ok(fs.existsSync(`${dest}/coffer.db`))
      const copied = fs.readdirSync(`${dest}/blobs`, { recursive: true }).filter((p) => fs.statSync(`${dest}/blobs/${String(p)}`).isFile())
      t.same(copied, [], 'no content copied')
      // The copy serves the same files from the same bucket.
      const restored = await makeApp(t, { ...testStoreEnv('s3'), COFFER_BLOB_S3_PREFIX: prefix }, { dir: dest })
      const list = await restored.app.inject({ url: '/api/v1/files', headers: tenant.headers })
      const id = list.json().files[0].id as string
      t.equal((await restored.app.inject({ url: `/api/v1/files/${id}/download`, headers: tenant.headers })).statusCode, 200)
    },
  )

  t.test('coffer migrate-blobs moves a data dir to S3 and back: verified, resumable, while the server runs', async (t) => {
    // On the disk store whatever the run's COFFER_TEST_BLOB_STORE: the content moves from there to the bucket.
    const disk = await makeApp(t, { COFFER_BLOB_STORE: 'disk', COFFER_DELETED_RETENTION_SECONDS: '0' })
    const tenant = await createTenant(disk.app)
    const contents = [fileBytes('image/png', 5000, 21), fileBytes('application/pdf', 9 * MiB, 22), fileBytes('image/png', 700, 23)]
    const ids: string[] = []
    for (const [i, bytes] of contents.entries()) {
      const r = await upload(disk.app, tenant.headers, { bytes, type: i === 1 ? 'application/pdf' : 'image/png', name: i === 1 ? 'b.pdf' : 'a.png' })
      ids.push(r.fileId)
    }
    const prefix = testStoreEnv('s3').COFFER_BLOB_S3_PREFIX!
    const cli = async (args: string[]) => {
      const out: string[] = []
      const err: string[] = []
      const sink = (arr: string[]) => ({ write: (s: string) => (arr.push(s), true) }) as unknown as NodeJS.WritableStream
      const code = await migrateBlobsCommand(args, {
        env: { ...env, COFFER_BLOB_S3_PREFIX: prefix, COFFER_DATA_DIR: disk.dir, ...databaseEnvOf(disk.dir) },
        stdout: sink(out),
        stderr: sink(err),
      })
      return { code, out: out.join(''), err: err.join('') }
    }
    let r = await cli(['--to', 's3', '--json'])
    t.equal(r.code, 0, r.err)
    t.match(JSON.parse(r.out), { to: 's3', checked: 3, copied: 3, present: 0, missing: [], corrupt: [] })
    // The server kept running on disk: a new upload arrives; the next run copies only that one.
    const late = fileBytes('image/png', 1234, 24)
    ids.push((await upload(disk.app, tenant.headers, { bytes: late })).fileId)
    contents.push(late)
    r = await cli(['--to', 's3', '--json'])
    t.match(JSON.parse(r.out), { checked: 4, copied: 1, present: 3 })
    // Served from S3 now, same data dir.
    await disk.app.close()
    const onS3 = await makeApp(t, { ...testStoreEnv('s3'), COFFER_BLOB_S3_PREFIX: prefix }, { dir: disk.dir })
    for (const [i, id] of ids.entries()) {
      const res = await onS3.app.inject({ url: `/api/v1/files/${id}/download`, headers: tenant.headers })
      t.equal(sha(res.rawPayload), sha(contents[i]!), `file ${i} comes from the bucket`)
    }
    const verify = await onS3.core.gc.verify(true)
    t.match(verify, { checked: 4, missing: [], corrupt: [], orphans: [] })
    // Back to disk, after the disk copy of one blob was lost and another damaged: copied back verified.
    // The small ones are kept inline in the database (blob_inline), the 9 MiB one is a file.
    const inline = (bytes: Buffer) => onS3.core.db.pluck('SELECT content FROM blob_inline WHERE sha256 = ?').get(sha(bytes)) as Buffer | undefined
    t.ok(inline(contents[0]!)?.equals(contents[0]!), 'migrated to disk, small content is inline')
    t.ok(fs.existsSync(blobPathOf(disk.dir, sha(contents[1]!))), 'and large content a file')
    onS3.core.db.prepare('DELETE FROM blob_inline WHERE sha256 = ?').run(sha(contents[0]!))
    onS3.core.db.prepare('UPDATE blob_inline SET content = ? WHERE sha256 = ?').run(Buffer.alloc(700, 7), sha(contents[2]!))
    r = await cli(['--to', 'disk'])
    t.equal(r.code, 0, r.err)
    t.match(r.out, /4 blob\(s\) checked, 1 copied \(5000 bytes\), 3 already there/)
    t.ok(inline(contents[0]!)?.equals(contents[0]!))
    t.ok(inline(contents[2]!)?.equals(Buffer.alloc(700, 7)), 'same size in the target is taken as there (coffer verify re-hashes)')
    // A source object that does not hash to its name is refused, never written.
    await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: `${prefix}sha256/${sha(late).slice(0, 2)}/${sha(late).slice(2, 4)}/${sha(late)}`,
        Body: Buffer.alloc(late.length, 1),
      }),
    )
    onS3.core.db.prepare('DELETE FROM blob_inline WHERE sha256 = ?').run(sha(late))
    r = await cli(['--to', 'disk'])
    t.equal(r.code, 1)
    t.match(r.err, new RegExp(`blob ${sha(late)} in s3 .* does not hash to its name; not copied`))
    t.equal(inline(late), undefined)
    t.notOk(fs.existsSync(blobPathOf(disk.dir, sha(late))))
  })

  t.test('COFFER_BLOB_S3_REDIRECT_DOWNLOADS: signed-URL downloads redirect to a short-lived presigned URL of the store', async (t) => {
    const { app } = await s3App(t, { COFFER_BLOB_S3_REDIRECT_DOWNLOADS: 'true' })
    const tenant = await createTenant(app)
    const bytes = fileBytes('application/pdf', 70_000, 9)
    const r = await upload(app, tenant.headers, { type: 'application/pdf', name: 'report é.pdf', bytes })
    const signed = (await app.inject({ url: `/api/v1/files/${r.fileId}/signed-url?expiresIn=3600`, headers: tenant.headers })).json()
    const res = await app.inject({ url: new URL(signed.url).pathname + new URL(signed.url).search })
    t.equal(res.statusCode, 302)
    const location = new URL(res.headers.location as string)
    t.equal(location.origin, env.COFFER_BLOB_S3_ENDPOINT)
    t.equal(location.searchParams.get('X-Amz-Expires'), '300', 'at most five minutes, whatever the signed URL allows')
    const direct = await fetch(location)
    t.equal(direct.status, 200)
    t.equal(direct.headers.get('content-type'), 'application/pdf')
    const viaCoffer = await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
    t.equal(direct.headers.get('content-disposition'), viaCoffer.headers['content-disposition'], 'the same Content-Disposition Coffer sends')
    t.match(direct.headers.get('content-disposition') ?? '', /^attachment; filename="report _\.pdf"; filename\*=UTF-8''report%20%C3%A9\.pdf$/)
    t.ok(Buffer.from(await direct.arrayBuffer()).equals(bytes))
    // Bearer downloads still stream through Coffer.
    const bearer = await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
    t.equal(bearer.statusCode, 200)
    t.ok(bearer.rawPayload.equals(bytes))
  })
}

const blobPathOf = (dataDir: string, hex: string) => `${dataDir}/blobs/sha256/${hex.slice(0, 2)}/${hex.slice(2, 4)}/${hex}`

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })
}
