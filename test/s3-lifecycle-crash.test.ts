// @suites: pg
// The lifecycle pass killed with SIGKILL mid-pass, restarting on the same data dir (#25): each
// restart's passes go on from what is stored, the usage stays exactly what is stored after every
// kill (no quota drift), and the rules end their work: every expired version, marker and blob gone.
import t from 'tap'
import {
  CreateBucketCommand,
  ListObjectVersionsCommand,
  PutBucketLifecycleConfigurationCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3'
import { buildBundle } from './process-helper'
import { pattern } from './s3-helper'
import { crashServer, sleep } from './s3-crash-harness'

t.setTimeout(300000)

buildBundle()

const KEYS = 120
// A lifecycle "day" of 2 s, and a pass every second, on every start.
const LIFECYCLE = { COFFER_S3_LIFECYCLE_DAY_SECONDS: '2', COFFER_S3_LIFECYCLE_INTERVAL_SECONDS: '1' }

t.test('lifecycle passes under SIGKILL: no quota drift, and the rules finish their work', async (t) => {
  const crash = await crashServer(t, 'lccrash', { env: LIFECYCLE })
  const c = crash.client()
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

  const check = (when: string) =>
    crash.inspect((db) => {
      const row = db
        .prepare(
          `SELECT t.used_bytes AS used,
             (SELECT coalesce(sum(size_bytes), 0) FROM files f WHERE f.tenant_id = t.id AND f.deleted_at IS NULL AND f.status != 'failed')
             + (SELECT coalesce(sum(size_bytes), 0) FROM object_versions v WHERE v.tenant_id = t.id AND v.noncurrent_at IS NOT NULL) AS actual
           FROM tenants t WHERE t.id = ?`,
        )
        .get(crash.tenantId) as { used: number; actual: number }
      // Number(): PostgreSQL's sum of bigints is a numeric, which comes as a string.
      t.equal(Number(row.used), Number(row.actual), `${when}: tenant usage is exact`)
      const versions = db.pluck('SELECT count(*) FROM object_versions').get() as number
      return { used: Number(row.used), versions }
    })

  let kills = 0
  let state = check('before')
  // Four kills whatever the speed of the passes: a fast machine (PostgreSQL here) finished the rules
  // within three rounds, and the loop stopped with three kills. A kill after the work is done still
  // checks a restart's usage.
  for (let round = 0; round < 40 && (kills < 4 || state.versions > 0 || state.used > 0); round++) {
    await sleep(300 + Math.floor(Math.random() * 1200))
    if (kills < 4) {
      await crash.kill()
      kills++
      await crash.start()
    }
    state = check(`round ${round + 1}`)
  }
  t.equal(kills, 4, 'the passes were killed four times')
  t.same(state, { used: 0, versions: 0 }, 'every version, marker and byte is gone in the end')
  const after = crash.client()
  const listed = await after.send(new ListObjectVersionsCommand({ Bucket: 'versioned' }))
  t.same([listed.Versions ?? [], listed.DeleteMarkers ?? []], [[], []])
})
