// @suites: pg s3
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import os from 'node:os'
import { execFileSync } from 'node:child_process'
import { Transform } from 'node:stream'
import { createTenant, diskOnly, fileBytes, handshake, makeApp, putContent, storedBlobs, tempDir, TEST_DATABASE, upload } from './helper'
import type { BlobStore } from '../src/blobs/blob-store'
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { makeS3 } from './s3-helper'
import { backupDataDir } from '../src/services/backup'

const MiB = 1024 * 1024
const listFiles = (dir: string) =>
  fs.existsSync(dir)
    ? fs
        .readdirSync(dir, { recursive: true })
        .map(String)
        .filter((p) => fs.statSync(path.join(dir, p)).isFile())
    : []

/** Mounts a small tmpfs, or throws when this machine does not allow it (not root, no CAP_SYS_ADMIN). */
function mountTmpfs(t: Test, sizeMiB: number): string {
  const dir = tempDir(t, 'coffer-full-')
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m`, 'tmpfs', dir], { stdio: 'ignore' })
  t.teardown(() => {
    try {
      execFileSync('umount', ['-l', dir], { stdio: 'ignore' })
    } catch {
      // already unmounted
    }
  })
  return dir
}

/** Fills what is left of the file system at `dir` with a file of its own: not one byte stays free. */
function fillUp(dir: string): number {
  const fd = fs.openSync(path.join(dir, 'filler'), 'w')
  let written = 0
  try {
    for (const size of [MiB, 64 * 1024, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 1)
      for (;;) {
        try {
          written += fs.writeSync(fd, chunk)
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err
          break
        }
      }
    }
  } finally {
    fs.closeSync(fd)
  }
  return written
}

const RESERVE = 512 * 1024
/**
 * On PostgreSQL the metadata, small content inline in it, is on the database server, not on the
 * full disk (#30): a small upload has room, and a delete needs none here, so the reserve, which
 * keeps room for SQLite's writes, is never released.
 */
const ON_PG = TEST_DATABASE === 'postgres'
const reserveSize = (file: string) => (fs.existsSync(file) ? fs.statSync(file).size : 0)
const released = (logs: Record<string, unknown>[]) => logs.filter((l) => String(l.msg).startsWith('the disk is full: released the disk reserve')).length

const canMount = (() => {
  const probe = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-probe-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe], { stdio: 'ignore' })
    execFileSync('umount', [probe], { stdio: 'ignore' })
    return true
  } catch {
    return false
  } finally {
    fs.rmSync(probe, { recursive: true, force: true })
  }
})()

t.test(
  'a really full filesystem: 507, nothing partial, other requests work, uploads resume once space is freed',
  {
    skip:
      diskOnly('a full remote store is the store-unavailable tests of s3-store.test.ts') ||
      (canMount ? false : 'cannot mount a tmpfs here; the fault-injection test below covers the same paths'),
  },
  async (t) => {
    const mount = mountTmpfs(t, 8)
    const { app, core, clock, logs } = await makeApp(t, { COFFER_DELETED_RETENTION_SECONDS: '0', COFFER_DISK_RESERVE_BYTES: String(RESERVE) }, { dir: mount })
    t.equal(reserveSize(core.dataDir.reserve), RESERVE, 'the disk reserve is written at start')
    const tenant = await createTenant(app)
    const stored: string[] = []
    let full: Awaited<ReturnType<typeof upload>> | undefined
    for (let i = 0; i < 20 && !full; i++) {
      const r = await upload(app, tenant.headers, { type: 'application/pdf', bytes: fileBytes('application/pdf', MiB, i) })
      if (r.put.statusCode === 200) stored.push(r.fileId)
      else full = r
    }
    t.ok(full, `the disk filled up after ${stored.length} MiB`)
    t.equal(full!.put.statusCode, 507)
    t.same(full!.put.json().error.code, 'INSUFFICIENT_STORAGE')
    t.same(listFiles(core.dataDir.tmp), [], 'no partial temp file')
    t.equal(listFiles(core.dataDir.blobs).length, stored.length, 'only complete blobs')
    const status = (await app.inject({ url: `/api/v1/files/${full!.fileId}`, headers: tenant.headers })).json()
    t.match(status, { processingStatus: 'failed', sizeBytes: 0 }, 'the failed upload is recorded and released')
    // Everything else keeps working.
    const list = await app.inject({ url: '/api/v1/files?limit=100', headers: tenant.headers })
    t.equal(list.statusCode, 200)
    t.equal(list.json().total, stored.length + 1)
    const dl = await app.inject({ url: `/api/v1/files/${stored[0]}/download`, headers: tenant.headers })
    t.equal(dl.statusCode, 200)
    t.ok(dl.rawPayload.equals(fileBytes('application/pdf', MiB, 0)))
    t.equal((await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json().usedBytes, stored.length * MiB)
    // Whatever the fill left free (it depends on how big coffer.db is), take it all: what follows
    // must hold on a disk with not one byte left but the reserve.
    t.ok(fillUp(mount) >= 0)
    t.equal(fs.statfsSync(mount).bavail, 0, 'the file system is completely full')
    // Uploads never take the reserve: a large one, and a small one (inline: only database writes).
    for (const bytes of [fileBytes('application/pdf', 200 * 1024, 50), fileBytes('image/png', 2000, 51)]) {
      const type = bytes.length > 4096 ? 'application/pdf' : 'image/png'
      const hs = await handshake(app, tenant.headers, { fileType: type, fileName: 'late.bin', fileSizeBytes: bytes.length })
      const status = hs.statusCode === 200 ? (await putContent(app, hs, bytes, type)).statusCode : hs.statusCode
      if (ON_PG && bytes.length === 2000) t.equal(status, 200, 'a 2000-byte upload is a row in PostgreSQL, which has room')
      else t.equal(status, 507, `a ${bytes.length}-byte upload on a full disk answers 507`)
      t.equal(reserveSize(core.dataDir.reserve), RESERVE, 'and leaves the reserve in place')
    }
    t.equal(released(logs), 0)
    // Free space: delete two files (the first one releases the reserve) and collect them.
    for (const id of stored.slice(0, 2)) t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/files/${id}`, headers: tenant.headers })).statusCode, 200)
    if (ON_PG) {
      t.equal(released(logs), 0, 'the deletes wrote nothing to this disk: the reserve stays')
      t.equal(reserveSize(core.dataDir.reserve), RESERVE)
    } else {
      t.equal(released(logs), 1, 'the reserve was released once, with a warning')
      t.equal(reserveSize(core.dataDir.reserve), 0)
    }
    clock.advance(1)
    t.equal((await core.gc.collect()).blobsRemoved, 2)
    t.equal(reserveSize(core.dataDir.reserve), RESERVE, 'the collection that freed space wrote the reserve again')
    const again = await upload(app, tenant.headers, { type: 'application/pdf', bytes: fileBytes('application/pdf', MiB, 99) })
    t.equal(again.put.statusCode, 200, 'uploads succeed again once space is freed')
    const back = await app.inject({ url: `/api/v1/files/${again.fileId}/download`, headers: tenant.headers })
    t.ok(back.rawPayload.equals(fileBytes('application/pdf', MiB, 99)))
    await core.webhooks.stop()
    await app.close()
    core.close()
  },
)

