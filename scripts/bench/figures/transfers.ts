/** Content transfers against nginx on the same disk: one large file each way, many small ones. */
import fs from 'node:fs'
import path from 'node:path'
import { auth, handshakeBody, pngBytes, startCoffer, uniqueCopy, upload } from '../coffer'
import { request } from '../http'
import { generatorBound, idsFile, templateFile, wrk, type WrkResult } from '../wrk'
import { startNginx, type Nginx } from '../nginx'
import { freePort, startProc } from '../processes'
import { spawn } from 'node:child_process'
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
    figure: 'one 100 MiB PUT vs dd conv=fsync, MB/s',
    baselineLabel: '`dd if=<file> of=<file> bs=1M conv=fsync` of the same bytes, same disk',
    unit: 'MB/s',
    target: '≥ 0.7×',
    min: 0.7,
  },
  largePutNginx: {
    key: 'put-100mib-nginx',
    figure: 'one 100 MiB PUT vs nginx WebDAV, MB/s',
    baselineLabel: 'the same bytes PUT to nginx WebDAV, same disk (no hash, no fsync)',
    unit: 'MB/s',
    target: 'reference',
    min: null,
  },
  smallPut: {
    key: 'put-4kib',
    figure: '4 KiB uploads/s (handshake + PUT, wrk c=16)',
    baselineLabel: 'nginx WebDAV PUT of 4 KiB files, c=16',
    unit: 'uploads/s',
    target: '≥ 0.5×',
    min: 0.5,
  },
  largeGet: { key: 'get-100mib', figure: 'one 100 MiB GET, MB/s', baselineLabel: 'nginx serving the same file', unit: 'MB/s', target: '≥ 0.8×', min: 0.8 },
  smallGet: {
    key: 'get-4kib',
    figure: '4 KiB downloads/s (wrk c=32)',
    baselineLabel: 'nginx serving the same files',
    unit: 'req/s',
    target: '≥ 0.5×',
    min: 0.5,
  },
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
      // The baseline: the disk's own durable sequential write of the same bytes, read
      // from a file in the page cache (dd's reads cost next to nothing) into a new file beside it.
      const ddSource = path.join(ctx.dir, 'dd-source.png')
      fs.writeFileSync(ddSource, uniqueCopy(template))
      const ddOnce = async () => {
        const target = path.join(ctx.dir, `dd-target-${++n}.png`)
        const started = performance.now()
        await runDd(['if=' + ddSource, 'of=' + target, 'bs=1M', 'conv=fsync'])
        const ms = performance.now() - started
        fs.rmSync(target)
        return mbps(LARGE, ms)
      }
      const [ddPut, nginxPut, cofferPut, refDurable, refHash] = await interleaved(ctx.runs, [
        ddOnce,
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
      fs.rmSync(ddSource)
      const put = summarize(nginxPut!, cofferPut!)
      const vsDd = summarize(ddPut!, cofferPut!)
      const durable = median(refDurable!)
      const { sha256For100MiBMs: hash, fsync100MiBMs: flush } = ctx.disk
      out.push(
        result(SPECS.largePut, vsDd, {
          note:
            `dd writes the file and fsyncs it once at the end, reading from the page cache; Coffer also receives it over ` +
            `HTTP, hashes it (SHA-256 of 100 MiB: ${hash.toFixed(0)} ms here) and commits its row`,
          details: { runs: vsDd },
        }),
        result(SPECS.largePutNginx, put, {
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

async function smallUploads(ctx: BenchContext, base: string, key: string, nginx: Nginx): Promise<FigureResult> {
  if ('unavailable' in ctx.wrk) return unavailable(SPECS.smallPut, `wrk: ${ctx.wrk.unavailable}`)
  const bin = ctx.wrk.path
  let round = 0
  const nginxRuns: WrkResult[] = []
  // A fresh random template per run: wrk makes each body unique within its run, and content a
  // previous run stored would be deduplicated by Coffer (and overwritten, not created, by nginx).
  const template = () => templateFile(ctx.dir, `small-put-${++round}`, pngBytes(SMALL))
  const nginxRun = async (seconds: number) => {
    const r = await wrk({ bin, dir: ctx.dir, url: nginx.url, script: 'uniquePut', args: [template(), `/dav/small/${round}-`], connections: 16, seconds })
    nginxRuns.push(r)
    return r.rps
  }
  const cofferRun = async (seconds: number) =>
    (await wrk({ bin, dir: ctx.dir, url: base, script: 'twoStepUpload', args: [key, template(), handshakeBody(SMALL).toString()], connections: 16, seconds }))
      .rps
  await nginxRun(1)
  await cofferRun(1)
  nginxRuns.length = 0
  const r = await paired(
    ctx.runs,
    () => nginxRun(ctx.loadSeconds),
    () => cofferRun(ctx.loadSeconds),
  )
  const invalid = generatorBound(nginxRuns)
  const fsyncs = ctx.disk.smallFileFsyncsPerSecond
  return result(SPECS.smallPut, r, {
    note:
      `nginx makes no durable write; a 4 KiB Coffer upload makes none of its own either: its content is kept inline in ` +
      `SQLite (up to 64 KiB) and written by the transaction that completes the file, whose WAL flush is shared with the ` +
      `uploads settling at the same time (group commit), as is the handshake's. This disk completes ${fsyncs.toFixed(0)} ` +
      `durable 4 KiB writes/s with 16 at once (one alone: ${ctx.disk.smallFileFsyncMs.toFixed(2)} ms); a file per blob ` +
      `(3 of them per upload) would cap uploads at ${(fsyncs / 3).toFixed(0)}/s, ${(fsyncs / 3 / r.baseline).toFixed(2)}x nginx`,
    invalid,
    ...(invalid ? { met: null } : {}),
    details: { runs: r, seconds: ctx.loadSeconds, generatorCpuShare: nginxRuns.map((x) => x.generatorCpuShare) },
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
  if ('unavailable' in ctx.wrk) return unavailable(SPECS.smallGet, `wrk: ${ctx.wrk.unavailable}`)
  const bin = ctx.wrk.path
  const list = idsFile(ctx.dir, 'small-get', ids)
  const nginxRuns: WrkResult[] = []
  const run = async (url: string, args: string[], seconds: number) =>
    await wrk({ bin, dir: ctx.dir, url, script: 'randomGet', args: [list, ...args], connections: 32, seconds })
  const nginxRun = async (s: number) => {
    const r = await run(nginx.url, ['/files/small/', '.png'], s)
    nginxRuns.push(r)
    return r.rps
  }
  const cofferRun = async (s: number) => (await run(base, ['/api/v1/files/', '/download', auth(key).authorization], s)).rps
  await nginxRun(1)
  await cofferRun(1)
  const r = await paired(
    ctx.runs,
    () => nginxRun(ctx.loadSeconds),
    () => cofferRun(ctx.loadSeconds),
  )
  const invalid = generatorBound(nginxRuns.slice(1))
  return result(SPECS.smallGet, r, {
    invalid,
    ...(invalid ? { met: null } : {}),
    details: { runs: r, seconds: ctx.loadSeconds, files: ids.length, generatorCpuShare: nginxRuns.map((x) => x.generatorCpuShare) },
  })
}

/** Runs Debian's dd (coreutils), failing on a non-zero exit. */
function runDd(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('dd', args, { stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    child.stderr.on('data', (d: Buffer) => (err += d.toString()))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`dd ${args.join(' ')}: exit ${code}: ${err.trim()}`))))
  })
}
