/** Metadata reads and listings: the JSON API's request path and the keyset pagination. */
import http from 'node:http'
import path from 'node:path'
import { auth, startCoffer } from '../coffer'
import { request } from '../http'
import { generatorBound, idsFile, wrk, type WrkResult } from '../wrk'
import { cpuMs, freePort, startProc } from '../processes'
import { interleaved, median, percentile, summarize } from '../stats'
import type { BenchContext, FigureResult } from '../figure'

/**
 * `GET /api/v1/files/:id` at c=32 against a bare Fastify route returning constant JSON, with a
 * reference point in the same runs: the bare route doing only the work any implementation must
 * do (key lookup, row read, access log line; see bare-fastify.ts). CPU time per request is read
 * from /proc for each server, a figure less swayed by the machine's other load than req/s.
 */
export async function metadataReads(ctx: BenchContext): Promise<FigureResult> {
  const { small } = ctx.datasets
  if ('unavailable' in ctx.wrk) return notMeasured(ctx, `wrk: ${ctx.wrk.unavailable}`)
  const bin = ctx.wrk.path
  const coffer = await startCoffer(small.dir)
  const startBare = async (name: string, extra: string[]) => {
    const port = await freePort()
    return startProc(process.execPath, [path.join(__dirname, 'bare-fastify.cjs'), String(port), ...extra], {
      port,
      healthPath: '/health',
      logFile: path.join(ctx.dir, `${name}.log`),
    })
  }
  const bare = await startBare('bare-fastify', [])
  const essential = await startBare('bare-fastify-essential', [small.dir])
  try {
    const ids = idsFile(ctx.dir, 'metadata-read', small.seed.sampleIds)
    const authHeader = auth(small.seed.apiKey).authorization
    const cpu: Record<string, number[]> = { bare: [], coffer: [], essential: [] }
    const bareRuns: WrkResult[] = []
    // Every request reads a different file, spread over the whole 100k-file tenant; wrk in its own process.
    const run = async (name: string, pid: number, url: string, seconds: number) => {
      const before = cpuMs(pid)
      const r = await wrk({ bin, dir: ctx.dir, url, script: 'randomGet', args: [ids, '/api/v1/files/', '', authHeader], connections: 32, seconds })
      cpu[name]?.push(((cpuMs(pid) - before) * 1000) / r.requests)
      if (name === 'bare') bareRuns.push(r)
      return r.rps
    }
    ctx.log('  warming up')
    for (const [name, p] of [
      ['', bare],
      ['', coffer],
      ['', essential],
    ] as const)
      await run(name, p.pid, p.url, 2)
    const [bareRps, cofferRps, essentialRps] = await interleaved(ctx.runs, [
      () => run('bare', bare.pid, bare.url, ctx.readSeconds),
      () => run('coffer', coffer.pid, coffer.url, ctx.readSeconds),
      () => run('essential', essential.pid, essential.url, ctx.readSeconds),
    ])
    const invalid = generatorBound(bareRuns)
    const r = summarize(bareRps!, cofferRps!)
    const us = Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, median(v)])) as Record<'bare' | 'coffer' | 'essential', number>
    const ess = median(essentialRps!)
    return {
      key: 'metadata-read',
      figure: `GET /api/v1/files/:id req/s (wrk c=32, ${ctx.readSeconds} s)`,
      baselineLabel: 'bare Fastify route returning constant JSON',
      unit: 'req/s',
      coffer: r.subject,
      baseline: r.baseline,
      ratio: r.ratio,
      target: '≥ 0.4×',
      met: invalid ? null : r.ratio >= 0.4,
      invalid,
      note:
        `CPU per request: bare route ${us.bare.toFixed(0)} us, Coffer ${us.coffer.toFixed(0)} us. The same bare route doing ` +
        `only the work any implementation must (hash the key and find its tenant, read the row from SQLite, write an access ` +
        `log line) uses ${us.essential.toFixed(0)} us and reaches ${ess.toFixed(0)} req/s, ${(ess / r.baseline).toFixed(2)}x the bare route; ` +
        `Coffer reaches ${(r.subject / ess).toFixed(2)}x of it`,
      details: { runs: r, essentialRps, cpuMicrosecondsPerRequest: cpu, files: small.seed.files, generatorCpuShare: bareRuns.map((b) => b.generatorCpuShare) },
    }
  } finally {
    await Promise.all([coffer.stop(), bare.stop(), essential.stop()])
  }
}

