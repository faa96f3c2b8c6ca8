/**
 * SQLite's request rates before and after the engine work of #30 (the issue: within 5%), in the
 * same run: this build's dist/coffer.cjs beside an older bundle given with --against-bundle (the
 * build of 644a77c^, the commit before the first engine commit), both on SQLite, one process each
 * (COFFER_WORKERS=1), measured alternately (paired: which goes first alternates), wrk in its own
 * process. The rates: GET /api/v1/files/:id (c=32), the API's 4 KiB downloads and uploads, S3 4 KiB
 * GetObject, HeadObject (head-client.ts: wrk cannot HEAD) and PutObject, and ListObjectsV2 of 100
 * keys (c=16). The CPU each server
 * spends per request is read from /proc too: a figure the machine's other load sways less.
 *
 * Both data dirs hold the same data: the older build makes it (its CLI, then its fronts: a tenant,
 * a bucket, 1,000 API files and 256 objects), the copy is this build's, which migrates it forward
 * at its start. A build never opens a newer schema, so the older one seeds.
 */
import { execFileSync } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { auth, bundleCommand, handshakeBody, pngBytes, startCoffer, upload, type Coffer, type CofferCommand } from '../coffer'
import { cliTenant, createBucket, s3Request } from '../cli-seed'
import { cpuMs } from '../processes'
import { encodePath, prepareSigned } from '../s3-sign'
import { paired } from '../stats'
import { headLoad } from '../head-load'
import { generatorBound, idsFile, templateFile, wrk, type WrkResult } from '../wrk'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'

const SMALL = 4096
const FILES = 1000
const OBJECTS = 256
const PUTS_PER_SECOND_CAP = 8000
const LIST = '/bench?list-type=2&max-keys=100&prefix=get%2F'

type Rate = 'filesGet' | 'apiGet' | 'apiPut' | 's3Get' | 's3Head' | 's3Put' | 's3List'
const RATES: Record<Rate, { figure: string; unit: string; connections: number }> = {
  filesGet: { figure: 'GET /api/v1/files/:id (c=32)', unit: 'req/s', connections: 32 },
  apiGet: { figure: '4 KiB API downloads (c=16)', unit: 'req/s', connections: 16 },
  apiPut: { figure: '4 KiB API uploads, handshake + PUT (c=16)', unit: 'uploads/s', connections: 16 },
  s3Get: { figure: '4 KiB GetObject (c=16)', unit: 'req/s', connections: 16 },
  s3Head: { figure: '4 KiB HeadObject (c=16)', unit: 'req/s', connections: 16 },
  s3Put: { figure: '4 KiB PutObject (c=16)', unit: 'objects/s', connections: 16 },
  s3List: { figure: 'ListObjectsV2, 100 keys a page (c=16)', unit: 'req/s', connections: 16 },
}

const spec = (rate: Rate, base: string) => ({
  key: `sqlite-before-after-${rate}`,
  figure: `SQLite, this build: ${RATES[rate].figure}`,
  baselineLabel: `${base}, same run, alternated`,
  unit: RATES[rate].unit,
  target: '≥ 0.95× (#30: within 5%)',
})

