/**
 * S3 writes against baselines outside Coffer, measured in the same run (#29):
 * - 4 KiB PutObject/s at c=16, durable, beside nginx's WebDAV PUT of 4 KiB (no fsync) and beside
 *   s3rver (npm; no fsync), the same wrk script signing for both S3 servers;
 * - one 100 MiB PutObject beside the machine's single-thread MD5 rate (the ETag's MD5 is sequential);
 * - a 1 GiB multipart upload, 8 MiB parts, 8 in flight (as `aws s3 cp` does), beside
 *   `dd bs=1M conv=fsync` of 1 GiB on the same disk;
 * - the server's RSS after those loads, and some seconds after they stop.
 * Every S3 server runs alone while it is measured; the rounds alternate which goes first.
 *
 * Beside the 4 KiB PutObject, in the same rotation and with the same signed wrk script as Coffer,
 * three bare Fastify 5 servers (bare-fastify-put.ts) say what the stack allows: a PUT answered
 * with its ETag without the disk, with an fdatasync per request, and with a group flush shared
 * by whatever arrives together. `--only s3-small-writes` runs that part alone.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import http from 'node:http'
import { createHash } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { pngBytes, ROOT, startCoffer, uniqueCopy, type Coffer } from '../coffer'
import { startNginx, type Nginx } from '../nginx'
import { cpuMs, freePort, rssBytes, startProc, type Proc } from '../processes'
import { interleaved, median, summarize } from '../stats'
import { encodePath, prepareSigned, sha256Hex, signHeaders, type Credentials } from '../s3-sign'
import { generatorBound, templateFile, wrk, type WrkResult } from '../wrk'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'
import { loadConfig } from '../../../src/config'
import { createCore } from '../../../src/core'

const MIB = 1024 * 1024
const SMALL = 4096
const LARGE = 100 * MIB
const MULTIPART = 1024 * MIB
const PART = 8 * MIB
const IN_FLIGHT = 8
/** Seconds after the last load at which RSS is read again: what stays resident once idle. */
const SETTLE_SECONDS = 15
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000)
/** More 4 KiB PutObjects a second than any server here can take: the keys signed per run. */
const PUTS_PER_SECOND_CAP = 8000
/** The bare servers' cap: the one that writes nothing answered more than 10,000/s here. */
const BARE_PUTS_PER_SECOND_CAP = 30_000

const ROWS = {
  nginx: {
    key: 's3-put-4kib-vs-nginx',
    figure: '4 KiB PutObject/s, c=16, durable',
    baselineLabel: 'nginx WebDAV PUT of 4 KiB (no fsync), c=16, wrk, same run',
    unit: 'req/s',
    target: '≥ 0.5× nginx',
  },
  s3rver: {
    key: 's3-put-4kib-vs-s3rver',
    figure: '4 KiB PutObject/s, c=16, durable',
    baselineLabel: 's3rver 3.7 (npm; no fsync), the same signed wrk script, same run',
    unit: 'req/s',
    target: '≥ 3× s3rver',
  },
  md5: {
    key: 's3-put-100mib-vs-md5',
    figure: 'one 100 MiB PutObject, MB/s',
    baselineLabel: "node's MD5 of 100 MiB in memory, one thread, same run",
    unit: 'MB/s',
    target: '≥ 0.8× MD5',
  },
  multipart: {
    key: 's3-multipart-1gib-vs-dd',
    figure: '1 GiB multipart upload (8 MiB parts, 8 in flight), MB/s',
    baselineLabel: 'dd bs=1M conv=fsync of 1 GiB, same disk, same run',
    unit: 'MB/s',
    target: '≥ 0.7× dd',
  },
  bareNone: {
    key: 's3-put-4kib-bare-none-vs-nginx',
    figure: 'reference: bare Fastify 5 PUT of 4 KiB, MD5 ETag, no disk, c=16',
    baselineLabel: 'nginx WebDAV PUT of 4 KiB (no fsync), same run',
    unit: 'req/s',
    target: 'report (what any server on this stack can reach)',
  },
  bareFsync: {
    key: 's3-put-4kib-bare-fsync-vs-nginx',
    figure: 'reference: bare Fastify 5 PUT of 4 KiB, a file and an fdatasync per request, c=16',
    baselineLabel: 'nginx WebDAV PUT of 4 KiB (no fsync), same run',
    unit: 'req/s',
    target: 'report',
  },
  bareGroup: {
    key: 's3-put-4kib-bare-group-vs-nginx',
    figure: 'reference: bare Fastify 5 PUT of 4 KiB, appended to a log, group fdatasync, c=16',
    baselineLabel: 'nginx WebDAV PUT of 4 KiB (no fsync), same run',
    unit: 'req/s',
    target: 'report (the durable minimum on this stack)',
  },
  vsBareGroup: {
    key: 's3-put-4kib-vs-bare-group',
    figure: '4 KiB PutObject/s, c=16, durable',
    baselineLabel: 'bare Fastify 5 PUT with a group fdatasync (no SigV4, log or metadata), same run',
    unit: 'req/s',
    target: 'report',
  },
  rss: {
    key: 's3-rss-after-load',
    figure: 'RSS after the S3 write loads (then idle)',
    baselineLabel: 'the same process idle, before the loads',
    unit: 'MB',
    target: '< 200 MB, and falling once idle',
  },
} as const

