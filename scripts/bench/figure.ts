/** What every figure reports, and the context figures run in. */
import type { NginxBinary } from './nginx'
import type { CofferCommand } from './coffer'
import type { SeedResult } from './seed'
import type { DiskCosts } from './figures/disk'
import type { WrkBinary } from './wrk'
import type { ValgrindBinary } from './figures/callgrind'

export interface FigureResult {
  key: string
  /** What is measured, as the issue names it. */
  figure: string
  /** What it is compared with, measured in the same invocation. */
  baselineLabel: string
  unit: string
  coffer: number | null
  baseline: number | null
  /** coffer / baseline: the median of per-pair ratios, or the figure's own ratio. */
  ratio: number | null
  target: string
  /** null: report only, or the baseline could not be measured. */
  met: boolean | null
  /** How to read `coffer` when it is not a plain value (e.g. several numbers). */
  cofferText?: string
  baselineText?: string
  note?: string
  /**
   * Why the figure is not valid although it was measured (its baseline was generator-bound): the
   * table prints INVALID instead of a verdict.
   */
  invalid?: string
  details?: Record<string, unknown>
}

/** A row whose figure could not be measured, saying why (the table prints NOT MEASURED). */
export function notMeasured(row: Omit<FigureResult, 'coffer' | 'baseline' | 'ratio' | 'met'>, why: string): FigureResult {
  return { ...row, coffer: null, baseline: null, ratio: null, met: null, note: `NOT MEASURED: ${why}` }
}

export interface Dataset {
  dir: string
  seed: SeedResult
}

export interface BenchContext {
  /** Temp dir for this run: data dirs, nginx, logs. */
  dir: string
  /** Pairs (or repetitions) per figure; medians are taken over them. */
  runs: number
  /** Seconds per load run for the figures the issue does not fix. */
  loadSeconds: number
  /** Seconds per `GET /api/v1/files/:id` load run (the issue says 10). */
  readSeconds: number
  datasets: { small: Dataset; large: Dataset; empty: Dataset }
  nginx: NginxBinary
  /** The load generator of the req/s figures. */
  wrk: WrkBinary
  shipped: CofferCommand & { note: string }
  /** valgrind and callgrind_control, for the instruction counts. */
  valgrind: ValgrindBinary
  /** Requests of warm-up, then counted, per server under callgrind. */
  callgrindRequests: { warmup: number; measured: number }
  /** Other builds of Coffer (dist/coffer.cjs files) whose instructions per request are counted too. */
  againstBundles: string[]
  /** What fsync and SHA-256 cost on this machine, measured before the figures. */
  disk: DiskCosts
  log(line: string): void
}
