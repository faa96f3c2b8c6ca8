/** Content transfers against nginx on the same disk: one large file each way, many small ones. */
import fs from 'node:fs'
import path from 'node:path'
import { auth, handshakeBody, pngBytes, startCoffer, uniqueCopy, upload } from '../coffer'
import { load, request } from '../http'
import { startNginx, type Nginx } from '../nginx'
import { freePort, startProc } from '../processes'
import { median, paired } from '../stats'
import type { BenchContext, FigureResult } from '../figure'

const MIB = 1024 * 1024
const LARGE = 100 * MIB
const SMALL = 4096
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000)

type Spec = Omit<FigureResult, 'coffer' | 'baseline' | 'ratio' | 'met'> & { min: number | null }

const SPECS = {
  largePut: { key: 'put-100mib', figure: 'one 100 MiB PUT, MB/s', baselineLabel: 'the same bytes PUT to nginx WebDAV, same disk', unit: 'MB/s', target: '≥ 0.7×', min: 0.7 },
  smallPut: { key: 'put-4kib', figure: '4 KiB uploads/s (handshake + PUT, c=16)', baselineLabel: 'nginx WebDAV PUT of 4 KiB files, c=16', unit: 'uploads/s', target: 'report; aim ≥ 0.3×', min: null },
  largeGet: { key: 'get-100mib', figure: 'one 100 MiB GET, MB/s', baselineLabel: 'nginx serving the same file', unit: 'MB/s', target: '≥ 0.8×', min: 0.8 },
  smallGet: { key: 'get-4kib', figure: '4 KiB downloads/s (c=32)', baselineLabel: 'nginx serving the same files', unit: 'req/s', target: '≥ 0.5×', min: 0.5 },
} satisfies Record<string, Spec>

function unavailable(spec: Spec, why: string): FigureResult {
  const { min: _min, ...rest } = spec
  return { ...rest, coffer: null, baseline: null, ratio: null, met: null, note: `not measured: ${why}` }
}

function result(spec: Spec, r: { subject: number; baseline: number; ratio: number }, extra: Partial<FigureResult> = {}): FigureResult {
  const { min, ...rest } = spec
  return { ...rest, coffer: r.subject, baseline: r.baseline, ratio: r.ratio, met: min === null ? null : r.ratio >= min, ...extra }
}

export async function transfers(ctx: BenchContext): Promise<FigureResult[]> {
  const specs = Object.values(SPECS)
  const bin = ctx.nginx
  if ('unavailable' in bin) return specs.map((s) => unavailable(s, bin.unavailable))
  const nginx = await startNginx(bin.path, path.join(ctx.dir, 'nginx'))
  const { empty } = ctx.datasets
  const coffer = await startCoffer(empty.dir)
  const key = empty.seed.apiKey
  try {
    const out: FigureResult[] = []
    const template = pngBytes(LARGE)

    ctx.log('  one 100 MiB PUT')
    let lastUpload: { fileId: string; bytes: Buffer } | undefined
    let n = 0
    const put = await paired(
      ctx.runs,
      async () => {
        const bytes = uniqueCopy(template)
        const res = await request(`${nginx.url}/dav/large/${++n}.png`, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bytes })
        if (res.status !== 201) throw new Error(`nginx PUT: ${res.status}`)
        return mbps(LARGE, res.ms)
      },
      async () => {
        const bytes = uniqueCopy(template)
        const { fileId, putMs } = await upload(coffer.url, key, bytes)
        lastUpload = { fileId, bytes }
        return mbps(LARGE, putMs)
      },
    )
    const sink = await hashSinkMbps(ctx, template)
    const { sha256For100MiBMs: hash, fsync100MiBMs: flush } = ctx.disk
    out.push(
      result(SPECS.largePut, put, {
        note:
          `Coffer hashes the stream (SHA-256 of 100 MiB takes ${hash.toFixed(0)} ms on this CPU) and fsyncs it ` +
          `(${flush.toFixed(0)} ms); nginx does neither. A bare Node server that only receives and hashes, ` +
          `no disk, reaches ${sink.toFixed(0)} MB/s here (${(sink / put.baseline).toFixed(2)}x nginx)`,
        details: { runs: put, hashOnlyNodeServerMBps: sink },
      }),
    )

    ctx.log('  one 100 MiB GET')
    fs.mkdirSync(path.join(nginx.root, 'files'), { recursive: true })
    fs.writeFileSync(path.join(nginx.root, 'files', 'large.png'), lastUpload!.bytes)
    const getOnce = async (url: string, headers: Record<string, string>) => {
      const res = await request(url, { headers, discard: true })
      if (res.status !== 200 || res.bytes !== LARGE) throw new Error(`GET ${url}: ${res.status}, ${res.bytes} bytes`)
      return mbps(LARGE, res.ms)
    }
    const largeUrl = `${coffer.url}/api/v1/files/${lastUpload!.fileId}/download`
    // Both read from the page cache in the measured runs.
    await getOnce(`${nginx.url}/files/large.png`, {})
    await getOnce(largeUrl, auth(key))
    const get = await paired(
      ctx.runs,
      () => getOnce(`${nginx.url}/files/large.png`, {}),
      () => getOnce(largeUrl, auth(key)),
    )
    out.push(result(SPECS.largeGet, get, { details: { runs: get } }))

    ctx.log('  4 KiB uploads, c=16')
    out.push(await smallUploads(ctx, coffer.url, key, nginx))
    ctx.log('  4 KiB downloads, c=32')
    out.push(await smallDownloads(ctx, coffer.url, key, nginx))
    return out
  } finally {
    await Promise.all([coffer.stop(), nginx.stop()])
  }
}

