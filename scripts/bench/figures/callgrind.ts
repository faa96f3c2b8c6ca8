/**
 * Instructions per `GET /api/v1/files/:id` under `valgrind --tool=callgrind`, against the bare
 * Fastify route returning constant JSON (#15 target 4: ≤ 2× its instructions). Unlike req/s, the
 * count hardly moves with the machine's other load, so it is the figure to compare two versions
 * of the code by: `--against-bundle PATH` measures another build of Coffer (an old
 * dist/coffer.cjs) in the same run.
 *
 * Method: each server starts under callgrind with instrumentation off (start-up under full
 * instrumentation takes minutes and is not what is measured), `callgrind_control -i on` turns it
 * on, a warm-up lets V8 optimise the request path, `callgrind_control -z` zeroes the counters, N
 * requests go over one keep-alive connection one after the other (no batching that would differ
 * between servers), and `callgrind_control -d` dumps the counts, block after block of N requests
 * until two in a row agree within 2%, user space only (the kernel's side of the loopback socket is
 * not counted). The figure is the main thread's count, where the request is handled; the whole
 * process's (V8's optimising compiler and GC helpers on their own threads too) is reported beside
 * it. Counting every thread made the blocks disagree wildly: V8 optimising on its worker thread
 * was 57% of one block's instructions, and the same build measured 171k to 667k a request from one
 * block to the next. The client runs in the bench process, outside valgrind.
 *
 * Coffer builds are set up over HTTP only, each on its own fresh data dir: the tenant through the
 * admin API, the files through the two-step upload, so a build of any age can be measured (an
 * old build cannot open a newer database). The reference route doing the work any
 * implementation must (bare-fastify.ts with a data dir) then reads the current build's database.
 */
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { BUNDLE, pngBytes, uniqueCopy } from '../coffer'
import { json, request } from '../http'
import { freePort } from '../processes'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'

export type ValgrindBinary = { valgrind: string; control: string; version: string } | { unavailable: string }

const which = (name: string) => spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim()

/** valgrind (with callgrind_control), installed from Debian's packages when missing and the bench runs as root. */
export function ensureValgrind(log: (line: string) => void): ValgrindBinary {
  if (!which('valgrind') || !which('callgrind_control')) {
    if (process.getuid?.() !== 0) return { unavailable: 'valgrind is not installed and the bench is not root, so it cannot apt-get install it' }
    log('installing valgrind from Debian packages (apt-get install valgrind)…')
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
    const install = () => spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=900', '-y', '-q', 'install', 'valgrind'], { env, encoding: 'utf8' })
    let r = install()
    if (r.status !== 0) {
      spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=900', '-q', 'update'], { env, encoding: 'utf8' })
      r = install()
    }
    if (r.status !== 0 || !which('valgrind') || !which('callgrind_control'))
      return { unavailable: `apt-get install valgrind failed: ${(r.stderr || r.stdout || '').trim().split('\n').slice(-2).join(' ')}` }
  }
  const v = spawnSync(which('valgrind'), ['--version'], { encoding: 'utf8' }).stdout.trim()
  return { valgrind: which('valgrind'), control: which('callgrind_control'), version: v }
}

/** What one server is asked, once set up: the paths to GET in turn and the headers to send (per path: S3 signs each). */
export interface Workload {
  paths: string[]
  headers: http.OutgoingHttpHeaders | ((path: string) => http.OutgoingHttpHeaders)
  /** The server's port to send them to, when not the API's (`base` is the API's). */
  base?: string
  /** PUT with this body (the path of each request then names a new key), instead of GET. */
  put?: { body: (n: number) => Buffer; path: (n: number) => string }
}

export const ADMIN_KEY = 'bench-callgrind-admin-key-0123456789'