export async function sqliteBeforeAfter(ctx: BenchContext): Promise<FigureResult[]> {
  const before = ctx.againstBundles[0]
  const label = before ? path.relative(process.cwd(), before) : 'the build before #30'
  const all = (why: string) => (Object.keys(RATES) as Rate[]).map((r) => notMeasured(spec(r, label), why))
  if (!before) return all('give the build before the engine work with --against-bundle PATH (its dist/coffer.cjs)')
  if ('unavailable' in ctx.wrk) return all(`wrk: ${ctx.wrk.unavailable}`)
  const bin = ctx.wrk.path
  const cmds: CofferCommand[] = [{ label, command: process.execPath, args: [before] }, bundleCommand()]
  const dirs = [path.join(ctx.dir, 'before'), path.join(ctx.dir, 'after')]
  const servers: Coffer[] = []
  try {
    ctx.log(`  SQLite before/after: seeding with ${label}`)
    const seeder = await startCoffer(dirs[0]!, cmds[0])
    const tenant = cliTenant(cmds[0]!, dirs[0]!)
    let ids: string[]
    const keys: string[] = []
    try {
      const bucket = await createBucket(seeder.s3Url, tenant.creds)
      ids = []
      for (let i = 0; i < FILES; i++) ids.push((await upload(seeder.url, tenant.apiKey, pngBytes(SMALL))).fileId)
      for (let i = 0; i < OBJECTS; i++) {
        const p = `${bucket}/get/${i}.bin`
        await s3Request(seeder.s3Url, tenant.creds, 'PUT', p, pngBytes(SMALL))
        keys.push(p)
      }
    } finally {
      await seeder.stop()
    }
    execFileSync('cp', ['-a', dirs[0]!, dirs[1]!])
    for (const [i, dir] of dirs.entries()) servers.push(await startCoffer(dir, cmds[i]))
    const idList = idsFile(ctx.dir, 'before-after', ids)
    const downloads = idsFile(ctx.dir, 'before-after-get', ids.slice(0, OBJECTS))
    const hosts = servers.map((s) => s.s3Url.replace('http://', ''))

    let round = 0
    const run = (rate: Rate, side: number, seconds: number): Promise<WrkResult> => {
      const s = servers[side]!
      const common = { bin, dir: ctx.dir, connections: RATES[rate].connections, seconds }
      const signed = (method: string, paths: string[]) =>
        prepareSigned(path.join(ctx.dir, `before-after-${method}-${side}.signed`), tenant.creds, method, hosts[side]!, paths)
      const key = auth(tenant.apiKey).authorization
      switch (rate) {
        case 'filesGet':
          return wrk({ ...common, url: s.url, script: 'randomGet', args: [idList, '/api/v1/files/', '', key] })
        case 'apiGet':
          return wrk({ ...common, url: s.url, script: 'randomGet', args: [downloads, '/api/v1/files/', '/download', key] })
        case 'apiPut': {
          const t = templateFile(ctx.dir, `before-after-${++round}`, pngBytes(SMALL))
          return wrk({ ...common, url: s.url, script: 'twoStepUpload', args: [tenant.apiKey, t, handshakeBody(SMALL).toString()] })
        }
        case 's3Get':
          return wrk({ ...common, url: s.s3Url, script: 'preparedS3', args: [signed('GET', keys), 'GET'] })
        case 's3Head':
          // wrk waits for the body a HEAD's Content-Length announces: a generator of its own.
          return headLoad({ url: s.s3Url, signedFile: signed('HEAD', keys), connections: common.connections, seconds })
        case 's3List':
          return wrk({ ...common, url: s.s3Url, script: 'preparedS3', args: [signed('GET', [LIST]), 'GET'] })
        case 's3Put': {
          const r = ++round
          const paths = Array.from({ length: PUTS_PER_SECOND_CAP * seconds }, (_, i) => encodePath(`/bench/put/${r}/${i}.bin`))
          const t = templateFile(ctx.dir, `before-after-${r}`, pngBytes(SMALL))
          return wrk({ ...common, url: s.s3Url, script: 'preparedS3', args: [signed('PUT', paths), 'PUT', t, '1'] })
        }
      }
    }

    const out: FigureResult[] = []
    for (const rate of Object.keys(RATES) as Rate[]) {
      ctx.log(`  SQLite before/after: ${RATES[rate].figure}`)
      const seconds = rate === 'filesGet' ? ctx.readSeconds : ctx.loadSeconds
      const results: WrkResult[][] = [[], []]
      const cpu: number[][] = [[], []]
      const loads: number[] = []
      const measured = (side: number) => async () => {
        const c0 = cpuMs(servers[side]!.pid)
        const r = await run(rate, side, seconds)
        if (r.good === 0) throw new Error(`${RATES[rate].figure}: no request answered in ${seconds} s`)
        results[side]!.push(r)
        cpu[side]!.push(((cpuMs(servers[side]!.pid) - c0) * 1000) / r.requests)
        loads.push(os.loadavg()[0]!)
        return r.rps
      }
      let p: Awaited<ReturnType<typeof paired>>
      try {
        await run(rate, 0, 1)
        await run(rate, 1, 1)
        p = await paired(ctx.runs, measured(0), measured(1))
      } catch (err) {
        // One rate that fails leaves the others measured.
        out.push(notMeasured(spec(rate, label), (err as Error).message))
        continue
      }
      const invalid = generatorBound([...results[0]!, ...results[1]!])
      const range = (v: number[]) => `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)}`
      const ratios = p.subjectRuns.map((v, i) => v / p.baselineRuns[i]!)
      out.push({
        ...spec(rate, label),
        coffer: p.subject,
        baseline: p.baseline,
        ratio: p.ratio,
        met: invalid ? null : p.ratio >= 0.95,
        ...(invalid ? { invalid } : {}),
        note:
          `runs: this build ${range(p.subjectRuns)}, before ${range(p.baselineRuns)}/s, ratios ${ratios.map((x) => x.toFixed(2)).join(', ')}; ` +
          `CPU µs per request: this build ${cpu[1]!.map((x) => x.toFixed(0)).join(', ')}, before ${cpu[0]!.map((x) => x.toFixed(0)).join(', ')}; ` +
          `load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}`,
        details: {
          runs: p,
          ratios,
          seconds,
          cpuMicrosecondsPerRequest: { after: cpu[1], before: cpu[0] },
          generatorCpuShare: results.map((s) => s.map((w) => w.generatorCpuShare)),
          loadAverage1m: loads,
        },
      })
    }
    return out
  } finally {
    await Promise.all(servers.map((c) => c.stop()))
  }
}
