// @suites: pg s3
// Multipart uploads under concurrency and retries (#24): concurrent Completes of one upload assemble
// it once and all answer 200; a Complete retried after it succeeded answers 200 with the same ETag;
// of two concurrent UploadParts of one part number, the one answered last is the part. Real
// sockets (the AWS SDK), on the run's blob store (COFFER_TEST_BLOB_STORE).
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash } from 'node:crypto'
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import type { BlobStore, StagedBlob } from '../src/blobs/blob-store'
import { storedBlobs } from './helper'
import { completeCommand, makeS3, pattern, type S3Context } from './s3-helper'

t.setTimeout(180_000)

const MiB = 1024 * 1024
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex')
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex')
const multipartEtag = (parts: Buffer[]) =>
  `"${createHash('md5')
    .update(Buffer.concat(parts.map((p) => Buffer.from(md5(p), 'hex'))))
    .digest('hex')}-${parts.length}"`

/** The SDK without retries: every request is sent once, so each answer is the server's own. */
const onceClient = (ctx: S3Context) =>
  new S3Client({ endpoint: ctx.endpoint, region: ctx.config.s3Region, forcePathStyle: true, credentials: ctx.credentials, maxAttempts: 1 })

const usedBytes = (ctx: S3Context) => ctx.core.db.pluck('SELECT used_bytes FROM tenants WHERE id = ?').get(ctx.tenant.id) as number

/** Bytes staged (not yet placed or discarded) right now and at most, and in all, through the store's `stage`. */
function stagingMeter() {
  const seen = { now: 0, max: 0, total: 0 }
  const wrap = (inner: BlobStore): BlobStore =>
    Object.assign(Object.create(inner) as BlobStore, {
      stage: async (source: Parameters<BlobStore['stage']>[0], guard: Parameters<BlobStore['stage']>[1]) => {
        let mine = 0
        try {
          return await inner.stage(source, {
            ...guard,
            onChunk: (bytes: number) => {
              guard.onChunk?.(bytes)
              mine += bytes
              seen.now += bytes
              seen.total += bytes
              seen.max = Math.max(seen.max, seen.now)
            },
          })
        } finally {
          seen.now -= mine
        }
      },
    })
  return { seen, wrap }
}

/** The bytes of the files in `dir` now (a data dir's tmp/). */
function dirBytes(dir: string): number {
  let n = 0
  for (const f of fs.readdirSync(dir)) {
    try {
      n += fs.statSync(path.join(dir, f)).size
    } catch {
      // gone between the listing and the stat
    }
  }
  return n
}

async function uploadParts(client: S3Client, bucket: string, key: string, parts: Buffer[]) {
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }))
  const etags: [number, string][] = []
  for (const [i, body] of parts.entries()) {
    const r = await client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body: body }))
    etags.push([i + 1, r.ETag!])
  }
  return { uploadId: UploadId!, etags }
}

