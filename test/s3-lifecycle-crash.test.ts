// The lifecycle pass killed with SIGKILL mid-pass, restarting on the same data dir (#25): each
// restart's passes go on from what is stored, the usage stays exactly what is stored after every
// kill (no quota drift), and the rules end their work: every expired version, marker and blob gone.
import path from 'node:path'
import t from 'tap'
import Database from 'better-sqlite3'
import {
  CreateBucketCommand,
  ListObjectVersionsCommand,
  PutBucketLifecycleConfigurationCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3'
import { buildBundle, createTenantOverHttp, startCoffer, type Running } from './process-helper'
import { purgeStoredBlobs, tempDir, testStoreEnv } from './helper'
import { pattern } from './s3-helper'

t.setTimeout(300000)

buildBundle()

const ADMIN = 'lccrash-admin-key-0123456789'
const KEYS = 120
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const storeEnv = testStoreEnv()

async function start(cwd: string): Promise<{ server: Running; api: string; s3: string }> {
  const server = await startCoffer(['serve', '--port', '0', '--s3-port', '0', '--data-dir', 'data'], {
    cwd,
    env: {
      ...storeEnv,
      COFFER_ADMIN_API_KEY: ADMIN,
      COFFER_LOG_LEVEL: 'info',
      COFFER_S3_LIFECYCLE_DAY_SECONDS: '2',
      COFFER_S3_LIFECYCLE_INTERVAL_SECONDS: '1',
    },
    ready: /coffer S3 listening on (http:\/\/[^\s"]+)/,
  })
  const api = /coffer listening on (http:\/\/[^\s"]+)/.exec(server.lines.join('\n'))![1]!
  return { server, api, s3: server.url }
}

t.test('lifecycle passes under SIGKILL: no quota drift, and the rules finish their work', async (t) => {
  const cwd = tempDir(t, 'coffer-lccrash-')
  const dataDir = path.join(cwd, 'data')
  t.teardown(() => purgeStoredBlobs(storeEnv, dataDir))
  const first = await start(cwd)
  let { server } = first
  const { api, s3 } = first
  t.teardown(() => void server.child.kill('SIGKILL'))
  const tenant = await createTenantOverHttp(api, ADMIN, { name: 'lccrash', quotaBytes: 1024 ** 3 })
  const credRes = await fetch(`${api}/api/v1/admin/tenants/${tenant.id}/s3-credentials`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } })
  const credentials = (await credRes.json()) as { accessKeyId: string; secretAccessKey: string }
  const client = (endpoint: string) => new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 })
  const c = client(s3)
  t.teardown(() => c.destroy())
  await c.send(new CreateBucketCommand({ Bucket: 'plain' }))
  await c.send(new CreateBucketCommand({ Bucket: 'versioned' }))
  await c.send(new PutBucketVersioningCommand({ Bucket: 'versioned', VersioningConfiguration: { Status: 'Enabled' } }))
  // Written before the rules exist, so that no pass runs while they are written.
  for (let i = 0; i < KEYS; i++) {
    await c.send(new PutObjectCommand({ Bucket: 'plain', Key: `k${i}`, Body: pattern(1000 + i, i) }))
    await c.send(new PutObjectCommand({ Bucket: 'versioned', Key: `k${i}`, Body: pattern(500 + i, i) }))
    await c.send(new PutObjectCommand({ Bucket: 'versioned', Key: `k${i}`, Body: pattern(700 + i, i + 1) }))
  }
  const rules = { Rules: [{ ID: 'all', Filter: {}, Status: 'Enabled' as const, Expiration: { Days: 1 }, NoncurrentVersionExpiration: { NoncurrentDays: 1 } }] }
  await c.send(new PutBucketLifecycleConfigurationCommand({ Bucket: 'plain', LifecycleConfiguration: rules }))
  await c.send(new PutBucketLifecycleConfigurationCommand({ Bucket: 'versioned', LifecycleConfiguration: rules }))

  const check = (when: string) => {
    const db = new Database(path.join(dataDir, 'coffer.db'), { readonly: true })
    try {
      const row = db
        .prepare(
          `SELECT t.used_bytes AS used,
             (SELECT coalesce(sum(size_bytes), 0) FROM files f WHERE f.tenant_id = t.id AND f.deleted_at IS NULL AND f.status != 'failed')
             + (SELECT coalesce(sum(size_bytes), 0) FROM object_versions v WHERE v.tenant_id = t.id AND v.noncurrent_at IS NOT NULL) AS actual
           FROM tenants t WHERE t.id = ?`,
        )
        .get(tenant.id) as { used: number; actual: number }
      t.equal(row.used, row.actual, `${when}: tenant usage is exact`)
      const versions = db.prepare('SELECT count(*) FROM object_versions').pluck().get() as number
      return { used: row.used, versions }
    } finally {
      db.close()
    }
  }

  let kills = 0
  let state = check('before')
  for (let round = 0; round < 40 && (state.versions > 0 || state.used > 0); round++) {
    await sleep(300 + Math.floor(Math.random() * 1200))
    if (kills < 4) {
      server.child.kill('SIGKILL')
      await server.exited
      kills++
      ;({ server } = await start(cwd))
    }
    state = check(`round ${round + 1}`)
  }
  t.equal(kills, 4, 'the passes were killed four times')
  t.same(state, { used: 0, versions: 0 }, 'every version, marker and byte is gone in the end')
  const after = client(server.url)
  t.teardown(() => after.destroy())
  const listed = await after.send(new ListObjectVersionsCommand({ Bucket: 'versioned' }))
  t.same([listed.Versions ?? [], listed.DeleteMarkers ?? []], [[], []])
})
