/**
 * The S3 blob store (COFFER_BLOB_STORE=s3, issue #16) beside the disk store, in the same run: the
 * same API transfers against two Coffer processes that differ only in where the content lives.
 * The store is the project's Ceph RGW fixture (scripts/ceph-fixture.sh, on this machine, RAM-backed):
 * the figures say what the remote store's round trips cost Coffer, not what a real cluster does.
 */
import crypto from 'node:crypto'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { auth, handshakeBody, pngBytes, ROOT, startCoffer, uniqueCopy, upload, type Coffer } from '../coffer'
import { request } from '../http'
import { idsFile, templateFile, wrk } from '../wrk'
import { interleaved, paired, summarize } from '../stats'
import { seedDataset } from '../datasets'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'
import { loadConfig } from '../../../src/config'
import { createS3Store } from '../../../src/core'
import { DiskBlobStore } from '../../../src/blobs/disk-blob-store'

const MIB = 1024 * 1024
const LARGE = 100 * MIB
const SMALL = 4096
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000)
const sha = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex')

type Spec = Omit<FigureResult, 'coffer' | 'baseline' | 'ratio' | 'met'>

const BASELINE = 'the same on the disk store, same run'
const SPECS = {
  smallPut: { key: 's3-store-put-4kib', figure: 'S3 store: 4 KiB uploads/s (handshake + PUT, wrk c=16)', unit: 'uploads/s' },
  smallGet: { key: 's3-store-get-4kib', figure: 'S3 store: 4 KiB downloads/s (wrk c=16)', unit: 'req/s' },
  largePut: { key: 's3-store-put-100mib', figure: 'S3 store: one 100 MiB PUT, MB/s', unit: 'MB/s' },
  largeGet: { key: 's3-store-get-100mib', figure: 'S3 store: one 100 MiB GET, MB/s', unit: 'MB/s' },
} satisfies Record<string, Omit<Spec, 'baselineLabel' | 'target'>>

const spec = (s: (typeof SPECS)[keyof typeof SPECS]): Spec => ({ ...s, baselineLabel: BASELINE, target: 'report' })

function result(s: Spec, r: { subject: number; baseline: number; ratio: number }, extra: Partial<FigureResult> = {}): FigureResult {
  return { ...s, coffer: r.subject, baseline: r.baseline, ratio: r.ratio, met: null, ...extra }
}

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
  const specs = Object.values(SPECS).map(spec)
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
    const sides = [
      { url: disk.url, key: diskSet.seed.apiKey },
      { url: s3.url, key: s3Set.seed.apiKey },
    ] as const
    const out: FigureResult[] = []

    ctx.log('  S3 store: one 100 MiB PUT and GET, each beside the disk store')
    const template = pngBytes(LARGE)
    const last: ({ fileId: string; sha256: string } | undefined)[] = [undefined, undefined]
    const putLarge = (side: 0 | 1) => async () => {
      const bytes = uniqueCopy(template)
      const { fileId, putMs } = await upload(sides[side].url, sides[side].key, bytes)
      const previous = last[side]
      last[side] = { fileId, sha256: sha(bytes) }
      // Only the last one is kept (for the GET): the fixture's RAM is small.
      if (side === 1 && previous) await bucket.remove(previous.sha256)
      return mbps(LARGE, putMs)
    }
    const [diskPut, s3Put] = await interleaved(ctx.runs, [putLarge(0), putLarge(1)])
    const put = summarize(diskPut!, s3Put!)
    out.push(
      result(spec(SPECS.largePut), put, {
        note: 'both stage the body to tmp/ while hashing it; the S3 store then sends it as 8 MiB parts, four in flight, and is acknowledged once the store confirmed it',
        details: { runs: put },
      }),
    )
    const getLarge = (side: 0 | 1) => async () => {
      const res = await request(`${sides[side].url}/api/v1/files/${last[side]!.fileId}/download`, { headers: auth(sides[side].key), discard: true })
      if (res.status !== 200 || res.bytes !== LARGE) throw new Error(`GET: ${res.status}, ${res.bytes} bytes`)
      return mbps(LARGE, res.ms)
    }
    await getLarge(0)()
    await getLarge(1)()
    const [diskGet, s3Get] = await interleaved(ctx.runs, [getLarge(0), getLarge(1)])
    const get = summarize(diskGet!, s3Get!)
    out.push(
      result(spec(SPECS.largeGet), get, {
        note: 'the S3 store streams a GetObject through Coffer; the disk store reads the page cache',
        details: { runs: get },
      }),
    )
    await bucket.remove(last[1]!.sha256)

    if ('unavailable' in ctx.wrk) {
      const why = `wrk: ${ctx.wrk.unavailable}`
      out.push(notMeasured(spec(SPECS.smallPut), why), notMeasured(spec(SPECS.smallGet), why))
      return out
    }
    const bin = ctx.wrk.path

    ctx.log('  S3 store: 4 KiB uploads, c=16, beside the disk store')
    let round = 0
    // A fresh template per run: content an earlier run stored would be deduplicated.
    const uploads = (side: 0 | 1) => async (seconds: number) => {
      const template = templateFile(ctx.dir, `s3-store-put-${++round}`, pngBytes(SMALL))
      const args = [sides[side].key, template, handshakeBody(SMALL).toString()]
      return (await wrk({ bin, dir: ctx.dir, url: sides[side].url, script: 'twoStepUpload', args, connections: 16, seconds })).rps
    }
    await uploads(0)(1)
    await uploads(1)(1)
    const smallPut = await paired(
      ctx.runs,
      () => uploads(0)(ctx.loadSeconds),
      () => uploads(1)(ctx.loadSeconds),
    )
    out.push(
      result(spec(SPECS.smallPut), smallPut, {
        note: 'each S3-store upload adds a HeadObject (content already there is not sent again) and a PutObject to the disk store’s work, and a lease row in its commit',
        details: { runs: smallPut, seconds: ctx.loadSeconds },
      }),
    )

    ctx.log('  S3 store: 4 KiB downloads, c=16, beside the disk store')
    const lists: string[] = []
    for (const side of [0, 1] as const) {
      const ids: string[] = []
      for (let i = 0; i < 256; i++) ids.push((await upload(sides[side].url, sides[side].key, pngBytes(SMALL))).fileId)
      lists.push(idsFile(ctx.dir, `s3-store-get-${side}`, ids))
    }
    const downloads = (side: 0 | 1) => async (seconds: number) =>
      (
        await wrk({
          bin,
          dir: ctx.dir,
          url: sides[side].url,
          script: 'randomGet',
          args: [lists[side]!, '/api/v1/files/', '/download', auth(sides[side].key).authorization],
          connections: 16,
          seconds,
        })
      ).rps
    await downloads(0)(1)
    await downloads(1)(1)
    const smallGet = await paired(
      ctx.runs,
      () => downloads(0)(ctx.loadSeconds),
      () => downloads(1)(ctx.loadSeconds),
    )
    out.push(
      result(spec(SPECS.smallGet), smallGet, {
        note: 'each S3-store download is a GetObject round trip to the gateway; the disk store reads a small blob at once',
        details: { runs: smallGet, seconds: ctx.loadSeconds, files: 256 },
      }),
    )
    return out
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
