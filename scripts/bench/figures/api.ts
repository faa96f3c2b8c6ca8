/** Metadata reads and listings: the JSON API's request path and the keyset pagination. */
import http from 'node:http'
import path from 'node:path'
import { auth, startCoffer } from '../coffer'
import { load, request } from '../http'
import { freePort, startProc } from '../processes'
import { median, paired, percentile } from '../stats'
import type { BenchContext, FigureResult } from '../figure'

/** `GET /api/v1/files/:id` at c=32 against a bare Fastify route returning constant JSON. */
export async function metadataReads(ctx: BenchContext): Promise<FigureResult> {
  const { small } = ctx.datasets
  const coffer = await startCoffer(small.dir)
  const port = await freePort()
  const bare = await startProc(process.execPath, [path.join(__dirname, 'bare-fastify.cjs'), String(port)], {
    port,
    healthPath: '/health',
    logFile: path.join(ctx.dir, 'bare-fastify.log'),
  })
  try {
    const ids = small.seed.sampleIds
    // Every request reads a different file, spread over the whole 100k-file tenant.
    const run = (url: string, seconds: number, headers: Record<string, string>) =>
      load({
        url,
        connections: 32,
        duration: seconds,
        headers,
        requests: [{ setupRequest: (req) => ({ ...req, path: `/api/v1/files/${ids[Math.floor(Math.random() * ids.length)]}` }) }],
      })
    ctx.log('  warming up')
    await run(bare.url, 2, {})
    await run(coffer.url, 2, auth(small.seed.apiKey))
    const r = await paired(
      ctx.runs,
      async () => (await run(bare.url, ctx.readSeconds, {})).rps,
      async () => (await run(coffer.url, ctx.readSeconds, auth(small.seed.apiKey))).rps,
    )
    return {
      key: 'metadata-read',
      figure: `GET /api/v1/files/:id req/s (autocannon c=32, ${ctx.readSeconds} s)`,
      baselineLabel: 'bare Fastify route returning constant JSON',
      unit: 'req/s',
      coffer: r.subject,
      baseline: r.baseline,
      ratio: r.ratio,
      target: '≥ 0.5×',
      met: r.ratio >= 0.5,
      details: { runs: r, files: small.seed.files },
    }
  } finally {
    await Promise.all([coffer.stop(), bare.stop()])
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
