/**
 * `coffer serve --workers 2` beside `--workers 1` in the same run (#29): 4 KiB GetObject/s and
 * PutObject/s at c=16 (wrk, requests signed ahead as in s3.ts), and the CPU per request of each
 * side: the user + system time of the whole process tree (the primary and its workers) over the
 * run, divided by the requests it answered. Two servers on data dirs of their own, each with its
 * tenant, bucket and S3 pair made offline; only one is under load at a time (paired, alternating).
 * The generator shares the cores with the server: on a 2-core machine wrk's core is one of the two
 * the workers could use, so the ratio here is a floor of what a machine with spare cores sees.
 * Target: ≥ 1.4× on GetObject, no loss (≥ 1.0×) on PutObject.
 */
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { pngBytes, startCoffer, type Coffer } from '../coffer'
import { request } from '../http'
import { paired } from '../stats'
import { cpuMs } from '../processes'
import { encodePath, prepareSigned, sha256Hex, signHeaders, type Credentials } from '../s3-sign'
import { generatorBound, templateFile, wrk, type WrkResult } from '../wrk'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'
import { loadConfig } from '../../../src/config'
import { createCore } from '../../../src/core'

const SMALL = 4096
const PUTS_PER_SECOND_CAP = 8000

const SPECS = {
  get: { key: 'workers-get-4kib', figure: '--workers 2: 4 KiB GetObject/s (c=16)', baselineLabel: '--workers 1, same run', unit: 'req/s', target: '≥ 1.4×' },
  put: {
    key: 'workers-put-4kib',
    figure: '--workers 2: 4 KiB PutObject/s (c=16)',
    baselineLabel: '--workers 1, same run',
    unit: 'objects/s',
    target: '≥ 1.0×',
  },
} as const

/** The pids of a server: the primary and, with --workers N, its workers. */
function tree(pid: number): number[] {
  try {
    return [
      pid,
      ...execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean)
        .map(Number),
    ]
  } catch {
    return [pid]
  }
}

const treeCpuMs = (pid: number) => tree(pid).reduce((ms, p) => ms + cpuMs(p), 0)

/** One server's data dir: a tenant, its bucket and S3 pair, made offline. */
function seed(dir: string): Credentials {
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  try {
    const { tenant } = core.tenants.create({ name: 'workers-bench', quotaBytes: 64 * 1024 ** 3 })
    core.workspaces.create({ ...tenant }, { name: 'bench', slug: 'bench' })
    const pair = core.s3Credentials.create(tenant.id)
    return { accessKeyId: pair.accessKeyId, secretAccessKey: pair.secretAccessKey, region: core.config.s3Region }
  } finally {
    core.close()
  }
}

/** Waits for the primary's "coffer ready" line: /health answers as soon as the first worker listens. */
async function allReady(c: Coffer): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (fs.readFileSync(c.logFile, 'utf8').includes('"coffer ready:')) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('the workers never all got ready')
}

