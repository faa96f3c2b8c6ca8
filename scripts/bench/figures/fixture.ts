/**
 * The CI fixture (#28, #29): `coffer serve --ephemeral` from spawn to its first signed S3 answer,
 * and its resident memory once idle, each beside a bare `node -e` server in the same run.
 */
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import readline from 'node:readline'
import { spawn, spawnSync } from 'node:child_process'
import { cpuMs, freePort, rssBytes, startProc } from '../processes'
import { signHeaders } from '../s3-sign'
import { median, summarize } from '../stats'
import type { BenchContext, FigureResult } from '../figure'

const NODE_LISTEN = `require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.argv[1]), '127.0.0.1')`
/** How long a server is left alone after its first answer before its RSS is read. */
const IDLE_MS = 2000
const MB = 1e6
const creds = { accessKeyId: 'benchfixture', secretAccessKey: 'bench-fixture-secret', region: 'us-east-1' }

/** A signed ListBuckets; resolves with the status. */
function listBuckets(endpoint: string): Promise<number> {
  const u = new URL(endpoint)
  const headers = signHeaders(creds, 'GET', u.host, '/', 'UNSIGNED-PAYLOAD')
  return new Promise((resolve, reject) => {
    const req = http.get(`${endpoint}/`, { headers, agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
  })
}

interface Start {
  ms: number
  rss: number
  /** User + system CPU time until ready (Coffer: its JSON line; node -e: its first answer), which load stretches less than wall time. */
  cpu: number
}

/** One fixture: spawn, JSON line, one signed S3 request answered 200; then idle, RSS, SIGTERM. */
async function fixtureOnce(ctx: BenchContext, n: number, { command, args }: { command: string; args: string[] } = ctx.shipped): Promise<Start> {
  const log = fs.openSync(path.join(ctx.dir, `fixture-${n}.log`), 'a')
  const t0 = performance.now()
  const child = spawn(
    command,
    [...args, 'serve', '--ephemeral', '--port', '0', '--s3-access-key-id', creds.accessKeyId, '--s3-secret-access-key', creds.secretAccessKey],
    { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: ctx.dir }, stdio: ['ignore', 'pipe', log] },
  )
  fs.closeSync(log)
  const exited = new Promise<unknown>((resolve) => child.once('exit', resolve))
  try {
    const line = await new Promise<string>((resolve, reject) => {
      readline.createInterface({ input: child.stdout! }).once('line', resolve)
      void exited.then(() => reject(new Error('coffer serve --ephemeral exited before its JSON line')))
    })
    const cpu = cpuMs(child.pid!)
    const { s3 } = JSON.parse(line) as { s3: { endpoint: string } }
    const status = await listBuckets(s3.endpoint)
    if (status !== 200) throw new Error(`signed ListBuckets answered ${status}`)
    const ms = performance.now() - t0
    await new Promise((r) => setTimeout(r, IDLE_MS))
    return { ms, rss: rssBytes(child.pid!), cpu }
  } finally {
    child.kill('SIGTERM')
    await exited
  }
}

async function nodeOnce(ctx: BenchContext): Promise<Start> {
  const port = await freePort()
  const p = await startProc(process.execPath, ['-e', NODE_LISTEN, String(port)], { port, healthPath: '/', logFile: path.join(ctx.dir, 'node-e.log') })
  const cpu = cpuMs(p.pid)
  await new Promise((r) => setTimeout(r, IDLE_MS))
  const rss = rssBytes(p.pid)
  await p.stop()
  return { ms: p.startMs, rss, cpu }
}

/** `--against-bundle PATH`: another build, a bundle (`….cjs`, run by this Node) or an executable. */
const commandOf = (p: string) => (p.endsWith('.cjs') ? { label: `node ${p}`, command: process.execPath, args: [p] } : { label: p, command: p, args: [] })

/**
 * Drops an executable's pages from the page cache (GNU dd's `iflag=nocache`), so that every build
 * measured gets them back the same way, by the faults of its first start. The RSS of the same
 * executable depends on how its pages came into the cache: on each fault the kernel maps the
 * neighbouring cached pages too, and right after the build wrote it whole it measured 95 MB, read
 * back by faults 78 MB (#28; README, CI fixture).
 */
function evict(file: string): void {
  spawnSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none'])
}

export async function fixture(ctx: BenchContext): Promise<FigureResult[]> {
  const others = ctx.againstBundles.map(commandOf)
  for (const c of [ctx.shipped, ...others]) evict(c.command)
  // The first start of the single executable unpacks its SQLite addon: every ephemeral start does
  // that (a new data dir each time), so it is measured, but one start first warms the page cache.
  await fixtureOnce(ctx, 0)
  for (const o of others) await fixtureOnce(ctx, 0, o)
  const runs = Math.max(ctx.runs, 5)
  const node: Start[] = []
  const coffer: Start[] = []
  const against: Start[][] = others.map(() => [])
  let n = 0
  for (let i = 0; i < runs; i++) {
    // Rotating which goes first, as stats.interleaved does.
    const measures = [
      async () => void node.push(await nodeOnce(ctx)),
      async () => void coffer.push(await fixtureOnce(ctx, ++n)),
      ...others.map((o, k) => async () => void against[k]!.push(await fixtureOnce(ctx, ++n, o))),
    ]
    for (let k = 0; k < measures.length; k++) await measures[(i + k) % measures.length]!()
  }
  const start = summarize(
    node.map((s) => s.ms),
    coffer.map((s) => s.ms),
  )
  const rss = summarize(
    node.map((s) => s.rss / MB),
    coffer.map((s) => s.rss / MB),
  )
  const cpu = summarize(
    node.map((s) => s.cpu),
    coffer.map((s) => s.cpu),
  )
  const range = (v: number[]) => `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)}`
  const otherRows: FigureResult[] = others.flatMap((o, k) => {
    const st = summarize(
      node.map((s) => s.ms),
      against[k]!.map((s) => s.ms),
    )
    const rs = summarize(
      node.map((s) => s.rss / MB),
      against[k]!.map((s) => s.rss / MB),
    )
    const cp = summarize(
      node.map((s) => s.cpu),
      against[k]!.map((s) => s.cpu),
    )
    const row = { baselineLabel: '`node -e`, same runs', target: 'reference', met: null, cofferText: undefined } as const
    return [
      {
        ...row,
        key: 'fixture-start-against',
        figure: `${o.label}: spawn to the first signed S3 answer`,
        unit: 'ms',
        coffer: st.subject,
        baseline: st.baseline,
        ratio: st.ratio,
        note: `runs ${range(st.subjectRuns)} ms`,
        details: { runs: st },
      },
      {
        ...row,
        key: 'fixture-cpu-against',
        figure: `${o.label}: CPU until the JSON line`,
        unit: 'ms',
        coffer: cp.subject,
        baseline: cp.baseline,
        ratio: cp.ratio,
        note: `runs ${range(cp.subjectRuns)} ms`,
        details: { runs: cp },
      },
      {
        ...row,
        key: 'fixture-idle-rss-against',
        figure: `${o.label}: idle RSS`,
        unit: 'MB',
        coffer: rs.subject,
        baseline: rs.baseline,
        ratio: rs.ratio,
        note: `runs ${range(rs.subjectRuns)} MB`,
        details: { runs: rs },
      },
    ]
  })
  return [
    ...otherRows,
    {
      key: 'fixture-start',
      figure: `${ctx.shipped.label} serve --ephemeral: spawn to the first signed S3 answer`,
      baselineLabel: '`node -e` listening: spawn to its first answer',
      unit: 'ms',
      coffer: start.subject,
      baseline: start.baseline,
      ratio: start.ratio,
      target: '< 150 ms (#28)',
      met: start.subject < 150,
      note: `${ctx.shipped.note}; runs ${range(start.subjectRuns)} ms beside ${range(start.baselineRuns)} ms`,
      details: { runs: start },
    },
    {
      key: 'fixture-cpu',
      figure: `${ctx.shipped.label} serve --ephemeral: CPU (user + system) until the JSON line`,
      baselineLabel: '`node -e` listening: CPU until its first answer',
      unit: 'ms',
      coffer: cpu.subject,
      baseline: cpu.baseline,
      ratio: cpu.ratio,
      target: 'reference (load stretches it less than wall time)',
      met: null,
      note: `runs ${range(cpu.subjectRuns)} ms beside ${range(cpu.baselineRuns)} ms`,
      details: { runs: cpu },
    },
    {
      key: 'fixture-idle-rss',
      figure: `${ctx.shipped.label} serve --ephemeral: RSS idle ${IDLE_MS / 1000} s after that answer`,
      baselineLabel: '`node -e` listening, as long after its answer',
      unit: 'MB',
      coffer: rss.subject,
      baseline: rss.baseline,
      ratio: rss.ratio,
      target: '≤ 60 MB (#29)',
      met: median(coffer.map((s) => s.rss)) <= 60 * MB,
      note: `runs ${range(rss.subjectRuns)} MB beside ${range(rss.baselineRuns)} MB`,
      details: { runs: rss },
    },
  ]
}
