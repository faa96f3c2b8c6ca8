/** Cold start: spawn to the first 200 from /health, on a data dir holding 100k files. */
import path from 'node:path'
import { startCoffer } from '../coffer'
import { freePort, startProc } from '../processes'
import { paired } from '../stats'
import type { BenchContext, FigureResult } from '../figure'

/** The smallest Node server: how long the runtime itself takes to listen and answer. */
const NODE_LISTEN = `require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.argv[1]), '127.0.0.1')`

export async function coldStart(ctx: BenchContext): Promise<FigureResult> {
  const { small } = ctx.datasets
  const baseline = async () => {
    const port = await freePort()
    const p = await startProc(process.execPath, ['-e', NODE_LISTEN, String(port)], { port, healthPath: '/', logFile: path.join(ctx.dir, 'node-e.log') })
    await p.stop()
    return p.startMs
  }
  const subject = async () => {
    const c = await startCoffer(small.dir, ctx.shipped)
    const code = await c.stop()
    if (code !== 0) throw new Error(`coffer exited with ${code} after SIGTERM`)
    return c.startMs
  }
  // The first start of the single executable unpacks its SQLite addon into the data dir: not a cold start of a deployed server.
  await subject()
  const r = await paired(Math.max(ctx.runs, 5), baseline, subject)
  return {
    key: 'cold-start',
    figure: `${ctx.shipped.label} cold start to healthy, 100k files`,
    baselineLabel: '`node -e` that listens on a port',
    unit: 'ms',
    coffer: r.subject,
    baseline: r.baseline,
    ratio: r.ratio,
    target: '< 300 ms absolute; ratio reported',
    met: r.subject < 300,
    note: ctx.shipped.note,
    details: { runs: r, files: small.seed.files },
  }
}