function notMeasured(ctx: BenchContext, why: string): FigureResult {
  return {
    key: 'metadata-read',
    figure: `GET /api/v1/files/:id req/s (wrk c=32, ${ctx.readSeconds} s)`,
    baselineLabel: 'bare Fastify route returning constant JSON',
    unit: 'req/s',
    coffer: null,
    baseline: null,
    ratio: null,
    target: '≥ 0.4×',
    met: null,
    note: `not measured: ${why}`,
  }
}

/**
 * `GET /api/v1/files?limit=20` latency, one request at a time, with 1M files against 100k, and the
 * last page against the first. The four variants are interleaved in small blocks within each
 * round, so a burst of load from elsewhere on the machine hits all of them alike.
 */
export async function listing(ctx: BenchContext): Promise<FigureResult[]> {
  const { small, large } = ctx.datasets
  const servers = await Promise.all([startCoffer(small.dir), startCoffer(large.dir)])
  try {
    const agents = servers.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }))
    const variants = [
      { name: '100k first', server: 0, seed: small.seed, cursor: undefined },
      { name: '1M first', server: 1, seed: large.seed, cursor: undefined },
      { name: '100k last', server: 0, seed: small.seed, cursor: small.seed.lastPageCursor ?? undefined },
      { name: '1M last', server: 1, seed: large.seed, cursor: large.seed.lastPageCursor ?? undefined },
    ]
    const once = async (v: (typeof variants)[number]) => {
      const url = `${servers[v.server]!.url}/api/v1/files?limit=20${v.cursor ? `&cursor=${v.cursor}` : ''}`
      const res = await request(url, { headers: auth(v.seed.apiKey), agent: agents[v.server]! })
      if (res.status !== 200) throw new Error(`${url}: ${res.status} ${res.body.toString().slice(0, 200)}`)
      return { ms: res.ms, body: res.body }
    }
    // Check what is being measured: full pages, the right total, and the last page really is last.
    for (const v of variants) {
      const page = JSON.parse((await once(v)).body.toString()) as { files: unknown[]; nextCursor: string | null; total: number }
      if (page.files.length !== 20 || page.total !== v.seed.files || (v.cursor !== undefined) !== (page.nextCursor === null)) {
        throw new Error(`${v.name}: unexpected page (${page.files.length} files, total ${page.total}, nextCursor ${page.nextCursor})`)
      }
    }
    ctx.log('  warming up')
    for (let i = 0; i < 300; i++) for (const v of variants) await once(v)
    const perRound = 400
    const block = 10
    const rounds: number[][] = []
    for (let r = 0; r < ctx.runs; r++) {
      const samples: number[][] = variants.map(() => [])
      for (let done = 0; done < perRound; done += block) {
        for (const [i, v] of variants.entries()) for (let k = 0; k < block; k++) samples[i]!.push((await once(v)).ms)
      }
      rounds.push(samples.map((s) => percentile(s, 50)))
    }
    for (const a of agents) a.destroy()
    const p50 = (i: number) => median(rounds.map((r) => r[i]!))
    const ratio = (a: number, b: number) => median(rounds.map((r) => r[a]! / r[b]!))
    const details = { rounds: rounds.map((r) => Object.fromEntries(variants.map((v, i) => [v.name, r[i]]))), requestsPerVariantPerRound: perRound }
    const sizeRatio = ratio(1, 0)
    const lastRatio = ratio(3, 1)
    return [
      {
        key: 'list-1m',
        figure: 'GET /api/v1/files?limit=20 p50, 1M files in one tenant',
        baselineLabel: 'the same with 100k files',
        unit: 'ms',
        coffer: p50(1),
        baseline: p50(0),
        ratio: sizeRatio,
        target: '≤ 1.5×',
        met: sizeRatio <= 1.5,
        details,
      },
      {
        key: 'list-last-page',
        figure: 'same, last page (1M files)',
        baselineLabel: 'first page (1M files)',
        unit: 'ms',
        coffer: p50(3),
        baseline: p50(1),
        ratio: lastRatio,
        target: '≤ 1.2× ("as fast")',
        met: lastRatio <= 1.2,
        note: `100k files: last page ${p50(2).toFixed(2)} ms, first ${p50(0).toFixed(2)} ms`,
      },
    ]
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
  }
}
