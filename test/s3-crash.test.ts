// @suites: pg s3
// S3 writes while the server is killed with SIGKILL at random moments, restarting on the same data
// dir: every acknowledged PutObject and CompleteMultipartUpload survives byte for byte, parts
// acknowledged before the kill can still complete their upload, and usage stays exact.
import { createHash } from 'node:crypto'
import t from 'tap'
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { buildBundle } from './process-helper'
import { TEST_BLOB_STORE } from './helper'
import { pattern } from './s3-helper'
import { crashServer, killLoop, missingBlobs, rand } from './s3-crash-harness'

// Longer than the suite's default per-file timeout: real clients and processes, bounded per step.
t.setTimeout(300000)

buildBundle()

const KILLS = Number(process.env.COFFER_S3_CRASH_KILLS ?? 6)
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex')

// COFFER_TEST_BLOB_STORE=s3 runs the same crashes with the content on the Ceph gateway (one key
// prefix for the whole test): a kill between lease, place and commit must not lose an object either.
t.test(`S3 writes under SIGKILL (${KILLS} kills, ${TEST_BLOB_STORE} blob store): nothing acknowledged is lost`, async (t) => {
  const crash = await crashServer(t, 's3crash')
  await crash.client().send(new CreateBucketCommand({ Bucket: 'crash' }))

  const acked = new Map<string, string>() // key → sha256 of the acknowledged content
  const deleteTried = new Set<string>()
  const stats = { puts: 0, multipart: 0, deletes: 0 }
  let n = 0

  async function work(c: S3Client, stop: { now: boolean }): Promise<void> {
    while (!stop.now) {
      const roll = Math.random()
      const key = `k/${n++}-${rand(1e9)}`
      try {
        if (roll < 0.65) {
          const body = pattern(1 + rand(Math.random() < 0.1 ? 3_000_000 : 100_000), rand(1e9))
          await c.send(new PutObjectCommand({ Bucket: 'crash', Key: key, Body: body }))
          acked.set(key, sha(body))
          stats.puts++
        } else if (roll < 0.8) {
          const p1 = pattern(5 * 1024 * 1024, rand(1e9))
          const p2 = pattern(1 + rand(50_000), rand(1e9))
          const { UploadId } = await c.send(new CreateMultipartUploadCommand({ Bucket: 'crash', Key: key }))
          const e1 = await c.send(new UploadPartCommand({ Bucket: 'crash', Key: key, UploadId, PartNumber: 1, Body: p1 }))
          const e2 = await c.send(new UploadPartCommand({ Bucket: 'crash', Key: key, UploadId, PartNumber: 2, Body: p2 }))
          await c.send(
            new CompleteMultipartUploadCommand({
              Bucket: 'crash',
              Key: key,
              UploadId,
              MultipartUpload: {
                Parts: [
                  { PartNumber: 1, ETag: e1.ETag },
                  { PartNumber: 2, ETag: e2.ETag },
                ],
              },
            }),
          )
          acked.set(key, sha(Buffer.concat([p1, p2])))
          stats.multipart++
        } else if (acked.size > 0) {
          const victim = [...acked.keys()][rand(acked.size)]!
          if (deleteTried.has(victim)) continue
          deleteTried.add(victim)
          await c.send(new DeleteObjectCommand({ Bucket: 'crash', Key: victim }))
          stats.deletes++
        }
      } catch {
        // The process died under this request (or refused it while dying): its outcome is unknown.
      }
    }
  }

  await killLoop(crash, KILLS, work, async (kill, c) => {
    // Every acknowledged object that no delete was sent for reads back byte for byte.
    for (const [key, expected] of acked) {
      if (deleteTried.has(key)) continue
      const got = await c.send(new GetObjectCommand({ Bucket: 'crash', Key: key }))
      const bytes = await got.Body!.transformToByteArray()
      if (sha(bytes) !== expected) t.fail(`after kill ${kill}: ${key} changed`)
    }
    // Usage is exactly the live files plus the parts of uploads in progress.
    crash.inspect((db) => {
      const live = `f.deleted_at IS NULL AND f.status != 'failed'`
      const row = db
        .prepare(
          `SELECT t.used_bytes AS used,
             (SELECT coalesce(sum(size_bytes), 0) FROM files f WHERE f.tenant_id = t.id AND ${live})
             + (SELECT coalesce(sum(p.size_bytes), 0) FROM s3_parts p JOIN s3_uploads u ON u.id = p.upload_id WHERE u.tenant_id = t.id) AS actual
           FROM tenants t WHERE t.id = ?`,
        )
        .get(crash.tenantId) as { used: number; actual: number }
      // Number(): PostgreSQL's sum of bigints is a numeric, which comes as a string.
      t.equal(Number(row.used), Number(row.actual), `after kill ${kill}: tenant usage is exact`)
      const orphanParts = db.pluck('SELECT count(*) FROM s3_parts WHERE sha256 NOT IN (SELECT sha256 FROM blobs)').get()
      t.equal(orphanParts, 0, 'every part has its blob row')
    })
    // Every blob a file or a part references is in the store with its size (on disk or in the bucket).
    t.same(await missingBlobs(crash), [], `after kill ${kill}: no referenced blob is missing or short`)
  })
  t.ok(stats.puts + stats.multipart > 5, `work was done: ${JSON.stringify(stats)}`)
  t.ok(acked.size > 0)
})
