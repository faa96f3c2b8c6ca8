/**
 * The S3 blob store (COFFER_BLOB_STORE=s3, issue #16) beside the disk store, in the same run: the
 * same API transfers against two Coffer processes that differ only in where the content lives.
 * The store is the project's Ceph RGW fixture (scripts/ceph-fixture.sh, on this machine, RAM-backed):
 * the figures say what the remote store's round trips cost Coffer, not what a real cluster does.
 */
import crypto from 'node:crypto'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { ROOT, startCoffer, type Coffer } from '../coffer'
import { seedDataset } from '../datasets'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'
import { sideBySideTransfers, transferSpecs } from '../side-by-side'
import { loadConfig } from '../../../src/config'
import { createS3Store } from '../../../src/core'
import { DiskBlobStore } from '../../../src/blobs/disk-blob-store'

const SPECS = transferSpecs('s3-store', 'S3 store', 'the same on the disk store, same run')

/** The fixture's COFFER_BLOB_S3_* env, started with the project's script, or why it cannot be had. */
function fixture(): { env: Record<string, string> } | { unavailable: string } {
  const r = spawnSync('bash', [path.join(ROOT, 'scripts', 'ceph-fixture.sh'), 'start'], { encoding: 'utf8', timeout: 15 * 60_000 })
  const env: Record<string, string> = {}
  for (const line of (r.stdout ?? '').split('\n')) {
    const m = /^(COFFER_BLOB_S3_[A-Z_]+)=(.*)$/.exec(line)
    if (m) env[m[1]!] = m[2]!
  }
  if (r.status !== 0 || env.COFFER_BLOB_S3_ENDPOINT === undefined) {
    const tail = (r.stderr ?? '').trim().split('\n').slice(-2).join(' | ')
    return { unavailable: `scripts/ceph-fixture.sh start failed (exit ${r.status ?? r.signal}): ${tail}` }
  }
  return { env }
}

export async function s3StoreFigures(ctx: BenchContext): Promise<FigureResult[]> {
  const specs = Object.values(SPECS)
  ctx.log('  starting the Ceph fixture (scripts/ceph-fixture.sh start)')
  const f = fixture()
  if ('unavailable' in f) return specs.map((s) => notMeasured(s, f.unavailable))
  // A prefix of this run's own: the bucket is shared with the tests of everyone on the machine.
  const prefix = `bench-${process.pid}-${crypto.randomBytes(4).toString('hex')}/`
  const storeEnv = { ...f.env, COFFER_BLOB_STORE: 's3', COFFER_BLOB_S3_PREFIX: prefix }
  const diskSet = seedDataset(path.join(ctx.dir, 's3-store-disk'), 0)
  const s3Set = seedDataset(path.join(ctx.dir, 's3-store-s3'), 0)
  // The fixture's OSD keeps objects in RAM under a 1 GiB cap: what the bench stores it deletes.
  const bucket = createS3Store(
    loadConfig(storeEnv, { 'data-dir': s3Set.dir }),
    new DiskBlobStore(path.join(ctx.dir, 's3-store-blobs'), path.join(ctx.dir, 's3-store-tmp')),
  )
  let disk: Coffer | undefined
  let s3: Coffer | undefined
  try {
    disk = await startCoffer(diskSet.dir)
    s3 = await startCoffer(s3Set.dir, undefined, storeEnv)
    return await sideBySideTransfers(ctx, {
      subject: 'S3 store',
      beside: 'the disk store',
      tag: 's3-store',
      sides: [
        { url: disk.url, key: diskSet.seed.apiKey },
        { url: s3.url, key: s3Set.seed.apiKey },
      ],
      specs: SPECS,
      notes: {
        largePut:
          'both stage the body to tmp/ while hashing it; the S3 store then sends it as 8 MiB parts, four in flight, and is acknowledged once the store confirmed it',
        largeGet: 'the S3 store streams a GetObject through Coffer; the disk store reads the page cache',
        smallPut:
          'each S3-store upload adds a HeadObject (content already there is not sent again) and a PutObject to the disk store’s work, and a lease row in its commit',
        smallGet: 'each S3-store download is a GetObject round trip to the gateway; the disk store reads a small blob at once',
      },
      // Only the last 100 MiB object is kept (for the GET), then none: the fixture's RAM is small.
      largeStored: async (side, _sha256, previous) => {
        if (side === 1 && previous !== undefined) await bucket.remove(previous)
      },
      largeDone: async (last) => bucket.remove(last[1]),
    })
  } finally {
    await Promise.all([disk?.stop(), s3?.stop()])
    try {
      for await (const b of bucket.list()) await bucket.remove(b.sha256)
    } catch (err) {
      ctx.log(`  could not delete the bench's objects under ${prefix} in the fixture's bucket: ${(err as Error).message}`)
    }
    bucket.close()
  }
}
