// S3 writes while the server is killed with SIGKILL at random moments, restarting on the same data
// dir: every acknowledged PutObject and CompleteMultipartUpload survives byte for byte, parts
// acknowledged before the kill can still complete their upload, and usage stays exact.
import { createHash } from 'node:crypto'
import path from 'node:path'
import t from 'tap'
import Database from 'better-sqlite3'
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
import { buildBundle, createTenantOverHttp, startCoffer, type Running } from './process-helper'
import { purgeStoredBlobs, storedSizes, tempDir, testStoreEnv, TEST_BLOB_STORE } from './helper'
import { pattern } from './s3-helper'

// Longer than the suite's default per-file timeout: real clients and processes, bounded per step.
t.setTimeout(300000)

buildBundle()

const KILLS = Number(process.env.COFFER_S3_CRASH_KILLS ?? 6)
const ADMIN = 's3crash-admin-key-0123456789'
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex')
const rand = (n: number) => Math.floor(Math.random() * n)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// COFFER_TEST_BLOB_STORE=s3 runs the same crashes with the content on the Ceph gateway (one key
// prefix for the whole test): a kill between lease, place and commit must not lose an object either.
const storeEnv = testStoreEnv()

async function start(cwd: string): Promise<{ server: Running; api: string; s3: string }> {
  // --s3-port overrides the COFFER_S3_PORT=off of the store env (flags win over the environment).
  const server = await startCoffer(['serve', '--port', '0', '--s3-port', '0', '--data-dir', 'data'], {
    cwd,
    env: { ...storeEnv, COFFER_ADMIN_API_KEY: ADMIN, COFFER_LOG_LEVEL: 'info' },
    ready: /coffer S3 listening on (http:\/\/[^\s"]+)/,
  })
  const api = /coffer listening on (http:\/\/[^\s"]+)/.exec(server.lines.join('\n'))![1]!
  return { server, api, s3: server.url }
}

t.test(`S3 writes under SIGKILL (${KILLS} kills, ${TEST_BLOB_STORE} blob store): nothing acknowledged is lost`, async (t) => {
  const cwd = tempDir(t, 'coffer-s3crash-')
  const dataDir = path.join(cwd, 'data')
  t.teardown(() => purgeStoredBlobs(storeEnv, dataDir))
  const first = await start(cwd)
  const api = first.api
  let { server, s3 } = first
  t.teardown(() => void server.child.kill('SIGKILL'))
  const tenant = await createTenantOverHttp(api, ADMIN, { name: 's3crash', quotaBytes: 1024 ** 3 })
  const credRes = await fetch(`${api}/api/v1/admin/tenants/${tenant.id}/s3-credentials`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } })
  const credentials = (await credRes.json()) as { accessKeyId: string; secretAccessKey: string }
  // No retries: an answer lost with the process must not be re-sent to the next one.
  const client = (endpoint: string) => new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 })
  let s3c = client(s3)
  t.teardown(() => s3c.destroy())
  await s3c.send(new CreateBucketCommand({ Bucket: 'crash' }))

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

  for (let kill = 0; kill < KILLS; kill++) {
    const stop = { now: false }
    const workers = [work(s3c, stop), work(s3c, stop), work(s3c, stop)]
    await sleep(400 + rand(1600))
    server.child.kill('SIGKILL')
    await server.exited
    stop.now = true
    await Promise.all(workers)
    s3c.destroy()
    ;({ server, s3 } = await start(cwd))
    s3c = client(s3)

    // Every acknowledged object that no delete was sent for reads back byte for byte.
    for (const [key, expected] of acked) {
      if (deleteTried.has(key)) continue
      const got = await s3c.send(new GetObjectCommand({ Bucket: 'crash', Key: key }))
      const bytes = await got.Body!.transformToByteArray()
      if (sha(bytes) !== expected) t.fail(`after kill ${kill + 1}: ${key} changed`)
    }
    // Usage is exactly the live files plus the parts of uploads in progress.
    const db = new Database(path.join(dataDir, 'coffer.db'), { readonly: true })
    try {
      const live = `f.deleted_at IS NULL AND f.status != 'failed'`
      const row = db
        .prepare(
          `SELECT t.used_bytes AS used,
             (SELECT coalesce(sum(size_bytes), 0) FROM files f WHERE f.tenant_id = t.id AND ${live})
             + (SELECT coalesce(sum(p.size_bytes), 0) FROM s3_parts p JOIN s3_uploads u ON u.id = p.upload_id WHERE u.tenant_id = t.id) AS actual
           FROM tenants t WHERE t.id = ?`,
        )
        .get(tenant.id) as { used: number; actual: number }
      t.equal(row.used, row.actual, `after kill ${kill + 1}: tenant usage is exact`)
      const orphanParts = db.prepare('SELECT count(*) FROM s3_parts WHERE sha256 NOT IN (SELECT sha256 FROM blobs)').pluck().get()
      t.equal(orphanParts, 0, 'every part has its blob row')
      // Every blob a file or a part references is in the store with its size (on disk or in the bucket).
      const referenced = db
        .prepare(
          `SELECT b.sha256, b.size_bytes AS size FROM blobs b
           WHERE EXISTS (SELECT 1 FROM files f WHERE f.sha256 = b.sha256) OR EXISTS (SELECT 1 FROM s3_parts p WHERE p.sha256 = b.sha256)`,
        )
        .all() as { sha256: string; size: number }[]
      const sizes = await storedSizes(storeEnv, dataDir)
      t.same(
        referenced.filter((b) => sizes.get(b.sha256) !== b.size),
        [],
        `after kill ${kill + 1}: no referenced blob is missing or short`,
      )
    } finally {
      db.close()
    }
  }
  t.ok(stats.puts + stats.multipart > 5, `work was done: ${JSON.stringify(stats)}`)
  t.ok(acked.size > 0)
})