t.test('40 concurrent Completes of one upload: one assembles, all answer 200 with its ETag, quota exact', async (t) => {
  const meter = stagingMeter()
  // The quota is the object's size: the parts fill it, and nothing may stage past it.
  const ctx = await makeS3(t, {}, { quotaBytes: 20 * MiB, wrapStore: meter.wrap })
  const client = onceClient(ctx)
  t.teardown(() => client.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'many' }))
  const parts = [1, 2, 3, 4].map((seed) => pattern(5 * MiB, seed))
  const { uploadId, etags } = await uploadParts(client, 'many', 'big', parts)
  t.equal(usedBytes(ctx), 20 * MiB, 'the parts fill the quota')

  const tmp = ctx.core.dataDir.tmp
  const before = { total: meter.seen.total, max: meter.seen.max }
  meter.seen.max = 0
  let tmpMax = 0
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      tmpMax = Math.max(tmpMax, dirBytes(tmp))
      await new Promise((r) => setTimeout(r, 2))
    }
  })()
  const answers = await Promise.allSettled(Array.from({ length: 40 }, () => client.send(completeCommand('many', 'big', uploadId, etags))))
  sampling = false
  await sampler

  const failures = answers.flatMap((a) =>
    a.status === 'rejected'
      ? [`${(a.reason as { name?: string }).name} ${(a.reason as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode}`]
      : [],
  )
  t.same(failures, [], 'every Complete answered 200 (no 5xx, no NoSuchUpload)')
  const expected = multipartEtag(parts)
  t.same(new Set(answers.map((a) => (a.status === 'fulfilled' ? a.value.ETag : undefined))), new Set([expected]), 'all with the same ETag')
  t.equal(meter.seen.total - before.total, 20 * MiB, 'the object was assembled once: 20 MiB staged in all')
  t.ok(meter.seen.max <= 20 * MiB, `at most one object's bytes staged at once (${meter.seen.max})`)
  t.ok(tmpMax <= 20 * MiB, `data/tmp never held more than one object (${tmpMax} bytes at most)`)

  const got = await client.send(new GetObjectCommand({ Bucket: 'many', Key: 'big' }))
  t.equal(sha(await got.Body!.transformToByteArray()), sha(Buffer.concat(parts)), 'the object reads back byte for byte')
  t.equal(got.ETag, expected)
  t.equal(usedBytes(ctx), 20 * MiB, 'usage is exactly the object')
  t.same(await storedBlobs(ctx.core), [sha(Buffer.concat(parts))], "the parts' content is released; only the object's is stored")
  const blobRows = ctx.core.db.pluck('SELECT sha256 FROM blobs').all()
  t.same(blobRows, [sha(Buffer.concat(parts))], 'and so are their rows')
})

t.test('a Complete retried after it succeeded answers 200 with the same ETag, while the object is the one it made', async (t) => {
  const ctx = await makeS3(t)
  const client = onceClient(ctx)
  t.teardown(() => client.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'retry' }))
  const parts = [pattern(5 * MiB, 7), pattern(1000, 8)]
  const expected = multipartEtag(parts)

  const a = await uploadParts(client, 'retry', 'a', parts)
  const first = await client.send(completeCommand('retry', 'a', a.uploadId, a.etags))
  t.equal(first.ETag, expected)
  const again = await client.send(completeCommand('retry', 'a', a.uploadId, a.etags))
  t.equal(again.ETag, expected, 'the retry answers 200 with the same ETag')
  t.equal(again.Key, 'a')
  const rows = ctx.core.db.pluck("SELECT count(*) FROM files WHERE object_key = 'a'").get()
  t.equal(rows, 1, 'and makes no second object')
  const listed = await client.send(new ListMultipartUploadsCommand({ Bucket: 'retry' }))
  t.same(listed.Uploads ?? [], [], 'a completed upload is not listed as in progress')

  const code = async (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (err: { name?: string; $metadata?: { httpStatusCode?: number } }) => `${err.$metadata?.httpStatusCode} ${err.name}`,
    )
  t.equal(await code(client.send(completeCommand('retry', 'a', a.uploadId, [a.etags[0]!]))), '404 NoSuchUpload', 'a retry with another part list: NoSuchUpload')
  t.equal(
    await code(client.send(new UploadPartCommand({ Bucket: 'retry', Key: 'a', UploadId: a.uploadId, PartNumber: 1, Body: 'x' }))),
    '404 NoSuchUpload',
    'no part goes to a completed upload',
  )
  t.equal(await code(client.send(new AbortMultipartUploadCommand({ Bucket: 'retry', Key: 'a', UploadId: a.uploadId }))), '404 NoSuchUpload')
  t.equal(await code(client.send(completeCommand('retry', 'other', a.uploadId, a.etags))), '404 NoSuchUpload', 'nor at another key')
  t.equal(await code(client.send(completeCommand('retry', 'a', a.uploadId, a.etags))), 'ok', 'the aborts and parts refused changed nothing')

  // Overwritten, or deleted: the retry no longer finds its object, as RGW's check does not.
  await client.send(new PutObjectCommand({ Bucket: 'retry', Key: 'a', Body: 'newer' }))
  t.equal(await code(client.send(completeCommand('retry', 'a', a.uploadId, a.etags))), '404 NoSuchUpload', 'after an overwrite: NoSuchUpload')
  const b = await uploadParts(client, 'retry', 'b', parts)
  await client.send(completeCommand('retry', 'b', b.uploadId, b.etags))
  await client.send(new DeleteObjectCommand({ Bucket: 'retry', Key: 'b' }))
  t.equal(await code(client.send(completeCommand('retry', 'b', b.uploadId, b.etags))), '404 NoSuchUpload', 'after a delete: NoSuchUpload')

  // Remembered for the multipart TTL after completion, then forgotten by the periodic reclaim.
  const c = await uploadParts(client, 'retry', 'c', parts)
  await client.send(completeCommand('retry', 'c', c.uploadId, c.etags))
  // A client whose clock moves with the server's (the SDK signs with its own).
  const later = () =>
    new S3Client({
      endpoint: ctx.endpoint,
      region: ctx.config.s3Region,
      forcePathStyle: true,
      credentials: ctx.credentials,
      maxAttempts: 1,
      systemClockOffset: ctx.clock.now() - Date.now(),
    })
  ctx.clock.advance(ctx.config.s3MultipartTtlSeconds * 1000 - 60_000)
  const inTime = later()
  t.equal(await code(inTime.send(completeCommand('retry', 'c', c.uploadId, c.etags))), 'ok', 'still answered a minute before the TTL')
  inTime.destroy()
  ctx.clock.advance(120_000)
  ctx.core.s3.multipart.reclaim()
  t.equal(ctx.core.db.pluck('SELECT count(*) FROM s3_completed_uploads').get(), 0, 'the reclaim forgets completed uploads past the TTL')
  const tooLate = later()
  t.equal(await code(tooLate.send(completeCommand('retry', 'c', c.uploadId, c.etags))), '404 NoSuchUpload', 'past it: NoSuchUpload')
  tooLate.destroy()
})

