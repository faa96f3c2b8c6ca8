/**
 * Load generation with `wrk` (Debian's package), in its own process: a C event loop whose Lua hooks
 * only pick a path or a body, so it is not the bottleneck the way an in-process JavaScript
 * generator with a per-request callback is (autocannon saturated near 7k req/s against nginx,
 * which serves ~30k with a plain fixed-URL load). Every run also measures the generator's own CPU
 * share from /proc: a baseline that ran against a saturated generator measured the generator,
 * and the figure built on it is marked invalid instead of printed as a ratio.
 */
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { cpuMs } from './processes'

export type WrkBinary = { path: string; version: string } | { unavailable: string }

let located: WrkBinary | undefined

/** `wrk`, installed from Debian's packages when missing and the bench runs as root. */
export function ensureWrk(log: (line: string) => void): WrkBinary {
  if (located) return located
  const find = () => spawnSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' }).stdout.trim()
  let bin = find()
  if (!bin) {
    if (process.getuid?.() !== 0) return (located = { unavailable: 'wrk is not installed and the bench is not root, so it cannot apt-get install it' })
    log('installing wrk from Debian packages (apt-get install wrk)…')
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
    // Several engineers share the machine: wait for dpkg's lock instead of failing.
    const install = () => spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=900', '-y', '-q', 'install', 'wrk'], { env, encoding: 'utf8' })
    let r = install()
    if (r.status !== 0) {
      spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=900', '-q', 'update'], { env, encoding: 'utf8' })
      r = install()
    }
    bin = find()
    if (r.status !== 0 || !bin)
      return (located = { unavailable: `apt-get install wrk failed: ${(r.stderr || r.stdout || '').trim().split('\n').slice(-2).join(' ')}` })
  }
  const v = spawnSync(bin, ['--version'], { encoding: 'utf8' })
  return (located = { path: bin, version: /wrk (\S+)/.exec(`${v.stdout}${v.stderr}`)?.[1] ?? 'unknown' })
}

export interface WrkResult {
  /** Completed requests per second that the script counted as good (for uploads: finished uploads). */
  rps: number
  /** Every request wrk completed (for uploads: handshakes and PUTs). */
  requests: number
  good: number
  seconds: number
  p50Ms: number
  p99Ms: number
  /** The generator's CPU time over the run's wall time, per wrk thread (1 = one core saturated). */
  generatorCpuShare: number
}

/** A generator this busy was the bottleneck, whatever the server did. */
export const GENERATOR_BOUND_SHARE = 0.9

// Common to every script: per-thread counters, and a JSON summary from done() that the bench
// parses. wrk counts connect/read/write/timeout errors and statuses > 399 itself; the scripts
// count the answers they expect (`good`) and anything else (`bad`).
const COMMON = `
local threads = {}
local next_id = 0
function setup(thread)
  next_id = next_id + 1
  thread:set("tid", next_id)
  table.insert(threads, thread)
end
function read_file(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end
function done(summary, latency, requests)
  local good, bad = 0, 0
  for _, t in ipairs(threads) do
    good = good + (t:get("good") or 0)
    bad = bad + (t:get("bad") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"durationUs":%d,"good":%d,"bad":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50Us":%d,"p99Us":%d}\\n',
    summary.requests, summary.duration, good, bad, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`

/**
 * GET of a random path per request: args are a file of ids (one a line), the text before and
 * after the id, and an optional Authorization header value.
 */
const RANDOM_GET = `${COMMON}
local ids, before, after, headers
good, bad = 0, 0
function init(args)
  ids = {}
  for line in io.lines(args[1]) do if #line > 0 then ids[#ids + 1] = line end end
  before, after = args[2], args[3] or ""
  headers = {}
  if args[4] and #args[4] > 0 then headers["Authorization"] = args[4] end
end
function request()
  return wrk.format("GET", before .. ids[math.random(#ids)] .. after, headers)
end
function response(status, hdrs, body)
  if status == 200 then good = good + 1 else bad = bad + 1 end
end
`

/** The body template with 16 bytes after the 8-byte signature made unique (thread, counter). */
const UNIQUE_BODY = `
local template, n, tid = nil, 0, 0
function unique_body()
  n = n + 1
  return template:sub(1, 8) .. string.format("%08x%08x", tid, n) .. template:sub(25)
end
`