t.test(
  'S3 on a really full filesystem: PutObject 507 keeps the reserve; DeleteObject, DeleteObjects and AbortMultipartUpload free space',
  {
    skip:
      diskOnly('the reserve keeps room for the database, which is on the local disk; this test fills a disk store') ||
      (canMount ? false : 'cannot mount a tmpfs here'),
  },
  async (t) => {
    const mount = mountTmpfs(t, 8)
    const { core, clock, logs, endpoint, credentials, config } = await makeS3(
      t,
      { COFFER_DELETED_RETENTION_SECONDS: '0', COFFER_DISK_RESERVE_BYTES: String(RESERVE) },
      { dir: mount, store: 'disk' },
    )
    // One attempt per request: a 507 is the answer under test, not something to retry.
    const s3 = new S3Client({ endpoint, region: config.s3Region, forcePathStyle: true, credentials, maxAttempts: 1 })
    t.teardown(() => s3.destroy())
    await s3.send(new CreateBucketCommand({ Bucket: 'full' }))
    for (const k of ['a', 'b', 'c']) await s3.send(new PutObjectCommand({ Bucket: 'full', Key: k, Body: fileBytes('application/pdf', MiB, k.charCodeAt(0)) }))
    const mpu = await s3.send(new CreateMultipartUploadCommand({ Bucket: 'full', Key: 'm' }))
    await s3.send(new UploadPartCommand({ Bucket: 'full', Key: 'm', UploadId: mpu.UploadId, PartNumber: 1, Body: fileBytes('application/pdf', MiB, 7) }))
    fillUp(mount)
    t.equal(fs.statfsSync(mount).bavail, 0, 'the file system is completely full')
    for (const size of [200 * 1024, 2000]) {
      const err = await s3
        .send(new PutObjectCommand({ Bucket: 'full', Key: `late-${size}`, Body: fileBytes('application/pdf', size, 9) }))
        .catch((e: unknown) => e)
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode
      // A small object's content goes in the database: SQLITE_FULL from its commit is a 507 too;
      // PostgreSQL's database is elsewhere, with room.
      if (ON_PG && size === 2000) t.equal(status, 200, 'a 2000-byte PutObject is a row in PostgreSQL, which has room')
      else t.equal(status, 507, `a ${size}-byte PutObject on a full disk is 507 InsufficientStorage`)
      t.equal(reserveSize(core.dataDir.reserve), RESERVE, 'and leaves the reserve in place')
    }
    t.equal(released(logs), 0)
    await s3.send(new DeleteObjectCommand({ Bucket: 'full', Key: 'a' }))
    if (ON_PG) t.equal(released(logs), 0, 'DeleteObject wrote nothing to this disk: the reserve stays')
    else t.equal(released(logs), 1, 'DeleteObject released the reserve, with a warning')
    const many = await s3.send(new DeleteObjectsCommand({ Bucket: 'full', Delete: { Objects: [{ Key: 'b' }] } }))
    t.same(
      many.Deleted?.map((d) => d.Key),
      ['b'],
    )
    t.same(many.Errors ?? [], [])
    await s3.send(new AbortMultipartUploadCommand({ Bucket: 'full', Key: 'm', UploadId: mpu.UploadId }))
    clock.advance(1)
    const gc = await core.gc.collect()
    t.equal(gc.blobsRemoved, 2, "the two deleted objects' content (the aborted part went with the abort)")
    t.equal(listFiles(core.dataDir.blobs).length, 1, 'only c is left')
    t.equal(reserveSize(core.dataDir.reserve), RESERVE, 'the reserve is back')
    await s3.send(new PutObjectCommand({ Bucket: 'full', Key: 'again', Body: fileBytes('application/pdf', MiB, 99) }))
    const back = await s3.send(new GetObjectCommand({ Bucket: 'full', Key: 'again' }))
    t.ok(Buffer.from(await back.Body!.transformToByteArray()).equals(fileBytes('application/pdf', MiB, 99)), 'writes work again')
  },
)