/** The median MB/s of a bare Node server that only hashes PUT bodies (see hash-sink.ts). */
async function hashSinkMbps(ctx: BenchContext, template: Buffer): Promise<number> {
  const port = await freePort()
  const sink = await startProc(process.execPath, [path.join(__dirname, 'hash-sink.cjs'), String(port)], {
    port,
    healthPath: '/',
    logFile: path.join(ctx.dir, 'hash-sink.log'),
  })
  try {
    const runs: number[] = []
    for (let i = 0; i <= ctx.runs; i++) {
      const res = await request(`${sink.url}/upload`, { method: 'PUT', body: uniqueCopy(template) })
      if (res.status !== 200) throw new Error(`hash sink: ${res.status}`)
      if (i > 0) runs.push(mbps(LARGE, res.ms)) // the first warms up
    }
    return median(runs)
  } finally {
    await sink.stop()
  }
}

interface UploadContext {
  presignedUrl: string
}

async function smallUploads(ctx: BenchContext, base: string, key: string, nginx: Nginx): Promise<FigureResult> {
  const template = pngBytes(SMALL)
  let n = 0
  const nginxRun = async (seconds: number) =>
    (
      await load({
        url: nginx.url,
        connections: 16,
        duration: seconds,
        requests: [{ method: 'PUT', setupRequest: (req) => ({ ...req, path: `/dav/small/${++n}.png`, headers: { 'content-type': 'image/png' }, body: uniqueCopy(template) }) }],
      })
    ).rps
  const cofferRun = async (seconds: number) => {
    let uploads = 0
    const r = await load({
      url: base,
      connections: 16,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          path: '/api/v1/upload/request',
          headers: { ...auth(key), 'content-type': 'application/json' },
          body: handshakeBody(SMALL),
          // autocannon keeps one context per connection: the PUT below goes to this handshake's URL.
          onResponse: (_status, body, context) => {
            ;(context as UploadContext).presignedUrl = (JSON.parse(body) as UploadContext).presignedUrl
          },
        },
        {
          method: 'PUT',
          setupRequest: (req, context) => ({
            ...req,
            path: (context as UploadContext).presignedUrl,
            headers: { 'content-type': 'image/png' },
            body: uniqueCopy(template),
          }),
          onResponse: (status) => {
            if (status === 200) uploads++
          },
        },
      ],
    })
    return uploads / r.seconds
  }
  await nginxRun(1)
  await cofferRun(1)
  const r = await paired(ctx.runs, () => nginxRun(ctx.loadSeconds), () => cofferRun(ctx.loadSeconds))
  const fsyncs = ctx.disk.smallFileFsyncsPerSecond
  return result(SPECS.smallPut, r, {
    note:
      `every Coffer upload makes 5 durable writes, nginx's none: the handshake's SQLite commit, the blob file, its new ` +
      `directory, the directory entry, the upload's SQLite commit (the two commits fsync on the event loop: synchronous=FULL). ` +
      `A durable 4 KiB file takes ${ctx.disk.smallFileFsyncMs.toFixed(2)} ms here; ${fsyncs.toFixed(0)}/s complete with 16 at once`,
    details: { runs: r, seconds: ctx.loadSeconds },
  })
}

async function smallDownloads(ctx: BenchContext, base: string, key: string, nginx: Nginx): Promise<FigureResult> {
  // The same 256 files on both sides: uploaded to Coffer, written to nginx's root.
  const ids: string[] = []
  fs.mkdirSync(path.join(nginx.root, 'files', 'small'), { recursive: true })
  for (let i = 0; i < 256; i++) {
    const bytes = pngBytes(SMALL)
    const { fileId } = await upload(base, key, bytes)
    fs.writeFileSync(path.join(nginx.root, 'files', 'small', `${fileId}.png`), bytes)
    ids.push(fileId)
  }
  const pick = () => ids[Math.floor(Math.random() * ids.length)]
  const run = async (url: string, pathOf: (id: string) => string, headers: Record<string, string>, seconds: number) =>
    (await load({ url, connections: 32, duration: seconds, headers, requests: [{ setupRequest: (req) => ({ ...req, path: pathOf(pick()!) }) }] })).rps
  const nginxRun = (s: number) => run(nginx.url, (id) => `/files/small/${id}.png`, {}, s)
  const cofferRun = (s: number) => run(base, (id) => `/api/v1/files/${id}/download`, auth(key), s)
  await nginxRun(1)
  await cofferRun(1)
  const r = await paired(ctx.runs, () => nginxRun(ctx.loadSeconds), () => cofferRun(ctx.loadSeconds))
  return result(SPECS.smallGet, r, { details: { runs: r, seconds: ctx.loadSeconds, files: ids.length } })
}