/** Runs `args` under callgrind, sets it up with `prepare`, and counts the instructions of `measured` requests after `warmup`. */
export async function countInstructions(
  ctx: BenchContext,
  vg: { valgrind: string; control: string },
  name: string,
  command: string,
  args: (port: number) => string[],
  env: Record<string, string>,
  prepare: (base: string) => Promise<Workload>,
  counts: { warmup: number; measured: number },
): Promise<{ perRequest: number; blocks: number[]; allThreads: number[] }> {
  const port = await freePort()
  const outDir = fs.mkdtempSync(path.join(ctx.dir, `callgrind-${name}-`))
  const logFile = path.join(ctx.dir, `callgrind-${name}.log`)
  const log = fs.openSync(logFile, 'a')
  const child = spawn(
    vg.valgrind,
    ['--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${path.join(outDir, 'callgrind.out')}`, command, ...args(port)],
    {
      cwd: outDir,
      // One process (#29): `serve` otherwise starts a worker per core, which handle the requests
      // while callgrind, which does not follow children, counted the idle primary (~70 a request).
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', COFFER_WORKERS: '1', ...env },
      stdio: ['ignore', log, log],
    },
  )
  fs.closeSync(log)
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)))
  const control = (arg: string) => {
    const r = spawnSync(vg.control, [arg, String(child.pid)], { encoding: 'utf8', timeout: 120_000 })
    if (r.status !== 0) throw new Error(`callgrind_control ${arg} ${child.pid}: ${r.stderr || r.stdout}`)
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  try {
    const base = `http://127.0.0.1:${port}`
    await healthy(base, exited, logFile)
    const work = await prepare(base)
    control('--instr=on')
    let i = 0
    const target = work.base ?? base
    const get = async () => {
      const n = i++
      const p = work.put ? work.put.path(n) : work.paths[n % work.paths.length]!
      const res = await request(target + p, {
        headers: typeof work.headers === 'function' ? work.headers(p) : work.headers,
        agent,
        ...(work.put ? { method: 'PUT', body: work.put.body(n) } : {}),
      })
      if (res.status !== 200) throw new Error(`${name}: ${work.put ? 'PUT' : 'GET'} ${p}: ${res.status} ${res.body.toString().slice(0, 200)}`)
    }
    for (let n = 0; n < counts.warmup; n++) await get()
    // V8 may still be compiling the path after the warm-up (its optimising compiler runs on
    // another thread, counted too): count blocks of requests until two in a row agree within 2%.
    const blocks: number[] = []
    const allThreads: number[] = []
    while (blocks.length < 6) {
      control('--zero')
      for (let n = 0; n < counts.measured; n++) await get()
      control('--dump')
      const dump = lastDump(outDir, name, blocks.length + 1)
      blocks.push(dump.mainThread / counts.measured)
      allThreads.push(dump.allThreads / counts.measured)
      const [a, b] = blocks.slice(-2)
      if (a !== undefined && b !== undefined && Math.abs(a - b) / b <= 0.02) break
    }
    return { perRequest: blocks.at(-1)!, blocks, allThreads }
  } finally {
    agent.destroy()
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    await exited
    clearTimeout(timer)
  }
}

/**
 * The instruction totals of the `n`th dump callgrind wrote into `dir`: one file per thread
 * (`callgrind.out.<n>-<thread>`, `-01` the main thread).
 */
function lastDump(dir: string, name: string, n: number): { mainThread: number; allThreads: number } {
  const files = fs.readdirSync(dir).filter((f) => f.startsWith(`callgrind.out.${n}-`))
  const main = `callgrind.out.${n}-01`
  if (!files.includes(main)) throw new Error(`${name}: callgrind wrote no dump ${path.join(dir, main)}`)
  const total = (file: string) => {
    const t = /^(?:summary|totals): (\d+)/m.exec(fs.readFileSync(path.join(dir, file), 'utf8'))?.[1]
    if (t === undefined) throw new Error(`${name}: no instruction total in ${file}`)
    return Number(t)
  }
  return { mainThread: total(main), allThreads: files.reduce((sum, f) => sum + total(f), 0) }
}

