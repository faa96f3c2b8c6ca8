// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3'
import { buildBundle, runCoffer, startCoffer } from './process-helper'
import { fileBytes, tempDir } from './helper'

// `coffer serve --ephemeral --in-memory` (#28): everything in RAM, nothing written to disk, and a
// clear 507 past COFFER_IN_MEMORY_MAX_BYTES instead of the OOM killer.

buildBundle()

const READY = /^\{"url":"(http:\/\/[^"]+)"/
const MiB = 1024 * 1024

interface Announcement {
  url: string
  tenant: { id: string; apiKey: string }
  s3: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string }
}

/** Every file and directory under `dir`, relative. */
function tree(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).sort()
}

t.test('--in-memory: the data dir is on the tmpfs, TMPDIR stays empty, writes past the limit are 507 on both fronts and keep nothing', async (t) => {
  const tmp = tempDir(t)
  const tmpdir = path.join(tmp, 'tmpdir')
  fs.mkdirSync(tmpdir)
  const server = await startCoffer(['serve', '--ephemeral', '--in-memory', '--in-memory-max-bytes', String(4 * MiB), '--port', '0'], {
    cwd: tmp,
    // No data dir anywhere in the configuration: TMPDIR is where an ephemeral instance would write.
    env: { TMPDIR: tmpdir, COFFER_DATA_DIR: '', COFFER_S3_PORT: '' },
    ready: READY,
  })
  t.teardown(() => server.child.kill('SIGKILL'))
  const info = JSON.parse(server.stdout[0]!) as Announcement
  const starting = server.lines.find((l) => l.includes('"coffer starting"'))!
  const dataDir = (JSON.parse(starting) as { dataDir: string }).dataDir
  t.match(dataDir, /^\/dev\/shm\/coffer-ephemeral-/, 'the data dir is on the tmpfs')
  t.match(server.lines.join('\n'), /"maxBytes":4194304,"msg":"in memory/, 'the limit is logged')

  const s3 = new S3Client({ endpoint: info.s3.endpoint, region: info.s3.region, forcePathStyle: true, credentials: info.s3, maxAttempts: 1 })
  t.teardown(() => s3.destroy())
  await s3.send(new CreateBucketCommand({ Bucket: 'fixtures' }))
  const small = fileBytes('application/pdf', MiB, 2)
  await s3.send(new PutObjectCommand({ Bucket: 'fixtures', Key: 'small.bin', Body: small }))
  const got = await s3.send(new GetObjectCommand({ Bucket: 'fixtures', Key: 'small.bin' }))
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(small), 'what fits is stored and read back')

  // Announced length past the limit: refused before the body is read.
  const err = await s3
    .send(new PutObjectCommand({ Bucket: 'fixtures', Key: 'big.bin', Body: fileBytes('application/pdf', 4 * MiB, 3) }))
    .catch((e: unknown) => e)
  t.ok(err instanceof S3ServiceException, `PutObject past the limit fails: ${String(err)}`)
  const s3err = err as S3ServiceException
  t.equal(s3err.$metadata.httpStatusCode, 507)
  t.equal(s3err.name, 'InsufficientStorage')
  t.match(s3err.message, /In-memory mode holds at most 4194304 bytes \(COFFER_IN_MEMORY_MAX_BYTES/)
  await t.rejects(s3.send(new HeadObjectCommand({ Bucket: 'fixtures', Key: 'big.bin' })), { name: 'NotFound' }, 'nothing of it is kept')

  // The API, a body of unknown length (chunked): refused as it streams past the limit.
  const auth = { authorization: `Bearer ${info.tenant.apiKey}` }
  const hs = await fetch(`${info.url}/api/v1/upload/request`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ fileType: 'application/pdf', fileName: 'big.pdf' }),
  })
  t.equal(hs.status, 200)
  const { fileId, presignedUrl } = (await hs.json()) as { fileId: string; presignedUrl: string }
  const big = fileBytes('application/pdf', 4 * MiB, 4)
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < big.length; i += 256 * 1024) c.enqueue(big.subarray(i, i + 256 * 1024))
      c.close()
    },
  })
  const put = await fetch(`${info.url}${presignedUrl}`, {
    method: 'PUT',
    headers: { ...auth, 'content-type': 'application/pdf' },
    body,
    duplex: 'half',
  } as RequestInit)
  t.equal(put.status, 507)
  const envelope = (await put.json()) as { error: { code: string; message: string; details: object } }
  t.equal(envelope.error.code, 'INSUFFICIENT_STORAGE')
  t.match(envelope.error.message, /In-memory mode holds at most 4194304 bytes/)
  t.same(envelope.error.details, {})
  const file = (await (await fetch(`${info.url}/api/v1/files/${fileId}`, { headers: auth })).json()) as { processingStatus: string; sizeBytes: number }
  t.match(file, { processingStatus: 'failed', sizeBytes: 0 }, 'the refused upload is failed, its bytes released')

  // Still serving: a write that fits after the refusals.
  await s3.send(new PutObjectCommand({ Bucket: 'fixtures', Key: 'again.bin', Body: fileBytes('application/pdf', MiB, 5) }))
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'fixtures' }))
  t.same(
    listed.Contents?.map((o) => o.Key),
    ['again.bin', 'small.bin'],
  )
  // Every byte is in the tmpfs data dir: TMPDIR saw no file at all.
  t.ok(fs.readdirSync(path.join(dataDir, 'blobs'), { recursive: true }).length > 0, 'content is in the tmpfs data dir')
  t.same(tree(tmpdir), [], 'no file written under TMPDIR')

  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  t.notOk(fs.existsSync(dataDir), 'the tmpfs data dir is removed on exit')
  t.same(tree(tmpdir), [])
})

t.test('--in-memory: refused without --ephemeral, and on a directory that is not a tmpfs', async (t) => {
  const tmp = tempDir(t)
  const r1 = runCoffer(['serve', '--in-memory', '--data-dir', path.join(tmp, 'd')], { cwd: tmp, env: { TMPDIR: tmp } })
  t.equal(r1.status, 2)
  t.match(r1.stderr, /--in-memory goes with --ephemeral/)
  const r2 = runCoffer(['serve', '--ephemeral', '--in-memory-max-bytes', '5000000'], { cwd: tmp, env: { TMPDIR: tmp } })
  t.equal(r2.status, 2)
  t.match(r2.stderr, /--in-memory-max-bytes goes with --in-memory/)
  const disk = path.join(tmp, 'on-disk')
  fs.mkdirSync(disk)
  const r3 = runCoffer(['serve', '--ephemeral', '--in-memory', '--port', '0'], { cwd: tmp, env: { TMPDIR: tmp, COFFER_IN_MEMORY_DIR: disk } })
  t.equal(r3.status, 2)
  t.match(r3.stderr, new RegExp(`${disk.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is not a tmpfs`))
  t.same(fs.readdirSync(disk), [], 'nothing made there')
  const r4 = runCoffer(['serve', '--ephemeral', '--in-memory', '--in-memory-max-bytes', '1000'], { cwd: tmp, env: { TMPDIR: tmp } })
  t.equal(r4.status, 2)
  t.match(r4.stderr, /--in-memory-max-bytes="1000" must be an integer of at least 1048576/)
})
