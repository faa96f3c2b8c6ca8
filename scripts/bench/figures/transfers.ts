/** Content transfers against nginx on the same disk: one large file each way, many small ones. */
import fs from 'node:fs'
import path from 'node:path'
import { auth, handshakeBody, pngBytes, startCoffer, uniqueCopy, upload } from '../coffer'
import { load, request } from '../http'
import { startNginx, type Nginx } from '../nginx'
import { freePort, startProc } from '../processes'
import { interleaved, median, paired, summarize } from '../stats'
import type { BenchContext, FigureResult } from '../figure'

const MIB = 1024 * 1024
const LARGE = 100 * MIB
const SMALL = 4096
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000)

type Spec = Omit<FigureResult, 'coffer' | 'baseline' | 'ratio' | 'met'> & { min: number | null }

const SPECS = {
  largePut: {
    key: 'put-100mib',
    figure: 'one 100 MiB PUT, MB/s',
    baselineLabel: 'the same bytes PUT to nginx WebDAV, same disk',
    unit: 'MB/s',
    target: '≥ 0.7×',
    min: 0.7,
  },
  smallPut: {
    key: 'put-4kib',
    figure: '4 KiB uploads/s (handshake + PUT, c=16)',
    baselineLabel: 'nginx WebDAV PUT of 4 KiB files, c=16',
    unit: 'uploads/s',
    target: 'report; aim ≥ 0.3×',
    min: null,
  },
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

    // Reference points: a bare Node server doing only the essential work (see node-reference.ts).
    const refDir = path.join(ctx.dir, 'node-reference')
    fs.mkdirSync(refDir, { recursive: true })
    const refPort = await freePort()
    const ref = await startProc(process.execPath, [path.join(__dirname, 'node-reference.cjs'), String(refPort), refDir], {
      port: refPort,
      healthPath: '/',
      logFile: path.join(ctx.dir, 'node-reference.log'),
    })
    try {
      ctx.log('  one 100 MiB PUT')
      let lastUpload: { fileId: string; bytes: Buffer } | undefined
      let n = 0
      const putTo = async (url: string, expect: number) => {
        const res = await request(url, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: uniqueCopy(template) })
        if (res.status !== expect) throw new Error(`PUT ${url}: ${res.status} ${res.body.toString().slice(0, 200)}`)
        return mbps(LARGE, res.ms)
      }
      const [nginxPut, cofferPut, refDurable, refHash] = await interleaved(ctx.runs, [
        () => putTo(`${nginx.url}/dav/large/${++n}.png`, 201),
        async () => {
          const bytes = uniqueCopy(template)
          const { fileId, putMs } = await upload(coffer.url, key, bytes)
          lastUpload = { fileId, bytes }
          return mbps(LARGE, putMs)
        },
        () => putTo(`${ref.url}/durable`, 200),
        () => putTo(`${ref.url}/hash`, 200),
      ])
      const put = summarize(nginxPut!, cofferPut!)
      const durable = median(refDurable!)
      const { sha256For100MiBMs: hash, fsync100MiBMs: flush } = ctx.disk
      out.push(
        result(SPECS.largePut, put, {
          note:
            `nginx neither hashes nor fsyncs; Coffer must (SHA-256 of 100 MiB takes ${hash.toFixed(0)} ms on this CPU, the fsync ` +
            `${flush.toFixed(0)} ms). A bare Node server doing only that (SHA-256 while writing, fsync; no framework, no database) ` +
            `reaches ${durable.toFixed(0)} MB/s here, ${(durable / put.baseline).toFixed(2)}x nginx; Coffer reaches ` +
            `${(put.subject / durable).toFixed(2)}x of that bare server. Hashing alone, without the disk: ${median(refHash!).toFixed(0)} MB/s`,
          details: { runs: put, nodeReference: { durableMBps: refDurable, hashOnlyMBps: refHash } },
        }),
      )

      ctx.log('  one 100 MiB GET')
      fs.mkdirSync(path.join(nginx.root, 'files'), { recursive: true })
      fs.writeFileSync(path.join(nginx.root, 'files', 'large.png'), lastUpload!.bytes)
      fs.writeFileSync(path.join(refDir, 'large.png'), lastUpload!.bytes)
      const getOnce = async (url: string, headers: Record<string, string>) => {
        const res = await request(url, { headers, discard: true })
        if (res.status !== 200 || res.bytes !== LARGE) throw new Error(`GET ${url}: ${res.status}, ${res.bytes} bytes`)
        return mbps(LARGE, res.ms)
      }
      const largeUrl = `${coffer.url}/api/v1/files/${lastUpload!.fileId}/download`
      const gets = [() => getOnce(`${nginx.url}/files/large.png`, {}), () => getOnce(largeUrl, auth(key)), () => getOnce(`${ref.url}/file/large.png`, {})]
      for (const g of gets) await g() // all three read from the page cache in the measured runs
      const [nginxGet, cofferGet, refGet] = await interleaved(ctx.runs, gets)
      const get = summarize(nginxGet!, cofferGet!)
      const stream = median(refGet!)
      out.push(
        result(SPECS.largeGet, get, {
          note:
            `nginx sends the file with sendfile(2), from the page cache straight to the socket; Node has no sendfile and ` +
            `copies through user space. A bare Node server streaming the file (fs.createReadStream, no framework) reaches ` +
            `${stream.toFixed(0)} MB/s here, ${(stream / get.baseline).toFixed(2)}x nginx; Coffer reaches ${(get.subject / stream).toFixed(2)}x of it`,
          details: { runs: get, nodeReferenceMBps: refGet },
        }),
      )
    } finally {
      await ref.stop()
    }

    ctx.log('  4 KiB uploads, c=16')
    out.push(await smallUploads(ctx, coffer.url, key, nginx))
    ctx.log('  4 KiB downloads, c=32')
    out.push(await smallDownloads(ctx, coffer.url, key, nginx))
    return out
  } finally {
    await Promise.all([coffer.stop(), nginx.stop()])
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
        requests: [
          {
            method: 'PUT',
            setupRequest: (req) => ({ ...req, path: `/dav/small/${++n}.png`, headers: { 'content-type': 'image/png' }, body: uniqueCopy(template) }),
          },
        ],
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
  const r = await paired(
    ctx.runs,
    () => nginxRun(ctx.loadSeconds),
    () => cofferRun(ctx.loadSeconds),
  )
  const fsyncs = ctx.disk.smallFileFsyncsPerSecond
  const ceiling = fsyncs / 5
  return result(SPECS.smallPut, r, {
    note:
      `every Coffer upload makes 5 durable writes, nginx's none: the handshake's SQLite commit, the blob file, its new ` +
      `directory, the directory entry, the upload's SQLite commit (the two commits fsync on the event loop: synchronous=FULL). ` +
      `This disk completes ${fsyncs.toFixed(0)} durable 4 KiB writes/s with 16 at once (one alone: ${ctx.disk.smallFileFsyncMs.toFixed(2)} ms), ` +
      `so 5 per upload cap any implementation at ${ceiling.toFixed(0)} uploads/s, ${(ceiling / r.baseline).toFixed(2)}x nginx; ` +
      `Coffer reaches ${(r.subject / ceiling).toFixed(2)}x of that ceiling`,
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
  const r = await paired(
    ctx.runs,
    () => nginxRun(ctx.loadSeconds),
    () => cofferRun(ctx.loadSeconds),
  )
  return result(SPECS.smallGet, r, { details: { runs: r, seconds: ctx.loadSeconds, files: ids.length } })
}