/** PUT of a new file per request (nginx WebDAV): args are the body template file and the path prefix. */
const UNIQUE_PUT = `${COMMON}${UNIQUE_BODY}
local prefix
good, bad = 0, 0
function init(args)
  template, prefix, tid = read_file(args[1]), args[2], wrk.thread:get("tid")
end
function request()
  local body = unique_body()
  return wrk.format("PUT", prefix .. tid .. "-" .. n .. ".png", { ["Content-Type"] = "image/png" }, body)
end
function response(status, hdrs, body)
  if status == 201 or status == 204 then good = good + 1 else bad = bad + 1 end
end
`

/**
 * Coffer's two-step upload. wrk's Lua sees responses, not connections, so the presigned URLs a
 * handshake returns go into a queue and the next request of any connection PUTs one (they are
 * independent grants); a connection with nothing to PUT makes a handshake. \`good\` counts the
 * uploads acknowledged (PUT 200). Args: API key, body template file, handshake JSON body.
 */
const TWO_STEP_UPLOAD = `${COMMON}${UNIQUE_BODY}
local key, handshake, queue = nil, nil, {}
good, bad = 0, 0
function init(args)
  key, template, handshake, tid = args[1], read_file(args[2]), args[3], wrk.thread:get("tid")
end
function request()
  local url = table.remove(queue)
  if url then
    return wrk.format("PUT", url, { ["Content-Type"] = "image/png" }, unique_body())
  end
  return wrk.format("POST", "/api/v1/upload/request",
    { ["Authorization"] = "Bearer " .. key, ["Content-Type"] = "application/json" }, handshake)
end
function response(status, hdrs, body)
  local url = body:match('"presignedUrl":"([^"]+)"')
  if url and (status == 200 or status == 201) then
    queue[#queue + 1] = url
  elseif status == 200 then
    good = good + 1
  else
    bad = bad + 1
  end
end
`

/**
 * S3 requests signed ahead by the bench (s3-sign.ts prepareSigned: path, x-amz-date and
 * Authorization a line, UNSIGNED-PAYLOAD). Args: the file, the method, then for GET \`random\`
 * (each request a random line: signatures stay valid for repeats) or for PUT a body template file
 * and the wrk thread count (each line used once, in order, with a unique body; running out is
 * counted as a bad answer so the run fails rather than overwrite keys).
 */
const PREPARED_S3 = `${COMMON}${UNIQUE_BODY}
local lines, method, used, put, nthreads = {}, nil, 0, false, 1
good, bad = 0, 0
function init(args)
  for line in io.lines(args[1]) do
    local p, d, a = line:match("^([^\t]+)\t([^\t]+)\t(.+)$")
    if p then lines[#lines + 1] = { p, d, a } end
  end
  method, tid = args[2], wrk.thread:get("tid")
  if method == "PUT" then put, template, nthreads = true, read_file(args[3]), tonumber(args[4] or "1") end
end
function request()
  local e
  if put then
    -- Threads take turns through the lines, so no two PUT the same key.
    used = used + 1
    e = lines[(used - 1) * nthreads + tid]
    if not e then return wrk.format("GET", "/", {}) end
  else
    e = lines[math.random(#lines)]
  end
  local headers = { ["x-amz-date"] = e[2], ["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD", ["Authorization"] = e[3] }
  if put then
    headers["Content-Type"] = "application/octet-stream"
    return wrk.format("PUT", e[1], headers, unique_body())
  end
  return wrk.format(method, e[1], headers)
end
function response(status, hdrs, body)
  if status == 200 then good = good + 1 else bad = bad + 1 end
end
`

export const SCRIPTS = { randomGet: RANDOM_GET, uniquePut: UNIQUE_PUT, twoStepUpload: TWO_STEP_UPLOAD, preparedS3: PREPARED_S3 }

export interface WrkRun {
  bin: string
  /** Where the script is written. */
  dir: string
  url: string
  script: keyof typeof SCRIPTS
  args: string[]
  connections: number
  seconds: number
  /** wrk threads; 1 by default, leaving the other core to the server. */
  threads?: number
}

/**
 * One wrk run. Any connection error, timeout or unexpected status fails the run: a load figure
 * made of error responses would be a fake number.
 */