/** Waits (minutes: everything is slow under valgrind) for /health to answer 200. */
async function healthy(base: string, exited: Promise<unknown>, logFile: string): Promise<void> {
  let dead = false
  void exited.then(() => (dead = true))
  const deadline = Date.now() + 300_000
  for (;;) {
    const status = await request(`${base}/health`).then(
      (r) => r.status,
      () => 0,
    )
    if (status === 200) return
    if (dead || Date.now() > deadline) {
      const tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n')
      throw new Error(`${base}/health ${dead ? 'exited before answering' : 'did not answer 200 within 5 minutes'}:\n${tail}`)
    }
    await new Promise((r) => setTimeout(r, 250))
  }
}

/** A tenant made through the admin API of the server at `base`. */
export async function adminTenant(base: string, name: string): Promise<{ id: string; apiKey: string }> {
  return json<{ id: string; apiKey: string }>(
    `${base}/api/v1/admin/tenants`,
    { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify({ name })) },
    201,
  )
}

/** `count` unique PNG files of `size` bytes uploaded through the two-step upload; their ids. */
export async function uploadFiles(base: string, apiKey: string, count: number, size: number): Promise<string[]> {
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  const template = pngBytes(size)
  const ids: string[] = []
  for (let n = 0; n < count; n++) {
    const bytes = uniqueCopy(template)
    const hs = await json<{ fileId: string; presignedUrl: string }>(`${base}/api/v1/upload/request`, {
      method: 'POST',
      headers,
      body: Buffer.from(JSON.stringify({ fileType: 'image/png', fileName: `cg-${n}.png`, fileSizeBytes: bytes.length })),
    })
    const put = await request(base + hs.presignedUrl, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bytes })
    if (put.status !== 200) throw new Error(`PUT ${hs.presignedUrl}: ${put.status} ${put.body.toString().slice(0, 200)}`)
    ids.push(hs.fileId)
  }
  return ids
}

/**
 * A build of Coffer on a fresh data dir, set up over HTTP only: a tenant created through the admin
 * API, `files` files uploaded (handshake, then PUT), whose metadata is then read in turn.
 */
function cofferOverHttp(files: number, setUp: (apiKey: string, ids: string[]) => void) {
  return async (base: string): Promise<Workload> => {
    const tenant = await adminTenant(base, 'callgrind')
    const ids = await uploadFiles(base, tenant.apiKey, files, 1024)
    setUp(tenant.apiKey, ids)
    return { paths: ids.map((id) => `/api/v1/files/${id}`), headers: { authorization: `Bearer ${tenant.apiKey}` } }
  }
}

/** `serve` flags a build understands: old builds have no S3 listener and no --s3-port. */
async function serveArgs(bundle: string, dataDir: string): Promise<(port: number) => string[]> {
  const help = spawnSync(process.execPath, [bundle, 'serve', '--help'], { encoding: 'utf8' })
  // Never the default S3 port 9000, which another process may hold.
  const s3 = `${help.stdout}${help.stderr}`.includes('--s3-port') ? ['--s3-port', String(await freePort())] : []
  return (port) => [bundle, 'serve', '--port', String(port), ...s3, '--data-dir', dataDir]
}

/** Instructions in thousands, as the rows print them: `201k`. */
export const thousands = (n: number) => `${Math.round(n / 1000)}k`

/** A row of two instruction counts per request, printed in thousands. */
export function instructionRow(row: Omit<FigureResult, 'unit' | 'cofferText' | 'baselineText'> & { coffer: number; baseline: number }): FigureResult {
  return { ...row, unit: 'instr', cofferText: `${thousands(row.coffer)} instr`, baselineText: `${thousands(row.baseline)} instr` }
}

/** The row of another build (`--against-bundle`) beside this build's count, reported only. */
export function againstRow(
  key: string,
  figure: string,
  against: string,
  other: number,
  current: number,
  extra: Pick<FigureResult, 'note' | 'details'>,
): FigureResult {
  return instructionRow({
    key,
    figure: `${figure}, ${path.relative(process.cwd(), against) || against} (--against-bundle)`,
    baselineLabel: 'this build of Coffer (row above)',
    coffer: other,
    baseline: current,
    ratio: other / current,
    target: 'report',
    met: null,
    ...extra,
  })
}

