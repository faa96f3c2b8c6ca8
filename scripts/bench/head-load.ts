/** HEAD load runs with head-client.ts in its own process, with the generator's CPU share read as wrk.ts reads wrk's. */
import path from 'node:path'
import { runSampled, type WrkResult } from './wrk'

/** `connections` keep-alive connections HEADing random lines of `signedFile` for `seconds`; fails on any answer but 200. */
export async function headLoad(run: { url: string; signedFile: string; connections: number; seconds: number }): Promise<WrkResult> {
  const u = new URL(run.url)
  const args = [path.join(__dirname, 'head-client.cjs'), u.hostname, u.port, String(run.seconds), String(run.connections), run.signedFile]
  const { code, out, samples } = await runSampled(process.execPath, args)
  const line = /^\{.*\}$/m.exec(out)?.[0]
  if (code !== 0 || !line) throw new Error(`head-client ${args.slice(1).join(' ')} exited with ${code}: ${out.slice(-500)}`)
  const r = JSON.parse(line) as { requests: number; good: number; bad: number; seconds: number }
  if (r.bad > 0 || r.good === 0) throw new Error(`HEAD load against ${run.url}: ${r.bad} unexpected answers, ${r.good} 200s in ${r.requests} requests`)
  // Skip start-up (Node's own): the samples from 1 s in.
  const first = samples.find((s) => s.wall - samples[0]!.wall >= 1000) ?? samples[0]
  const last = samples.at(-1)
  const share = first && last && last.wall > first.wall ? (last.cpu - first.cpu) / (last.wall - first.wall) : Number.NaN
  return { rps: r.good / r.seconds, requests: r.requests, good: r.good, seconds: r.seconds, p50Ms: Number.NaN, p99Ms: Number.NaN, generatorCpuShare: share }
}