t.test('the disk reserve is no content: verify and gc ignore it, backup leaves it out, 0 removes it', async (t) => {
  const { app, core, dir } = await makeApp(t, { COFFER_DISK_RESERVE_BYTES: String(RESERVE) })
  t.equal(reserveSize(core.dataDir.reserve), RESERVE)
  t.equal(fs.statSync(core.dataDir.reserve).blocks * 512 >= RESERVE, true, 'real blocks, not a sparse file')
  const tenant = await createTenant(app)
  t.equal((await upload(app, tenant.headers, { type: 'application/pdf', bytes: fileBytes('application/pdf', 100_000) })).put.statusCode, 200)
  const report = await core.gc.verify()
  t.same([report.orphans, report.missing, report.corrupt], [[], [], []])
  t.equal((await core.gc.removeOrphans()) + (await core.gc.collect(true)).blobsRemoved, 0)
  t.equal(reserveSize(core.dataDir.reserve), RESERVE)
  const dest = path.join(tempDir(t, 'coffer-backup-'), 'b')
  if (ON_PG) {
    await t.rejects(backupDataDir(core, dest), /pg_dump/, 'coffer backup copies no data dir whose metadata is in PostgreSQL')
  } else {
    await backupDataDir(core, dest)
    t.ok(fs.existsSync(path.join(dest, 'coffer.db')))
    t.notOk(fs.existsSync(path.join(dest, 'reserve')), 'the backup has no reserve')
  }
  // A restart with the reserve turned off gives its space back.
  const off = await makeApp(t, { COFFER_DISK_RESERVE_BYTES: '0' }, { dir })
  t.equal(off.core.reserve.state(), 'off')
  t.notOk(fs.existsSync(core.dataDir.reserve))
})