export async function wrk(run: WrkRun): Promise<WrkResult> {
  const threads = run.threads ?? 1
  const scriptFile = path.join(run.dir, `wrk-${run.script}.lua`)
  fs.writeFileSync(scriptFile, SCRIPTS[run.script])
  const args = ['-t', String(threads), '-c', String(run.connections), '-d', `${run.seconds}s`, '--timeout', '10s', '-s', scriptFile, run.url, '--', ...run.args]
  const { code, out, samples } = await runSampled(run.bin, args)
  const line = /^WRKJSON (.*)$/m.exec(out)?.[1]
  if (code !== 0 || !line) throw new Error(`wrk ${args.join(' ')} exited with ${code}:\n${out.slice(-1500)}`)
  const r = JSON.parse(line) as Record<
    'requests' | 'durationUs' | 'good' | 'bad' | 'connect' | 'read' | 'write' | 'status' | 'timeout' | 'p50Us' | 'p99Us',
    number
  >
  const errors = r.connect + r.read + r.write + r.status + r.timeout + r.bad
  if (errors > 0) {
    throw new Error(
      `wrk against ${run.url} (${run.script}): ${r.bad} unexpected answers, ${r.status} statuses > 399, ${r.timeout} timeouts, ` +
        `${r.connect + r.read + r.write} socket errors in ${r.requests} requests`,
    )
  }
  // Skip the samples of start-up; at least two are needed to span an interval.
  const first = samples.find((s) => s.wall - samples[0]!.wall >= 200) ?? samples[0]
  const last = samples.at(-1)
  const share = first && last && last.wall > first.wall ? (last.cpu - first.cpu) / (last.wall - first.wall) / threads : Number.NaN
  const seconds = r.durationUs / 1e6
  return {
    rps: r.good / seconds,
    requests: r.requests,
    good: r.good,
    seconds,
    p50Ms: r.p50Us / 1000,
    p99Ms: r.p99Us / 1000,
    generatorCpuShare: share,
  }
}

/** Writes `ids` one a line for the random-path scripts; returns the file. */
export function idsFile(dir: string, name: string, ids: readonly string[]): string {
  const f = path.join(dir, `${name}.ids`)
  fs.writeFileSync(f, `${ids.join('\n')}\n`)
  return f
}

/** Writes a body template for the unique-body scripts; returns the file. */
export function templateFile(dir: string, name: string, bytes: Buffer): string {
  const f = path.join(dir, `${name}.body`)
  fs.writeFileSync(f, bytes)
  return f
}

/** The generator-bound verdict for a set of baseline runs, or undefined when they are valid. */
export function generatorBound(runs: readonly WrkResult[], floor?: { rps: number; why: string }): string | undefined {
  const busiest = Math.max(...runs.map((r) => r.generatorCpuShare))
  if (busiest >= GENERATOR_BOUND_SHARE) {
    return `the load generator (wrk) used ${(busiest * 100).toFixed(0)}% of its core(s) in a baseline run (limit ${GENERATOR_BOUND_SHARE * 100}%): the baseline measured wrk, not the server`
  }
  if (floor) {
    const slowest = Math.min(...runs.map((r) => r.rps))
    if (slowest < floor.rps) return `a baseline run reached ${slowest.toFixed(0)}/s, under the sanity floor of ${floor.rps}/s (${floor.why})`
  }
  return undefined
}

/**
 * Runs a load generator to its exit: its exit code, its stdout and stderr together, and its CPU
 * sampled every 200 ms inside the run (the process is gone, and its /proc entry with it, once it
 * has exited), for the share of a core it used.
 */
export async function runSampled(bin: string, args: string[]): Promise<{ code: number | string; out: string; samples: { wall: number; cpu: number }[] }> {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c.toString()))
  child.stderr.on('data', (c: Buffer) => (out += c.toString()))
  const samples: { wall: number; cpu: number }[] = []
  const timer = setInterval(() => {
    try {
      samples.push({ wall: performance.now(), cpu: cpuMs(child.pid!) })
    } catch {
      // exited between two samples
    }
  }, 200)
  const code = await new Promise<number | string>((resolve) => child.once('exit', (c, sig) => resolve(c ?? sig ?? -1)))
  clearInterval(timer)
  return { code, out, samples }
}
