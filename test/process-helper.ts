import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import readline from 'node:readline'
import fs from 'node:fs'
import type { Test } from 'tap'
import { TEST_LOG_DIR } from './log-scan/secrets'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'

/** Makes `dir` a data dir, as a first `coffer serve` would: the CLI works only on one (#13). */
export function initDataDir(dir: string): string {
  createCore(loadConfig({}, { 'data-dir': dir })).close()
  return dir
}

export const ROOT = path.resolve(__dirname, '..')
export const BUNDLE = path.join(ROOT, 'dist', 'coffer.cjs')

/** Builds dist/coffer.cjs unless it is newer than every source. */
export function buildBundle(): void {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'build.mjs'), '--if-stale'], { cwd: ROOT, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`build failed: ${r.stderr}`)
}

export interface Running {
  child: ChildProcess
  url: string
  /** Every stdout/stderr line seen so far. */
  lines: string[]
  /** The stdout lines alone. */
  stdout: string[]
  /** Resolves with the exit code (or signal name) once the process ends. */
  exited: Promise<number | string>
}

/**
 * Starts `command args…` (default: node dist/coffer.cjs) and waits for the "coffer listening on"
 * log line; rejects if the process exits first or `timeoutMs` passes.
 */
export function startCoffer(
  args: string[],
  opts: { cwd: string; env?: Record<string, string>; command?: string; timeoutMs?: number; ready?: RegExp },
): Promise<Running> {
  const command = opts.command ?? process.execPath
  const fullArgs = opts.command ? args : [BUNDLE, ...args]
  const child = spawn(command, fullArgs, {
    cwd: opts.cwd,
    // One process, as before --workers (#29): a test of several sets COFFER_WORKERS or --workers itself.
    env: { PATH: process.env.PATH ?? '', COFFER_S3_PORT: '0', COFFER_WORKERS: '1', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const lines: string[] = []
  const stdout: string[] = []
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)))
  const ready = opts.ready ?? /coffer listening on (http:\/\/[^\s"]+)/
  fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
  const logFile = path.join(TEST_LOG_DIR, `server-${child.pid}.log`)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`coffer did not start within ${opts.timeoutMs ?? 15000} ms:\n${lines.join('\n')}`))
    }, opts.timeoutMs ?? 15000)
    const onLine = (line: string) => {
      lines.push(line)
      // pino lines go to the log mirror scanned for secrets after the run (other output, such as
      // the ephemeral mode's credentials line, is meant to carry keys).
      if (line.startsWith('{"level":')) fs.appendFileSync(logFile, `${line}\n`)
      const m = ready.exec(line)
      if (m) {
        clearTimeout(timer)
        resolve({ child, url: m[1] ?? '', lines, stdout, exited })
      }
    }
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      stdout.push(line)
      onLine(line)
    })
    readline.createInterface({ input: child.stderr }).on('line', onLine)
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`coffer exited (${code}) before it was ready:\n${lines.join('\n')}`))
    })
  })
}

/** Runs the bundle (or `command`) to completion. */
export function runCoffer(args: string[], opts: { cwd: string; env?: Record<string, string>; command?: string }) {
  const command = opts.command ?? process.execPath
  const fullArgs = opts.command ? args : [BUNDLE, ...args]
  return spawnSync(command, fullArgs, {
    cwd: opts.cwd,
    // One process, as before --workers (#29): a test of several sets COFFER_WORKERS or --workers itself.
    env: { PATH: process.env.PATH ?? '', COFFER_S3_PORT: '0', COFFER_WORKERS: '1', ...opts.env },
    encoding: 'utf8',
    timeout: 30000,
  })
}

/** Creates a tenant through a running server's admin API. */
export async function createTenantOverHttp(
  url: string,
  adminKey: string,
  body: { name: string; quotaBytes?: number },
): Promise<{ id: string; apiKey: string; auth: { authorization: string } }> {
  const res = await fetch(`${url}/api/v1/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (res.status !== 201) throw new Error(`tenant creation failed: ${res.status} ${await res.text()}`)
  const created = (await res.json()) as { id: string; apiKey: string }
  return { ...created, auth: { authorization: `Bearer ${created.apiKey}` } }
}

/** A process's resident set size now and its high-water mark, in bytes (Linux /proc). */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024
  return { rss: kb('VmRSS'), peak: kb('VmHWM') }
}

/**
 * What "memory stays flat" means for a transfer test: the server's peak grew less than a body
 * buffered whole would make it grow, over what it used before the transfer (the executable's own
 * size, the SDK and the console it carries, is not the transfer's), and stays under #15's bound.
 */
const FLAT_GROWTH_BYTES = 80 * 1024 * 1024
const PEAK_RSS_BOUND_BYTES = 200 * 1024 * 1024

/** Asserts that the server `pid` kept memory flat through `transfer`, from `before` (its RSS then). */
export function assertFlatMemory(t: Test, pid: number, before: number, transfer: string): void {
  const { peak } = memoryOf(pid)
  const mib = (bytes: number) => (bytes / (1024 * 1024)).toFixed(1)
  t.ok(peak - before < FLAT_GROWTH_BYTES, `${transfer} grew the server by ${mib(peak - before)} MiB (from ${mib(before)} MiB)`)
  t.ok(peak < PEAK_RSS_BOUND_BYTES, `peak RSS ${mib(peak)} MiB`)
}
