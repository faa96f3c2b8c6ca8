/** Small statistics and formatting helpers for the bench. */

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN
  const s = [...values].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/** The p-th percentile (0–100) by nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const s = [...values].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!
}

/** Runs `subject` and `baseline` alternately `runs` times; ratios are taken within each pair. */
export async function paired(runs: number, baseline: () => Promise<number>, subject: () => Promise<number>): Promise<Paired> {
  const b: number[] = []
  const s: number[] = []
  for (let i = 0; i < runs; i++) {
    // Alternate which goes first, so a drift in machine load does not favour either side.
    if (i % 2 === 0) {
      b.push(await baseline())
      s.push(await subject())
    } else {
      s.push(await subject())
      b.push(await baseline())
    }
  }
  return summarize(b, s)
}

/**
 * Runs the measurements in turn `runs` times, rotating which goes first; returns each one's values.
 * For a baseline, a subject and reference points measured under the same conditions.
 */
export async function interleaved(runs: number, measures: (() => Promise<number>)[]): Promise<number[][]> {
  const out: number[][] = measures.map(() => [])
  for (let i = 0; i < runs; i++) {
    for (let k = 0; k < measures.length; k++) {
      const j = (i + k) % measures.length
      out[j]!.push(await measures[j]!())
    }
  }
  return out
}

export interface Paired {
  baseline: number
  subject: number
  /** Median of the per-pair ratios subject / baseline. */
  ratio: number
  baselineRuns: number[]
  subjectRuns: number[]
}

export function summarize(baselineRuns: number[], subjectRuns: number[]): Paired {
  return {
    baseline: median(baselineRuns),
    subject: median(subjectRuns),
    ratio: median(subjectRuns.map((v, i) => v / baselineRuns[i]!)),
    baselineRuns,
    subjectRuns,
  }
}

/** 3 significant digits, without exponent notation for the magnitudes the bench prints. */
export function fmt(n: number | undefined | null, digits = 3): string {
  if (n === undefined || n === null || Number.isNaN(n)) return '—'
  if (Math.abs(n) >= 10 ** digits) return Math.round(n).toLocaleString('en-US')
  return Number(n.toPrecision(digits)).toString()
}

export function markdownTable(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n')
}