t.test('two concurrent UploadParts of one part number: the one answered last is the part, the other is released', async (t) => {
  // Holds the discard of one content's staged copy: its UploadPart has committed, not answered.
  let holding: { sha256: string; reached: () => void; go: Promise<void> } | undefined
  const wrap = (inner: BlobStore): BlobStore =>
    Object.assign(Object.create(inner) as BlobStore, {
      discard: async (staged: StagedBlob) => {
        const h = holding
        if (h && h.sha256 === staged.sha256) {
          holding = undefined
          h.reached()
          await h.go
        }
        return inner.discard(staged)
      },
    })
  const ctx = await makeS3(t, {}, { quotaBytes: 12 * MiB, wrapStore: wrap })
  const client = onceClient(ctx)
  t.teardown(() => client.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'parts' }))
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'parts', Key: 'k' }))
  const first = pattern(5 * MiB, 21)
  const second = pattern(5 * MiB, 22)

  let reached!: () => void
  let go!: () => void
  const atDiscard = new Promise<void>((r) => (reached = r))
  holding = { sha256: sha(first), reached, go: new Promise<void>((r) => (go = r)) }
  const order: string[] = []
  const put = (name: string, body: Buffer) =>
    client.send(new UploadPartCommand({ Bucket: 'parts', Key: 'k', UploadId, PartNumber: 1, Body: body })).then((r) => {
      order.push(name)
      return r.ETag!
    })
  const a = put('first', first)
  await atDiscard // the first one is the part, and not answered yet
  const b = put('second', second)
  // The second commits (replacing the first) while the first still has not answered.
  const partSha = ctx.core.db.pluck('SELECT sha256 FROM s3_parts WHERE upload_id = ? AND part_number = 1')
  for (let i = 0; partSha.get(UploadId) !== sha(second); i++) {
    if (i > 1000) throw new Error('the second UploadPart never committed')
    await new Promise((r) => setTimeout(r, 10))
  }
  await new Promise((r) => setTimeout(r, 100))
  go()
  const etags = { first: await a, second: await b }
  t.equal(order.length, 2)
  const last = order.at(-1) as 'first' | 'second'
  t.equal(last, 'second', 'the part committed last is answered last')
  const done = await client.send(completeCommand('parts', 'k', UploadId, [[1, etags[last]]]))
  const lastBody = last === 'first' ? first : second
  t.equal(done.ETag, multipartEtag([lastBody]), 'Complete with the ETag answered last succeeds')
  const got = await client.send(new GetObjectCommand({ Bucket: 'parts', Key: 'k' }))
  t.equal(sha(await got.Body!.transformToByteArray()), sha(lastBody), 'and the object is that part')
  t.equal(usedBytes(ctx), 5 * MiB, 'usage is exactly the object')
  t.same(await storedBlobs(ctx.core), [sha(lastBody)], "the other part's content is released")
})