/** s3rver's fixed credentials (its README). */
const S3RVER_CREDS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', region: 'us-east-1' }

async function startS3rver(dir: string): Promise<Proc> {
  const bin = path.join(ROOT, 'node_modules', 's3rver', 'bin', 's3rver.js')
  if (!fs.existsSync(bin)) throw new Error('s3rver is not installed (npm ci installs it: a devDependency of the bench)')
  fs.mkdirSync(path.join(dir, 'data'), { recursive: true })
  const port = await freePort()
  return startProc(process.execPath, [bin, '-d', path.join(dir, 'data'), '-a', '127.0.0.1', '-p', String(port), '--silent', '--configure-bucket', 'bench'], {
    port,
    healthPath: '/bench',
    logFile: path.join(dir, 's3rver.log'),
  })
}

type BareMode = 'none' | 'fsync' | 'group'

/** A bare Fastify PUT server (bare-fastify-put.ts) in `mode`, its files under `dir`. */
async function startBarePut(mode: BareMode, dir: string): Promise<Proc> {
  fs.mkdirSync(dir, { recursive: true })
  const port = await freePort()
  return startProc(process.execPath, [path.join(__dirname, 'bare-fastify-put.cjs'), String(port), mode, dir], {
    port,
    healthPath: '/health',
    logFile: path.join(dir, '..', `bare-put-${mode}.log`),
  })
}