export async function workersFigures(ctx: BenchContext): Promise<FigureResult[]> {
  const generator = ctx.wrk
  if ('unavailable' in generator) return Object.values(SPECS).map((s) => notMeasured(s, `wrk: ${generator.unavailable}`))
  const bin = generator.path
  const sides = [1, 2].map((workers) => ({ workers, dir: path.join(ctx.dir, `workers-${workers}`) }))
  const creds = sides.map((s) => seed(s.dir))
  const servers: Coffer[] = []
  try {
    // COFFER_WRITE_STATS=<seconds> in the bench's environment: each worker logs its group commit's
    // counters (src/db/write-stats.ts) into workers-N.log of the bench's dir (--keep keeps it).
    const stats: Record<string, string> = process.env.COFFER_WRITE_STATS ? { COFFER_WRITE_STATS: process.env.COFFER_WRITE_STATS } : {}
    for (const s of sides) servers.push(await startCoffer(s.dir, undefined, { COFFER_WORKERS: String(s.workers), ...stats }))
    await allReady(servers[1]!)
    const hosts = servers.map((c) => c.s3Url.replace('http://', ''))
    const out: FigureResult[] = []

    // Per side: the wrk results and the CPU ms per request of each measured run.
    const runs: WrkResult[][] = [[], []]
    const cpuPerRequest: number[][] = [[], []]
    let measuring = false
    const measure = async (side: number, run: () => Promise<WrkResult>) => {
      const pid = servers[side]!.pid
      const cpu0 = treeCpuMs(pid)
      const r = await run()
      if (measuring) {
        runs[side]!.push(r)
        cpuPerRequest[side]!.push((treeCpuMs(pid) - cpu0) / r.requests)
      }
      return r.rps
    }
    const report = (spec: (typeof SPECS)[keyof typeof SPECS], r: Awaited<ReturnType<typeof paired>>, min: number, note: string): FigureResult => {
      const invalid = generatorBound([...runs[0]!, ...runs[1]!])
      const cpu = cpuPerRequest.map((v) => v.map((ms) => Math.round(ms * 1000) / 1000))
      return {
        ...spec,
        coffer: r.subject,
        baseline: r.baseline,
        ratio: r.ratio,
        met: invalid ? null : r.ratio >= min,
        ...(invalid ? { invalid } : {}),
        note: `${note}; CPU ms per request: --workers 1 ${cpu[0]!.join(', ')}; --workers 2 ${cpu[1]!.join(', ')}`,
        details: {
          runs: r,
          cpuMsPerRequest: { workers1: cpu[0], workers2: cpu[1] },
          seconds: ctx.loadSeconds,
          generatorCpuShare: runs.map((s) => s.map((w) => w.generatorCpuShare)),
        },
      }
    }

    ctx.log('  workers: 4 KiB GetObject, --workers 2 vs --workers 1, c=16 (wrk)')
    const keys: string[][] = [[], []]
    for (const side of [0, 1]) {
      for (let i = 0; i < 256; i++) {
        const p = encodePath(`/bench/get/${i}.bin`)
        const body = pngBytes(SMALL)
        const res = await request(`${servers[side]!.s3Url}${p}`, {
          method: 'PUT',
          headers: signHeaders(creds[side]!, 'PUT', hosts[side]!, p, sha256Hex(body)),
          body,
        })
        if (res.status !== 200) throw new Error(`PutObject: ${res.status} ${res.body.toString().slice(0, 200)}`)
        keys[side]!.push(p)
      }
    }
    const get = (side: number) => (seconds: number) =>
      measure(side, async () => {
        const file = prepareSigned(path.join(ctx.dir, `workers-get-${side}.signed`), creds[side]!, 'GET', hosts[side]!, keys[side]!)
        return wrk({ bin, dir: ctx.dir, url: servers[side]!.s3Url, script: 'preparedS3', args: [file, 'GET'], connections: 16, seconds })
      })
    await get(0)(1)
    await get(1)(1)
    measuring = true
    const gets = await paired(
      ctx.runs,
      () => get(0)(ctx.loadSeconds),
      () => get(1)(ctx.loadSeconds),
    )
    out.push(report(SPECS.get, gets, 1.4, 'reads on any worker'))

    ctx.log('  workers: 4 KiB PutObject, --workers 2 vs --workers 1, c=16 (wrk)')
    measuring = false
    for (const side of [0, 1]) {
      runs[side]!.length = 0
      cpuPerRequest[side]!.length = 0
    }
    let round = 0
    const put = (side: number) => (seconds: number) =>
      measure(side, async () => {
        const r = ++round
        const paths = Array.from({ length: PUTS_PER_SECOND_CAP * seconds }, (_, i) => encodePath(`/bench/put/${r}/${i}.bin`))
        const file = prepareSigned(path.join(ctx.dir, `workers-put-${r}.signed`), creds[side]!, 'PUT', hosts[side]!, paths)
        const template = templateFile(ctx.dir, `workers-put-${r}`, pngBytes(SMALL))
        return wrk({ bin, dir: ctx.dir, url: servers[side]!.s3Url, script: 'preparedS3', args: [file, 'PUT', template, '1'], connections: 16, seconds })
      })
    await put(0)(1)
    await put(1)(1)
    measuring = true
    const puts = await paired(
      ctx.runs,
      () => put(0)(ctx.loadSeconds),
      () => put(1)(ctx.loadSeconds),
    )
    out.push(report(SPECS.put, puts, 1.0, 'durable writes, serialized by SQLite across workers, each worker with its own group commit'))
    return out
  } finally {
    await Promise.all(servers.map((c) => c.stop()))
  }
}