t.test('an Abort or a part replaced while a Complete reads the parts: a 4xx or a wait, never a 5xx', async (t) => {
  // Holds the stage of the next assembly (a stage expecting `holdAt` bytes) before it reads a part.
  let hold: { bytes: number; reached: () => void; go: Promise<void> } | undefined
  const wrap = (inner: BlobStore): BlobStore =>
    Object.assign(Object.create(inner) as BlobStore, {
      stage: async (source: Parameters<BlobStore['stage']>[0], guard: Parameters<BlobStore['stage']>[1]) => {
        const h = hold
        if (h && guard.expectedBytes === h.bytes) {
          hold = undefined
          h.reached()
          await h.go
        }
        return inner.stage(source, guard)
      },
    })
  const holdAssembly = (bytes: number) => {
    let reached!: () => void
    let go!: () => void
    const at = new Promise<void>((r) => (reached = r))
    hold = { bytes, reached, go: new Promise<void>((r) => (go = r)) }
    return { at, go: () => go() }
  }
  const ctx = await makeS3(t, {}, { wrapStore: wrap })
  const client = onceClient(ctx)
  t.teardown(() => client.destroy())
  const outcome = (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (err: { name?: string; $metadata?: { httpStatusCode?: number } }) => `${err.$metadata?.httpStatusCode} ${err.name}`,
    )
  await client.send(new CreateBucketCommand({ Bucket: 'mid' }))
  const parts = [pattern(5 * MiB, 31), pattern(2000, 32)]
  const total = 5 * MiB + 2000

  // An Abort sent while the Complete assembles waits for it, then finds the upload completed.
  const a = await uploadParts(client, 'mid', 'a', parts)
  let h = holdAssembly(total)
  const completing = outcome(client.send(completeCommand('mid', 'a', a.uploadId, a.etags)))
  await h.at
  const aborting = outcome(client.send(new AbortMultipartUploadCommand({ Bucket: 'mid', Key: 'a', UploadId: a.uploadId })))
  await new Promise((r) => setTimeout(r, 200))
  h.go()
  t.same([await completing, await aborting], ['ok', '404 NoSuchUpload'], 'the Complete succeeds; the Abort after it: NoSuchUpload')
  const got = await client.send(new GetObjectCommand({ Bucket: 'mid', Key: 'a' }))
  t.equal(sha(await got.Body!.transformToByteArray()), sha(Buffer.concat(parts)), 'the object is whole')

  // A declared part replaced before the Complete read it: the list no longer matches, InvalidPart.
  const b = await uploadParts(client, 'mid', 'b', parts)
  h = holdAssembly(total)
  const completingB = outcome(client.send(completeCommand('mid', 'b', b.uploadId, b.etags)))
  await h.at
  await client.send(new UploadPartCommand({ Bucket: 'mid', Key: 'b', UploadId: b.uploadId, PartNumber: 1, Body: pattern(5 * MiB, 33) }))
  h.go()
  t.equal(await completingB, '400 InvalidPart', 'the Complete answers InvalidPart')
  t.equal(ctx.core.db.pluck("SELECT count(*) FROM files WHERE object_key = 'b'").get(), 0, 'and makes no object')
  t.ok(
    ctx.logs.some((l) => l.msg === 'request completed'),
    'the access log is captured',
  )
  t.same(
    ctx.logs.filter((l) => Number(l.statusCode) >= 500 || Number(l.level) >= 50),
    [],
    'nothing answered 5xx or logged an error',
  )
  t.equal(usedBytes(ctx), total + 5 * MiB + 2000, "usage: the object and the open upload's parts")
})
