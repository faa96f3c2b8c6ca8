/** Child processes under test: start, wait until healthy, measure memory, stop. */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'

export interface Proc {
  child: ChildProcess
  pid: number
  url: string
  /** Resolves with the exit code (or signal) once the process has ended. */
  exited: Promise<number | string>
  stop(): Promise<number | string>
}

/** A free TCP port on 127.0.0.1 (the kernel picks it; the tiny race with other processes is harmless here). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
  })
}

/** One GET with a fresh connection; resolves with the status, or 0 when nothing answered. */
function probe(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', () => resolve(0))
    req.setTimeout(2000, () => req.destroy())
  })
}

/** Polls `url` every `intervalMs` until it answers 200; rejects when `exited` settles first or on timeout. */
export async function waitHealthy(url: string, exited: Promise<unknown>, timeoutMs = 30_000, intervalMs = 2): Promise<void> {
  let dead = false
  void exited.then(() => (dead = true))
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if ((await probe(url)) === 200) return
    if (dead) throw new Error(`process exited before ${url} answered 200`)
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}

/**
 * Starts `command` with stdout and stderr appended to `logFile` (never piped through the bench,
 * which would spend the load generator's CPU on log lines) and waits until `healthPath` answers.
 */
export async function startProc(
  command: string,
  args: string[],
  opts: { port: number; healthPath: string; logFile: string; env?: Record<string, string>; cwd?: string },
): Promise<Proc & { startMs: number }> {
  const log = fs.openSync(opts.logFile, 'a')
  const t0 = performance.now()
  const child = spawn(command, args, {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...opts.env },
    stdio: ['ignore', log, log],
  })
  fs.closeSync(log)
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)))
  const url = `http://127.0.0.1:${opts.port}`
  try {
    await waitHealthy(url + opts.healthPath, exited)
  } catch (err) {
    child.kill('SIGKILL')
    const tail = fs.readFileSync(opts.logFile, 'utf8').split('\n').slice(-15).join('\n')
    throw new Error(`${command} ${args.join(' ')}: ${(err as Error).message}\n${tail}`, { cause: err })
  }
  const startMs = performance.now() - t0
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    const code = await exited
    clearTimeout(timer)
    return code
  }
  return { child, pid: child.pid!, url, exited, stop, startMs }
}

function statusField(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
  if (!m) throw new Error(`no ${field} for pid ${pid}`)
  return Number(m[1]) * 1024
}

/** Resident set size now, in bytes (Linux). */
export const rssBytes = (pid: number) => statusField(pid, 'VmRSS')

/** Highest resident set size since start or since resetPeakRss(), in bytes (Linux). */
export const peakRssBytes = (pid: number) => statusField(pid, 'VmHWM')

/** Resets the kernel's peak-RSS mark (`echo 5 > /proc/PID/clear_refs`); false where not permitted. */
export function resetPeakRss(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5')
    return true
  } catch {
    return false
  }
}

let clockTicks: number | undefined

/** CPU time (user + system) a process has used so far, in ms (Linux). */
export function cpuMs(pid: number): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks
}