t.test("ENOSPC injected at the blob store's write: 507, nothing partial, recovery", async (t) => {
  let diskFull = false
  const failingWrites = (disk: BlobStore): BlobStore =>
    Object.assign(Object.create(disk) as BlobStore, {
      stage: (source: Parameters<BlobStore['stage']>[0], guard: Parameters<BlobStore['stage']>[1]) => {
        if (!diskFull) return disk.stage(source, guard)
        let seen = 0
        const fuse = new Transform({
          transform(chunk: Buffer, _enc, cb) {
            seen += chunk.length
            if (seen > 300) return cb(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }))
            cb(null, chunk)
          },
        })
        source.on('error', (e) => fuse.destroy(e))
        return disk.stage(source.pipe(fuse), guard)
      },
    })
  const { app, core } = await makeApp(t, {}, { store: failingWrites })
  const tenant = await createTenant(app)
  const before = await upload(app, tenant.headers)
  t.equal(before.put.statusCode, 200)
  diskFull = true
  const failed = await upload(app, tenant.headers, { bytes: fileBytes('image/png', 5000) })
  t.equal(failed.put.statusCode, 507)
  t.same(failed.put.json().error, { code: 'INSUFFICIENT_STORAGE', message: 'The server is out of storage space; nothing was stored', details: {} })
  t.same(listFiles(core.dataDir.tmp), [], 'no partial temp file')
  t.equal((await storedBlobs(core)).length, 1)
  t.equal((await app.inject({ url: '/api/v1/tenant/quota', headers: tenant.headers })).json().usedBytes, 1024, 'the reservation was released')
  t.equal((await app.inject({ url: `/api/v1/files/${before.fileId}/download`, headers: tenant.headers })).statusCode, 200, 'reads keep working')
  diskFull = false
  t.equal((await upload(app, tenant.headers, { bytes: fileBytes('image/png', 5000, 2) })).put.statusCode, 200, 'and writes resume')
})

t.test("a failing read at the blob store's open: 500 without detail, logged, and the next read works", async (t) => {
  let failReads = false
  const failingReads = (disk: BlobStore): BlobStore =>
    Object.assign(Object.create(disk) as BlobStore, {
      open: (sha256: string, range?: Parameters<BlobStore['open']>[1]) =>
        failReads ? Promise.reject(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' })) : disk.open(sha256, range),
    })
  const { app, logs } = await makeApp(t, {}, { store: failingReads })
  const tenant = await createTenant(app)
  const bytes = fileBytes('image/png', 3000)
  const r = await upload(app, tenant.headers, { bytes })
  failReads = true
  const failed = await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
  t.equal(failed.statusCode, 500)
  t.same(failed.json().error, { code: 'INTERNAL_ERROR', message: 'Internal server error', details: { requestId: failed.headers['x-request-id'] } })
  t.ok(
    logs.some((l) => l.msg === 'request failed' && l.level === 50),
    'the read error is logged',
  )
  failReads = false
  const ok = await app.inject({ url: `/api/v1/files/${r.fileId}/download`, headers: tenant.headers })
  t.equal(ok.statusCode, 200)
  t.ok(ok.rawPayload.equals(bytes))
})
