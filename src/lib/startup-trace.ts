/**
 * Where a start's time goes (#28: the CI fixture's first signed S3 answer under 150 ms). With
 * COFFER_STARTUP_TRACE=1, each phase of a start records the wall time since the process began
 * (performance.now(), whose origin is the process's start) and the process's CPU time so far;
 * `coffer serve` writes them as one JSON line on stderr once it is ready. Off (the default) a mark
 * is one comparison: nothing reaches the production logs.
 */
const enabled = process.env.COFFER_STARTUP_TRACE === '1'
const marks: { phase: string; ms: number; cpuMs: number }[] = []

/** Records that `phase` has just ended. */
export function markStartup(phase: string): void {
  if (!enabled) return
  const cpu = process.cpuUsage()
  marks.push({ phase, ms: round(performance.now()), cpuMs: round((cpu.user + cpu.system) / 1000) })
}

/** The marks as one line for stderr, or nothing when tracing is off. */
export function startupTraceLine(): string | undefined {
  if (!enabled) return undefined
  const mem = process.memoryUsage()
  const MB = 1e6
  return JSON.stringify({
    startupTrace: marks,
    memory: { rss: round(mem.rss / MB), heapUsed: round(mem.heapUsed / MB), heapTotal: round(mem.heapTotal / MB), external: round(mem.external / MB) },
  })
}

const round = (n: number) => Math.round(n * 10) / 10
