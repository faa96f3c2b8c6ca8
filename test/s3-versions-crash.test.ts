// @suites: pg s3
// Versioned S3 writes while the server is killed with SIGKILL at random moments, restarting on the
// same data dir (#25): every acknowledged version (PutObject, CompleteMultipartUpload) reads back
// byte for byte by its versionId, every acknowledged delete marker is listed, overwrites and
// deletes never lose an older version, and the usage counts exactly what is stored.
import { createHash } from 'node:crypto'
import t from 'tap'
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
import { buildBundle } from './process-helper'
import { TEST_BLOB_STORE } from './helper'
import { pattern } from './s3-helper'
import { crashServer, killLoop, missingBlobs, rand } from './s3-crash-harness'

t.setTimeout(300000)

buildBundle()

const KILLS = Number(process.env.COFFER_S3_CRASH_KILLS ?? 6)
const BUCKET = 'vcrash'
const KEYS = ['a', 'b', 'c/d', 'e']
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex')

// COFFER_TEST_BLOB_STORE=s3: the same crashes with the content on the Ceph gateway.
t.test(`versioned S3 writes and deletes under SIGKILL (${KILLS} kills, ${TEST_BLOB_STORE} blob store): no acknowledged version lost`, async (t) => {
  const crash = await crashServer(t, 's3vcrash')
  const setup = crash.client()
  await setup.send(new CreateBucketCommand({ Bucket: BUCKET }))
  await setup.send(new PutBucketVersioningCommand({ Bucket: BUCKET, VersioningConfiguration: { Status: 'Enabled' } }))

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

  await killLoop(crash, KILLS, work, async (kill, c) => {
    // Every acknowledged content version no removal was sent for reads back by its id.
    for (const [versionId, v] of acked) {
      if (removalTried.has(versionId) || v.sha === undefined) continue
      const got = await c.send(new GetObjectCommand({ Bucket: BUCKET, Key: v.key, VersionId: versionId }))
      if (sha(await got.Body!.transformToByteArray()) !== v.sha) t.fail(`after kill ${kill}: ${v.key}@${versionId} changed`)
    }
    // Every acknowledged marker is listed as one.
    const listed = new Map<string, boolean>()
    for (let KeyMarker: string | undefined, VersionIdMarker: string | undefined, more = true; more;) {
      const page = await c.send(new ListObjectVersionsCommand({ Bucket: BUCKET, KeyMarker, VersionIdMarker, MaxKeys: 50 }))
      for (const x of page.Versions ?? []) listed.set(x.VersionId!, false)
      for (const x of page.DeleteMarkers ?? []) listed.set(x.VersionId!, true)
      more = page.IsTruncated === true
      KeyMarker = page.NextKeyMarker
      VersionIdMarker = page.NextVersionIdMarker
    }
    const lost = [...acked].filter(([id, v]) => !removalTried.has(id) && listed.get(id) !== (v.sha === undefined))
    t.same(lost, [], `after kill ${kill}: every acknowledged version and marker is listed as what it is`)

    crash.inspect((db) => {
      // Usage: live files, noncurrent versions and the parts of uploads in progress; nothing else.
      const row = db
        .prepare(
          `SELECT t.used_bytes AS used,
             (SELECT coalesce(sum(size_bytes), 0) FROM files f WHERE f.tenant_id = t.id AND f.deleted_at IS NULL AND f.status != 'failed')
             + (SELECT coalesce(sum(size_bytes), 0) FROM object_versions v WHERE v.tenant_id = t.id AND v.noncurrent_at IS NOT NULL)
             + (SELECT coalesce(sum(p.size_bytes), 0) FROM s3_parts p JOIN s3_uploads u ON u.id = p.upload_id WHERE u.tenant_id = t.id) AS actual
           FROM tenants t WHERE t.id = ?`,
        )
        .get(crash.tenantId) as { used: number; actual: number }
      // Number(): PostgreSQL's sum of bigints is a numeric, which comes as a string.
      t.equal(Number(row.used), Number(row.actual), `after kill ${kill}: tenant usage is exact`)
      // Each key: one current version, the newest; a current content version's file is live, a noncurrent one's is not.
      const broken = db
        .prepare(
          `SELECT v.object_key, v.version_id FROM object_versions v LEFT JOIN files f ON f.id = v.file_id
           WHERE (v.noncurrent_at IS NULL) != (v.seq = (SELECT max(seq) FROM object_versions o WHERE o.workspace_id = v.workspace_id AND o.object_key = v.object_key))
              OR (v.file_id IS NOT NULL AND (f.id IS NULL OR (f.deleted_at IS NULL) != (v.noncurrent_at IS NULL)))`,
        )
        .all()
      t.same(broken, [], `after kill ${kill}: versions and files agree`)
    })
    t.same(await missingBlobs(crash), [], `after kill ${kill}: no referenced blob is missing or short`)
  })
  t.ok(stats.puts + stats.multipart > 5 && stats.markers > 0, `work was done: ${JSON.stringify(stats)}`)
})
