/**
 * `npm run bench`: every figure beside a baseline measured in the same invocation, as the median
 * of several runs (the machines are shared and noisy, so ratios are what carry over). Prints a
 * markdown table and writes JSON (default dist/bench/results.json).
 *
 * Options: --runs N (pairs per figure, default 5), --only KEY,… (cold-start, fixture, metadata-read,
 * listing, transfers, s3, s3-store, s3-writes, s3-small-writes, encryption, workers, nodes, sqlite-before-after, rss, callgrind, s3-callgrind, s3-put-callgrind), --against-bundle PATH[,PATH…] (callgrind, s3-callgrind, s3-put-callgrind and fixture (which also takes an executable) also count other builds of
 * Coffer, e.g. an old dist/coffer.cjs; sqlite-before-after measures the first one's request rates beside this build's), --quick (3 runs, short load runs, 10k/100k files: a smoke test, not
 * the figures), --files N and --large-files N (dataset sizes), --out FILE, --keep (keep the temp dir),
 * --cpu-prof (every Coffer process writes a V8 CPU profile into dist/bench/profiles/).
 */
import fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { profileInto, ROOT, shippedCommand } from './coffer'
import { growDataset, seedDataset } from './datasets'
import { ensureNginx } from './nginx'
import { ensureWrk } from './wrk'
import { fmt, markdownTable } from './stats'
import type { BenchContext, FigureResult } from './figure'
import { metadataReads, listing } from './figures/api'
import { transfers } from './figures/transfers'
import { s3Figures } from './figures/s3'
import { s3StoreFigures } from './figures/s3-store'
import { s3SmallWriteFigures, s3WriteFigures } from './figures/s3-writes'
import { encryptionFigures } from './figures/encryption'
import { workersFigures } from './figures/workers'
import { nodesFigures } from './figures/nodes'
import { sqliteBeforeAfter } from './figures/sqlite-before-after'
import { peakRss } from './figures/memory'
import { coldStart } from './figures/startup'
import { fixture } from './figures/fixture'
import { diskCosts, type DiskCosts } from './figures/disk'
import { machine } from './machine'
import { callgrindFigure, ensureValgrind } from './figures/callgrind'
import { s3CallgrindFigure, s3PutCallgrindFigure } from './figures/s3-callgrind'

const FIGURES: Record<string, (ctx: BenchContext) => Promise<FigureResult | FigureResult[]>> = {
  'cold-start': coldStart,
  fixture,
  'metadata-read': metadataReads,
  listing,
  transfers,
  s3: s3Figures,
  's3-store': s3StoreFigures,
  's3-writes': s3WriteFigures,
  's3-small-writes': s3SmallWriteFigures,
  encryption: encryptionFigures,
  workers: workersFigures,
  nodes: nodesFigures,
  'sqlite-before-after': sqliteBeforeAfter,
  rss: peakRss,
  callgrind: callgrindFigure,
  's3-callgrind': s3CallgrindFigure,
  's3-put-callgrind': s3PutCallgrindFigure,
}