export async function callgrindFigure(ctx: BenchContext): Promise<FigureResult[]> {
  const figure = 'GET /api/v1/files/:id instructions/request (callgrind)'
  const baselineLabel = 'bare Fastify route returning constant JSON'
  const vg = ctx.valgrind
  if ('unavailable' in vg) return [notMeasured({ key: 'callgrind', figure, baselineLabel, unit: 'instr', target: '≤ 2×' }, vg.unavailable)]
  const counts = ctx.callgrindRequests
  const files = 20
  const bareScript = path.join(__dirname, 'bare-fastify.cjs')
  const node = process.execPath
  ctx.log(`  callgrind: ${counts.warmup} requests of warm-up, then ${counts.measured} counted, per server (${vg.version})`)

  const measureCoffer = async (name: string, bundle: string, onSetUp: (apiKey: string, ids: string[]) => void = () => {}) => {
    const dataDir = fs.mkdtempSync(path.join(ctx.dir, `callgrind-data-${name}-`))
    ctx.log(`  ${name}: ${bundle}`)
    const per = await countInstructions(
      ctx,
      vg,
      name,
      node,
      await serveArgs(bundle, dataDir),
      { COFFER_ADMIN_API_KEY: ADMIN_KEY },
      cofferOverHttp(files, onSetUp),
      counts,
    )
    return { per: per.perRequest, blocks: per.blocks, allThreads: per.allThreads, dataDir }
  }

  ctx.log('  bare route')
  const bareRun = await countInstructions(
    ctx,
    vg,
    'bare',
    node,
    (port) => [bareScript, String(port)],
    {},
    async () => ({ paths: ['/api/v1/files/x'], headers: {} }),
    counts,
  )
  let key = ''
  let ids: string[] = []
  const coffer = await measureCoffer('coffer', BUNDLE, (k, i) => ((key = k), (ids = i)))
  ctx.log('  reference route doing the essential work, on the same database')
  const essentialRun = await countInstructions(
    ctx,
    vg,
    'essential',
    node,
    (port) => [bareScript, String(port), coffer.dataDir],
    {},
    async () => ({ paths: ids.map((id) => `/api/v1/files/${id}`), headers: { authorization: `Bearer ${key}` } }),
    counts,
  )
  const bare = bareRun.perRequest
  const essential = essentialRun.perRequest
  const ratio = coffer.per / bare

  const results: FigureResult[] = [
    instructionRow({
      key: 'callgrind',
      figure,
      baselineLabel,
      coffer: coffer.per,
      baseline: bare,
      ratio,
      target: '≤ 2×',
      met: ratio <= 2,
      note:
        `user-space instructions per request on the server's main thread, ${counts.measured} requests one after the other on one ` +
        `keep-alive connection after ${counts.warmup} of warm-up (the last of blocks of ${counts.measured} counted until two agree within 2%); ` +
        `the whole process in the same block (V8's compiler and GC threads too): Coffer ${thousands(coffer.allThreads.at(-1)!)}, bare route ${thousands(bareRun.allThreads.at(-1)!)}. ` +
        `The bare route doing only the essential work (hash the key and find its ` +
        `tenant, read the row, write an access log line) uses ${thousands(essential)} (${(essential / bare).toFixed(2)}x the bare route)`,
      details: {
        blocks: { bare: bareRun.blocks, coffer: coffer.blocks, essential: essentialRun.blocks },
        allThreads: { bare: bareRun.allThreads, coffer: coffer.allThreads, essential: essentialRun.allThreads },
        counts,
        valgrind: vg.version,
      } satisfies Record<string, unknown>,
    }),
  ]
  for (const [i, against] of ctx.againstBundles.entries()) {
    const other = await measureCoffer(`against-${i + 1}`, against)
    results.push(
      againstRow(`callgrind-against-${i + 1}`, 'same', against, other.per, coffer.per, {
        note: `the other build is ${(other.per / bare).toFixed(2)}x the bare route (main thread); whole process ${thousands(other.allThreads.at(-1)!)}`,
        details: { blocks: other.blocks, allThreads: other.allThreads },
      }),
    )
  }
  return results
}
