/** Peak resident memory while four 100 MiB uploads stream at once. */
import path from 'node:path'
import { pngBytes, handshake, startCoffer } from '../coffer'
import { request } from '../http'
import { peakRssBytes, resetPeakRss, rssBytes } from '../processes'
import { seedDataset } from '../datasets'
import type { BenchContext, FigureResult } from '../figure'

const MIB = 1024 * 1024
const MB = 1e6

export async function peakRss(ctx: BenchContext): Promise<FigureResult> {
  // A server of its own, so earlier load tests have not grown its heap.
  const dir = path.join(ctx.dir, 'rss')
  const { apiKey } = seedDataset(dir, 0).seed
  const coffer = await startCoffer(dir)
  try {
    const bodies = Array.from({ length: 4 }, () => pngBytes(100 * MIB))
    const putAll = async () => {
      // Handshakes first, so the four bodies really stream at the same time.
      const urls = await Promise.all(bodies.map(async (b) => coffer.url + (await handshake(coffer.url, apiKey, b.length)).presignedUrl))
      const answers = await Promise.all(urls.map((u, i) => request(u, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bodies[i]! })))
      for (const a of answers) if (a.status !== 200) throw new Error(`PUT: ${a.status} ${a.body.toString().slice(0, 200)}`)
      for (const b of bodies) b.writeDoubleBE(Math.random(), 8) // new content for the next run
    }
    // Warm up (JIT, first blob directories), then measure.
    await putAll()
    const idle = rssBytes(coffer.pid)
    const peaks: number[] = []
    let kernelPeak = true
    for (let r = 0; r < ctx.runs; r++) {
      kernelPeak = resetPeakRss(coffer.pid) && kernelPeak
      let polled = rssBytes(coffer.pid)
      const timer = setInterval(() => (polled = Math.max(polled, rssBytes(coffer.pid))), 5)
      await putAll()
      clearInterval(timer)
      peaks.push(Math.max(polled, kernelPeak ? peakRssBytes(coffer.pid) : 0))
    }
    const worst = Math.max(...peaks)
    return {
      key: 'rss-4x100mib',
      figure: 'peak RSS during 4 concurrent 100 MiB uploads',
      baselineLabel: '—',
      unit: 'MB',
      coffer: worst / MB,
      baseline: null,
      ratio: null,
      target: '< 200 MB',
      met: worst < 200 * MB,
      note: `worst of ${peaks.length} runs (${peaks.map((p) => (p / MB).toFixed(0)).join(', ')} MB); ${(idle / MB).toFixed(0)} MB before the uploads; ${kernelPeak ? 'kernel peak (VmHWM, reset per run) and 5 ms polling' : '5 ms polling of VmRSS'}`,
      details: { peaksBytes: peaks, idleBytes: idle },
    }
  } finally {
    await coffer.stop()
  }
}
