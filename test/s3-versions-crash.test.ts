// Versioned S3 writes while the server is killed with SIGKILL at random moments, restarting on the
// same data dir (#25): every acknowledged version (PutObject, CompleteMultipartUpload) reads back
// byte for byte by its versionId, every acknowledged delete marker is listed, overwrites and
// deletes never lose an older version, and the usage counts exactly what is stored.
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
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { buildBundle, createTenantOverHttp, startCoffer, type Running } from './process-helper'
import { purgeStoredBlobs, storedSizes, tempDir, testStoreEnv, TEST_BLOB_STORE } from './helper'
import { pattern } from './s3-helper'

t.setTimeout(300000)

buildBundle()

const KILLS = Number(process.env.COFFER_S3_CRASH_KILLS ?? 6)
const ADMIN = 's3vcrash-admin-key-0123456789'
const BUCKET = 'vcrash'
const KEYS = ['a', 'b', 'c/d', 'e']
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex')
const rand = (n: number) => Math.floor(Math.random() * n)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// COFFER_TEST_BLOB_STORE=s3: the same crashes with the content on the Ceph gateway.
const storeEnv = testStoreEnv()

async function start(cwd: string): Promise<{ server: Running; api: string; s3: string }> {
  const server = await startCoffer(['serve', '--port', '0', '--s3-port', '0', '--data-dir', 'data'], {
    cwd,
    env: { ...storeEnv, COFFER_ADMIN_API_KEY: ADMIN, COFFER_LOG_LEVEL: 'info' },
    ready: /coffer S3 listening on (http:\/\/[^\s"]+)/,
  })
  const api = /coffer listening on (http:\/\/[^\s"]+)/.exec(server.lines.join('\n'))![1]!
  return { server, api, s3: server.url }
}

t.test(`versioned S3 writes and deletes under SIGKILL (${KILLS} kills, ${TEST_BLOB_STORE} blob store): no acknowledged version lost`, async (t) => {
  const cwd = tempDir(t, 'coffer-s3vcrash-')
  const dataDir = path.join(cwd, 'data')
  t.teardown(() => purgeStoredBlobs(storeEnv, dataDir))
  const first = await start(cwd)
  const api = first.api
  let { server, s3 } = first
  t.teardown(() => void server.child.kill('SIGKILL'))
  const tenant = await createTenantOverHttp(api, ADMIN, { name: 's3vcrash', quotaBytes: 1024 ** 3 })
  const credRes = await fetch(`${api}/api/v1/admin/tenants/${tenant.id}/s3-credentials`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } })
  const credentials = (await credRes.json()) as { accessKeyId: string; secretAccessKey: string }
  // No retries: an answer lost with the process must not be re-sent to the next one.
  const client = (endpoint: string) => new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 })
  let s3c = client(s3)
  t.teardown(() => s3c.destroy())
  await s3c.send(new CreateBucketCommand({ Bucket: BUCKET }))
  await s3c.send(new PutBucketVersioningCommand({ Bucket: BUCKET, VersioningConfiguration: { Status: 'Enabled' } }))

  // versionId → what was acknowledged: content (its hash) or a delete marker.
  const acked = new Map<string, { key: string; sha?: string }>()
  // Versions a DELETE ?versionId= was sent for: their fate is the client's to know only if answered.
  const removalTried = new Set<string>()
  const stats = { puts: 0, multipart: 0, markers: 0, removals: 0 }

  async function work(c: S3Client, stop: { now: boolean }): Promise<void> {
    while (!stop.now) {
      const roll = Math.random()
      const key = KEYS[rand(KEYS.length)]!
      try {
        if (roll < 0.55) {
          // Overwrites of few keys: each key gathers versions; equal bodies share a blob.
          const body = Math.random() < 0.2 ? pattern(64, 7) : pattern(1 + rand(Math.random() < 0.1 ? 2_000_000 : 60_000), rand(1e9))
          const r = await c.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }))
          acked.set(r.VersionId!, { key, sha: sha(body) })
          stats.puts++
        } else if (roll < 0.65) {
          // One small part (the last part may be any size) mostly, so that Completes are acknowledged between kills.
          const parts =
            Math.random() < 0.3 ? [pattern(5 * 1024 * 1024, rand(1e9)), pattern(1 + rand(50_000), rand(1e9))] : [pattern(1 + rand(50_000), rand(1e9))]
          const { UploadId } = await c.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: key }))
          const etags: string[] = []
          for (const [i, p] of parts.entries()) {
            etags.push((await c.send(new UploadPartCommand({ Bucket: BUCKET, Key: key, UploadId, PartNumber: i + 1, Body: p }))).ETag!)
          }
          const done = await c.send(
            new CompleteMultipartUploadCommand({
              Bucket: BUCKET,
              Key: key,
              UploadId,
              MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) },
            }),
          )
          acked.set(done.VersionId!, { key, sha: sha(Buffer.concat(parts)) })
          stats.multipart++
        } else if (roll < 0.85) {
          const r = await c.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: key }))
          acked.set(r.VersionId!, { key })
          stats.markers++
        } else if (acked.size > 0) {
          const candidates = [...acked.keys()].filter((v) => !removalTried.has(v))
          const victim = candidates[rand(candidates.length)]
          if (victim === undefined) continue
          removalTried.add(victim)
          await c.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: acked.get(victim)!.key, VersionId: victim }))
          stats.removals++
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

    // Every acknowledged content version no removal was sent for reads back by its id.
    for (const [versionId, v] of acked) {
      if (removalTried.has(versionId) || v.sha === undefined) continue
      const got = await s3c.send(new GetObjectCommand({ Bucket: BUCKET, Key: v.key, VersionId: versionId }))
      if (sha(await got.Body!.transformToByteArray()) !== v.sha) t.fail(`after kill ${kill + 1}: ${v.key}@${versionId} changed`)
    }
    // Every acknowledged marker is listed as one.
    const listed = new Map<string, boolean>()
    for (let KeyMarker: string | undefined, VersionIdMarker: string | undefined, more = true; more;) {
      const page = await s3c.send(new ListObjectVersionsCommand({ Bucket: BUCKET, KeyMarker, VersionIdMarker, MaxKeys: 50 }))
      for (const x of page.Versions ?? []) listed.set(x.VersionId!, false)
      for (const x of page.DeleteMarkers ?? []) listed.set(x.VersionId!, true)
      more = page.IsTruncated === true
      KeyMarker = page.NextKeyMarker
      VersionIdMarker = page.NextVersionIdMarker
    }
    const lost = [...acked].filter(([id, v]) => !removalTried.has(id) && listed.get(id) !== (v.sha === undefined))
    t.same(lost, [], `after kill ${kill + 1}: every acknowledged version and marker is listed as what it is`)

    const db = new Database(path.join(dataDir, 'coffer.db'), { readonly: true })
    try {
      // Usage: live files, noncurrent versions and the parts of uploads in progress; nothing else.
      const row = db
        .prepare(
          `SELECT t.used_bytes AS used,
             (SELECT coalesce(sum(size_bytes), 0) FROM files f WHERE f.tenant_id = t.id AND f.deleted_at IS NULL AND f.status != 'failed')
             + (SELECT coalesce(sum(size_bytes), 0) FROM object_versions v WHERE v.tenant_id = t.id AND v.noncurrent_at IS NOT NULL)
             + (SELECT coalesce(sum(p.size_bytes), 0) FROM s3_parts p JOIN s3_uploads u ON u.id = p.upload_id WHERE u.tenant_id = t.id) AS actual
           FROM tenants t WHERE t.id = ?`,
        )
        .get(tenant.id) as { used: number; actual: number }
      t.equal(row.used, row.actual, `after kill ${kill + 1}: tenant usage is exact`)
      // Each key: one current version, the newest; a current content version's file is live, a noncurrent one's is not.
      const broken = db
        .prepare(
          `SELECT v.object_key, v.version_id FROM object_versions v LEFT JOIN files f ON f.id = v.file_id
           WHERE (v.noncurrent_at IS NULL) != (v.seq = (SELECT max(seq) FROM object_versions o WHERE o.workspace_id = v.workspace_id AND o.object_key = v.object_key))
              OR (v.file_id IS NOT NULL AND (f.id IS NULL OR (f.deleted_at IS NULL) != (v.noncurrent_at IS NULL)))`,
        )
        .all()
      t.same(broken, [], `after kill ${kill + 1}: versions and files agree`)
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
  t.ok(stats.puts + stats.multipart > 5 && stats.markers > 0, `work was done: ${JSON.stringify(stats)}`)
})