/** An S3 request signed with UNSIGNED-PAYLOAD (or the body's SHA-256), its answer checked. */
async function s3(
  base: string,
  creds: Credentials,
  method: string,
  p: string,
  body?: Buffer,
  opts: { signBody?: boolean; agent?: http.Agent } = {},
): Promise<{ status: number; body: Buffer; headers: http.IncomingHttpHeaders; ms: number }> {
  const host = base.replace('http://', '')
  const headers = signHeaders(creds, method, host, p, opts.signBody && body ? sha256Hex(body) : 'UNSIGNED-PAYLOAD')
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const req = http.request(
      `${base}${p}`,
      { method, headers: { ...headers, ...(body ? { 'content-length': body.length } : {}) }, agent: opts.agent ?? false },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const out = { status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers, ms: performance.now() - t0 }
          if (out.status !== 200) reject(new Error(`${method} ${p}: ${out.status} ${out.body.toString().slice(0, 300)}`))
          else resolve(out)
        })
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/** One multipart upload of `bytes` (PART-sized parts, IN_FLIGHT at once); returns its wall time in ms. */
async function multipartUpload(base: string, creds: Credentials, key: string, bytes: Buffer): Promise<{ ms: number; partsMs: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT })
  try {
    const t0 = performance.now()
    const created = await s3(base, creds, 'POST', `${key}?uploads`, undefined, { agent })
    const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(created.body.toString())?.[1]
    if (!uploadId) throw new Error(`CreateMultipartUpload: no UploadId in ${created.body.toString().slice(0, 200)}`)
    const count = Math.ceil(bytes.length / PART)
    const etags: string[] = []
    let next = 0
    const worker = async () => {
      for (let n = next++; n < count; n = next++) {
        const part = bytes.subarray(n * PART, Math.min(bytes.length, (n + 1) * PART))
        const r = await s3(base, creds, 'PUT', `${key}?partNumber=${n + 1}&uploadId=${encodeURIComponent(uploadId)}`, part, { agent })
        etags[n] = String(r.headers.etag)
      }
    }
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
    const partsMs = performance.now() - t0
    const xml = `<CompleteMultipartUpload>${etags.map((e, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${e}</ETag></Part>`).join('')}</CompleteMultipartUpload>`
    await s3(base, creds, 'POST', `${key}?uploadId=${encodeURIComponent(uploadId)}`, Buffer.from(xml), { agent })
    return { ms: performance.now() - t0, partsMs }
  } finally {
    agent.destroy()
  }
}

/** `dd if=src of=dst bs=1M conv=fsync`: MB/s of the bytes made durable, the source in the page cache. */
function ddOnce(src: string, dst: string, bytes: number): number {
  const t0 = performance.now()
  const r = spawnSync('dd', [`if=${src}`, `of=${dst}`, 'bs=1M', 'conv=fsync'], { encoding: 'utf8' })
  const ms = performance.now() - t0
  if (r.status !== 0) throw new Error(`dd: ${r.stderr}`)
  fs.rmSync(dst)
  return mbps(bytes, ms)
}

function md5Once(bytes: Buffer): number {
  const t0 = performance.now()
  createHash('md5').update(bytes).digest()
  return mbps(bytes.length, performance.now() - t0)
}

/** The 4 KiB PutObject and its baselines alone (`--only s3-small-writes`). */
export const s3SmallWriteFigures = (ctx: BenchContext) => s3WriteFigures(ctx, true)

export async function s3WriteFigures(ctx: BenchContext, smallOnly = false): Promise<FigureResult[]> {
  const dataDir = path.join(ctx.dir, 's3w-data')
  const core = createCore(loadConfig({}, { 'data-dir': dataDir }))
  let creds: Credentials
  try {
    const { tenant } = core.tenants.create({ name: 's3-writes', quotaBytes: 256 * 1024 ** 3 })
    core.workspaces.create({ ...tenant }, { name: 'bench', slug: 'bench' })
    const pair = core.s3Credentials.create(tenant.id)
    creds = { accessKeyId: pair.accessKeyId, secretAccessKey: pair.secretAccessKey, region: core.config.s3Region }
  } finally {
    core.close()
  }
  const out: FigureResult[] = []
  const coffer: Coffer = await startCoffer(dataDir)
  const idleRss = rssBytes(coffer.pid)
  let nginx: Nginx | undefined
  let s3rver: Proc | undefined
  let bare: Partial<Record<BareMode, Proc>> = {}
  try {
    // --- 4 KiB PutObject, c=16: Coffer, nginx and s3rver in turn, each alone while measured.
    if ('unavailable' in ctx.wrk) {
      const why = `wrk: ${ctx.wrk.unavailable}`
      out.push(...(['nginx', 's3rver', 'bareNone', 'bareFsync', 'bareGroup', 'vsBareGroup'] as const).map((k) => notMeasured(ROWS[k], why)))
    } else {
      const bin = ctx.wrk.path
      const nginxBin = 'unavailable' in ctx.nginx ? undefined : ctx.nginx.path
      if (nginxBin) nginx = await startNginx(nginxBin, path.join(ctx.dir, 's3w-nginx'))
      s3rver = await startS3rver(path.join(ctx.dir, 's3w-s3rver'))
      for (const mode of ['none', 'fsync', 'group'] as const) bare[mode] = await startBarePut(mode, path.join(ctx.dir, `s3w-bare-${mode}`))
      let round = 0
      const template = () => templateFile(ctx.dir, `s3w-small-${++round}`, pngBytes(SMALL))
      const s3Run =
        (base: string, c: Credentials, bucket: string, cap = PUTS_PER_SECOND_CAP) =>
        async (seconds: number) => {
          const r = ++round
          const count = cap * seconds
          const paths = Array.from({ length: count }, (_, i) => encodePath(`/${bucket}/small/${r}/${i}.bin`))
          const file = prepareSigned(path.join(ctx.dir, `s3w-put-${r}.signed`), c, 'PUT', base.replace('http://', ''), paths)
          return wrk({ bin, dir: ctx.dir, url: base, script: 'preparedS3', args: [file, 'PUT', template(), '1'], connections: 16, seconds })
        }
      type Name = 'coffer' | 's3rver' | 'nginx' | 'bareNone' | 'bareFsync' | 'bareGroup'
      // The bare servers get the very requests Coffer gets (signed, which they do not check).
      const runs: Partial<Record<Name, (seconds: number) => Promise<WrkResult>>> = {
        coffer: s3Run(coffer.s3Url, creds, 'bench'),
        s3rver: s3Run(s3rver.url, S3RVER_CREDS, 'bench'),
        bareNone: s3Run(bare.none!.url, creds, 'bench', BARE_PUTS_PER_SECOND_CAP),
        bareFsync: s3Run(bare.fsync!.url, creds, 'bench', BARE_PUTS_PER_SECOND_CAP),
        bareGroup: s3Run(bare.group!.url, creds, 'bench', BARE_PUTS_PER_SECOND_CAP),
      }
      if (nginx) {
        const url = nginx.url
        runs.nginx = (seconds: number) =>
          wrk({ bin, dir: ctx.dir, url, script: 'uniquePut', args: [template(), `/dav/small/${round}-`], connections: 16, seconds })
      }
      const names = Object.keys(runs) as Name[]
      // Warm-up: JIT, first pages, first directories.
      for (const name of names) await runs[name]!(1)
      const results = Object.fromEntries(names.map((n) => [n, [] as WrkResult[]])) as Record<Name, WrkResult[]>
      // The server's CPU time (user + system, all its threads) over a run, per request answered:
      // the figure that carries over from a loaded machine, where req/s follow the neighbours.
      const cpuPerRequest = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<Name, number[]>
      // (nginx's work is done by its worker, a child of the pid started: not counted here.)
      const pids: Record<Name, number | undefined> = {
        coffer: coffer.pid,
        s3rver: s3rver.pid,
        nginx: undefined,
        bareNone: bare.none!.pid,
        bareFsync: bare.fsync!.pid,
        bareGroup: bare.group!.pid,
      }
      const loads: number[] = []
      const measure = (name: Name) => async () => {
        const pid = pids[name]
        const cpu0 = pid === undefined ? 0 : cpuMs(pid)
        const r = await runs[name]!(ctx.loadSeconds)
        if (pid !== undefined) cpuPerRequest[name].push((cpuMs(pid) - cpu0) / r.good)
        loads.push(os.loadavg()[0]!)
        results[name].push(r)
        return r.rps
      }
      const rps = Object.fromEntries((await interleaved(ctx.runs, names.map(measure))).map((values, i) => [names[i]!, values])) as Partial<
        Record<Name, number[]>
      >
      ctx.log(
        `  4 KiB PUT/s by run: ${names.map((n) => `${n} ${rps[n]!.map((v) => v.toFixed(0)).join(' ')}`).join('; ')}; load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}`,
      )
      const p50 = median(results.coffer.map((r) => r.p50Ms))
      const details = (baseline: WrkResult[], subject: WrkResult[] = results.coffer) => ({
        seconds: ctx.loadSeconds,
        subjectP50Ms: subject.map((r) => r.p50Ms),
        baselineP50Ms: baseline.map((r) => r.p50Ms),
        generatorCpuShare: { subject: subject.map((r) => r.generatorCpuShare), baseline: baseline.map((r) => r.generatorCpuShare) },
        cpuMsPerRequest: cpuPerRequest,
        loadAverage: loads,
      })
      const cpuNote = (name: Name) =>
        cpuPerRequest[name].length > 0
          ? `; server CPU per request (median): Coffer ${median(cpuPerRequest.coffer).toFixed(3)} ms, ${name} ${median(cpuPerRequest[name]).toFixed(3)} ms`
          : ''
      if (rps.nginx) {
        const r = summarize(rps.nginx, rps.coffer!)
        const invalid = generatorBound(results.nginx)
        out.push({
          ...ROWS.nginx,
          coffer: r.subject,
          baseline: r.baseline,
          ratio: r.ratio,
          met: invalid ? null : r.ratio >= 0.5,
          ...(invalid ? { invalid } : {}),
          note: `Coffer acknowledges each PutObject once its bytes and row are on disk (p50 ${p50.toFixed(1)} ms); nginx fsyncs nothing`,
          details: { runs: r, ...details(results.nginx) },
        })
        // What the stack allows: each bare server against nginx, in the same rounds.
        const bareNotes: Record<'bareNone' | 'bareFsync' | 'bareGroup', string> = {
          bareNone: 'Fastify reads the 4 KiB body, answers 200 with its MD5 as ETag; no SigV4, no log, nothing written',
          bareFsync: 'the same, and the body written to a new file (open, write, fdatasync, close on the thread pool) before the answer',
          bareGroup:
            'the same, the body appended to one log file on the event loop and answered after an fdatasync that started after its write (one at a time, shared by whatever was written meanwhile)',
        }
        for (const name of ['bareNone', 'bareFsync', 'bareGroup'] as const) {
          const b = summarize(rps.nginx, rps[name]!)
          const bad = generatorBound([...results.nginx, ...results[name]])
          out.push({
            ...ROWS[name],
            coffer: b.subject,
            baseline: b.baseline,
            ratio: b.ratio,
            met: null,
            ...(bad ? { invalid: bad } : {}),
            note: `${bareNotes[name]}; its CPU per request (median) ${median(cpuPerRequest[name]).toFixed(3)} ms`,
            details: { runs: b, ...details(results.nginx, results[name]) },
          })
        }
      } else out.push(notMeasured(ROWS.nginx, `nginx: ${'unavailable' in ctx.nginx ? ctx.nginx.unavailable : ''}`))
      const r = summarize(rps.s3rver!, rps.coffer!)
      // Here the generator must not be the limit of either side: s3rver's is the baseline, Coffer's the subject.
      const invalid = generatorBound([...results.s3rver, ...results.coffer])
      out.push({
        ...ROWS.s3rver,
        coffer: r.subject,
        baseline: r.baseline,
        ratio: r.ratio,
        met: invalid ? null : r.ratio >= 3,
        ...(invalid ? { invalid } : {}),
        note: `s3rver writes each object and its metadata to files without fsync; both servers get the same prepared SigV4 requests (UNSIGNED-PAYLOAD)${cpuNote('s3rver')}`,
        details: { runs: r, ...details(results.s3rver) },
      })
      const g = summarize(rps.bareGroup!, rps.coffer!)
      out.push({
        ...ROWS.vsBareGroup,
        coffer: g.subject,
        baseline: g.baseline,
        ratio: g.ratio,
        met: null,
        note: `what Coffer's SigV4, access log, metadata transaction and checks cost against the durable minimum${cpuNote('bareGroup')}`,
        details: { runs: g, ...details(results.bareGroup) },
      })
      await s3rver.stop()
      s3rver = undefined
      await nginx?.stop()
      nginx = undefined
      await Promise.all(Object.values(bare).map((p) => p.stop()))
      bare = {}
    }
    if (smallOnly) return out

    // --- One 100 MiB PutObject beside one thread's MD5 of 100 MiB.
    ctx.log('  S3 writes: one 100 MiB PutObject vs MD5 of 100 MiB')
    const large = pngBytes(LARGE)
    let n = 0
    const putLarge = async () => {
      const body = uniqueCopy(large)
      const r = await s3(coffer.s3Url, creds, 'PUT', encodePath(`/bench/large/${++n}.bin`), body, { signBody: true })
      return mbps(LARGE, r.ms)
    }
    await putLarge()
    const [md5Runs, putRuns] = await interleaved(ctx.runs, [async () => md5Once(uniqueCopy(large)), putLarge])
    const md5 = summarize(md5Runs!, putRuns!)
    out.push({
      ...ROWS.md5,
      coffer: md5.subject,
      baseline: md5.baseline,
      ratio: md5.ratio,
      met: md5.ratio >= 0.8,
      note: 'the body signed (x-amz-content-sha256), as the CLI sends it; Coffer computes MD5 (ETag) on a second thread and SHA-256 (content address) on the main one, writes and fsyncs',
      details: { runs: md5 },
    })

    // --- A 1 GiB multipart upload beside dd of 1 GiB with conv=fsync.
    ctx.log('  S3 writes: 1 GiB multipart upload (8 in flight) vs dd conv=fsync')
    const big = Buffer.allocUnsafe(MULTIPART)
    for (let off = 0; off < MULTIPART; off += LARGE) large.copy(big, off)
    const src = path.join(ctx.dir, 's3w-dd-src')
    fs.writeFileSync(src, big)
    const dst = path.join(ctx.dir, 's3w-dd-dst')
    let m = 0
    const partsShare: number[] = []
    const upload = async () => {
      // New content each run: a counter in every part.
      m++
      for (let off = 0; off < MULTIPART; off += PART) big.writeDoubleBE(m * 1e6 + off / PART, off + 8)
      const r = await multipartUpload(coffer.s3Url, creds, encodePath(`/bench/multipart/${m}.bin`), big)
      partsShare.push(r.partsMs / r.ms)
      return mbps(MULTIPART, r.ms)
    }
    const runs = Math.min(ctx.runs, 3)
    const [ddRuns, mpRuns] = await interleaved(runs, [async () => ddOnce(src, dst, MULTIPART), upload])
    fs.rmSync(src, { force: true })
    const mp = summarize(ddRuns!, mpRuns!)
    out.push({
      ...ROWS.multipart,
      coffer: mp.subject,
      baseline: mp.baseline,
      ratio: mp.ratio,
      met: mp.ratio >= 0.7,
      note: `from CreateMultipartUpload to the answer of CompleteMultipartUpload; the parts took ${partsShare.map((s) => `${(s * 100).toFixed(0)}%`).join(', ')} of it, the completion (parts read back, hashed and written as one blob) the rest`,
      details: { runs: mp, partsShareOfTime: partsShare },
    })

    // --- What stays resident.
    const after = rssBytes(coffer.pid)
    await new Promise((r) => setTimeout(r, SETTLE_SECONDS * 1000))
    const settled = rssBytes(coffer.pid)
    out.push({
      ...ROWS.rss,
      coffer: after / 1e6,
      baseline: idleRss / 1e6,
      ratio: after / idleRss,
      cofferText: `${(after / 1e6).toFixed(0)} MB, ${(settled / 1e6).toFixed(0)} MB ${SETTLE_SECONDS} s later`,
      met: after < 200e6 && settled < after,
      note: `RSS of the Coffer process that served every load above, right after the last one and ${SETTLE_SECONDS} s later; ${(idleRss / 1e6).toFixed(0)} MB idle before them`,
      details: { idleBytes: idleRss, afterBytes: after, settledBytes: settled, settleSeconds: SETTLE_SECONDS },
    })
    return out
  } finally {
    await Promise.all([coffer.stop(), s3rver?.stop(), nginx?.stop(), ...Object.values(bare).map((p) => p.stop())])
  }
}