function table(results: FigureResult[]): string {
  const value = (v: number | null, text: string | undefined, unit: string) => text ?? (v === null ? '—' : `${fmt(v)} ${unit}`)
  return markdownTable(
    ['figure', 'baseline (same run)', 'Coffer', 'baseline', 'ratio', 'target', 'met?'],
    results.map((r) => [
      r.figure,
      r.baselineLabel,
      value(r.coffer, r.cofferText, r.unit),
      value(r.baseline, r.baselineText, r.unit),
      r.ratio === null ? '—' : `${fmt(r.ratio, 2)}×`,
      r.target,
      r.invalid ? '**INVALID**' : r.met === null ? (r.coffer === null ? 'NOT MEASURED' : 'report') : r.met ? 'yes' : '**no**',
    ]),
  )
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string' },
      only: { type: 'string' },
      quick: { type: 'boolean', default: false },
      files: { type: 'string' },
      'large-files': { type: 'string' },
      out: { type: 'string' },
      keep: { type: 'boolean', default: false },
      'cpu-prof': { type: 'boolean', default: false },
      'against-bundle': { type: 'string' },
    },
  })
  const major = Number(process.versions.node.split('.')[0])
  if (major < 24) throw new Error(`the bench needs Node 24 (npm run bench uses the project's own); this is ${process.version}`)
  const only = values.only?.split(',') ?? Object.keys(FIGURES)
  for (const k of only) if (!FIGURES[k]) throw new Error(`unknown figure ${k}; known: ${Object.keys(FIGURES).join(', ')}`)
  const runs = Number(values.runs ?? (values.quick ? 3 : 5))
  const files = Number(values.files ?? (values.quick ? 10_000 : 100_000))
  const largeFiles = Number(values['large-files'] ?? (values.quick ? 100_000 : 1_000_000))
  // One path, or several separated by commas: each is measured beside this build in the same run.
  const againstBundles = values['against-bundle'] === undefined ? [] : values['against-bundle'].split(',').map((p) => path.resolve(p))
  for (const b of againstBundles) if (!fs.existsSync(b)) throw new Error(`--against-bundle ${b}: no such file`)
  const out = path.resolve(values.out ?? path.join(ROOT, 'dist', 'bench', 'results.json'))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-bench-'))
  const log = (line: string) => process.stderr.write(`${line}\n`)
  const started = Date.now()
  const loadStart = os.loadavg()
  log(`bench dir ${dir}`)
  if (values['cpu-prof']) {
    const profiles = path.join(ROOT, 'dist', 'bench', 'profiles', new Date(started).toISOString().replace(/[:.]/g, '-'))
    profileInto(profiles)
    log(`CPU profiles of the Coffer processes go to ${profiles}`)
  }
  try {
    const nginx =
      only.includes('transfers') || only.includes('s3-writes') || only.includes('s3-small-writes') ? ensureNginx(log) : { unavailable: 'not requested' }
    log(`seeding ${files} files…`)
    const small = seedDataset(path.join(dir, 'small'), files)
    log(`  ${small.seed.seconds.toFixed(1)} s`)
    let large = small
    if (only.includes('listing')) {
      log(`seeding ${largeFiles} files (a copy of the first dataset, grown)…`)
      large = growDataset(small, path.join(dir, 'large'), largeFiles - files)
      log(`  ${large.seed.seconds.toFixed(1)} s`)
    }
    const empty = seedDataset(path.join(dir, 'empty'), 0)
    const ctx: BenchContext = {
      dir,
      runs,
      loadSeconds: values.quick ? 2 : 5,
      readSeconds: values.quick ? 3 : 10,
      datasets: { small, large, empty },
      nginx,
      wrk: only.some(
        (k) =>
          k === 'transfers' ||
          k === 'metadata-read' ||
          k === 's3' ||
          k === 's3-store' ||
          k === 's3-writes' ||
          k === 's3-small-writes' ||
          k === 'encryption' ||
          k === 'workers' ||
          k === 'nodes' ||
          k === 'sqlite-before-after',
      )
        ? ensureWrk(log)
        : { unavailable: 'not requested' },
      shipped: shippedCommand(),
      valgrind:
        only.includes('callgrind') || only.includes('s3-callgrind') || only.includes('s3-put-callgrind')
          ? ensureValgrind(log)
          : { unavailable: 'not requested' },
      callgrindRequests: values.quick ? { warmup: 1000, measured: 500 } : { warmup: 3000, measured: 2000 },
      againstBundles,
      log,
      disk: undefined as never,
    }
    log('disk and CPU costs of durability (fsync, SHA-256)…')
    ctx.disk = await diskCosts(ctx)
    const results: FigureResult[] = []
    for (const key of only) {
      log(`${key}…`)
      // Each figure starts with nothing dirty in the page cache, so none pays for the writeback of
      // what was written before it (the seeded datasets: the 1M-file one is hundreds of MB).
      spawnSync('sync')
      try {
        const r = await FIGURES[key]!(ctx)
        results.push(...(Array.isArray(r) ? r : [r]))
      } catch (err) {
        // One figure that fails (a fixture that broke, a server that died) must not throw away
        // the others, measured minutes before: its row says NOT MEASURED and why.
        const reason = (err as Error)?.message ?? String(err)
        log(`  ${key} failed: ${reason}`)
        results.push({
          key,
          figure: `${key} (every figure of it)`,
          baselineLabel: '—',
          unit: '',
          coffer: null,
          baseline: null,
          ratio: null,
          target: '—',
          met: null,
          note: `not measured: the figure failed: ${reason}`,
        })
      }
    }
    // A figure that failed shows in the table, and fails the command.
    if (results.some((r) => r.note?.startsWith('not measured: the figure failed'))) process.exitCode = 1
    const disk = ctx.disk
    const report = {
      startedAt: new Date(started).toISOString(),
      seconds: Math.round((Date.now() - started) / 1000),
      options: { runs, files, largeFiles, quick: values.quick, only },
      machine: { ...machine(dir), loadAverageAtStart: loadStart, loadAverageAtEnd: os.loadavg() },
      coffer: ctx.shipped,
      nginx,
      seeding: { [`${files} files`]: small.seed.seconds, [`${largeFiles} files (grown from ${files})`]: large === small ? null : large.seed.seconds },
      disk,
      results,
    }
    fs.mkdirSync(path.dirname(out), { recursive: true })
    fs.writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`)
    process.stdout.write(`${render(report.machine, results, disk, nginx, ctx.wrk)}\n\nJSON: ${path.relative(process.cwd(), out) || out}\n`)
  } finally {
    if (values.keep) log(`kept ${dir}`)
    else fs.rmSync(dir, { recursive: true, force: true })
  }
}

function render(
  m: ReturnType<typeof machine> & { loadAverageAtStart: number[]; loadAverageAtEnd: number[] },
  results: FigureResult[],
  disk: DiskCosts,
  nginx: ReturnType<typeof ensureNginx>,
  wrkBin: ReturnType<typeof ensureWrk>,
): string {
  const notes = results.filter((r) => r.note || r.invalid).map((r) => `- ${r.figure}: ${r.invalid ? `INVALID: ${r.invalid}. ` : ''}${r.note ?? ''}`)
  return [
    table(results),
    '',
    ...notes,
    `- load generator: ${'unavailable' in wrkBin ? `not used: ${wrkBin.unavailable}` : `wrk ${wrkBin.version}, one thread, its own process`}`,
    `- nginx: ${'unavailable' in nginx ? `NOT MEASURED: ${nginx.unavailable}` : `${nginx.version}, one worker process (Coffer is one process)`}`,
    `- costs nginx does not pay, measured in this run: SHA-256 of 100 MiB ${fmt(disk.sha256For100MiBMs)} ms; writing 100 MiB ${fmt(disk.write100MiBMs)} ms, then its fsync ${fmt(disk.fsync100MiBMs)} ms; a durable 4 KiB file ${fmt(disk.smallFileFsyncMs)} ms alone, ${fmt(disk.smallFileFsyncsPerSecond)}/s with 16 at once`,
    `- machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB RAM, ${m.disk}; ${m.os}; Node ${m.node}; load average ${m.loadAverageAtStart.map((l) => l.toFixed(1)).join(' ')} at start, ${m.loadAverageAtEnd.map((l) => l.toFixed(1)).join(' ')} at end`,
  ].join('\n')
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error)?.stack ?? String(err)}\n`)
  process.exitCode = 1
})
