/**
 * A before/after harness for #29's 4 KiB PutObject at c=16, for a loaded machine where only CPU
 * per request carries over. Each bundle given gets its own server on a fresh data dir; wrk loads
 * them in turn (rounds alternate which goes first); each run reports answers/s, p50, and the
 * server's CPU per PutObject: the whole process (`/proc/PID/stat`) and its main thread
 * (`/proc/PID/task/PID/stat`, where requests are handled). Then RSS right after the loads and
 * `--settle` seconds later, with where it is (smaps, and V8's spaces from /metrics).
 *
 *   npm run bench -- put-cpu [--seconds 5] [--rounds 3] [--settle 15] [--prof DIR] [--snapshot] BUNDLE['|NAME=VALUE'…] …
 *
 * `--prof DIR` writes each server's V8 CPU profile under DIR/<index>/; `--snapshot` a heap
 * snapshot after the settle (SIGUSR2; give `--env NODE_OPTIONS=--heapsnapshot-signal=SIGUSR2`).
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { execFileSync } from 'node:child_process'
import { pngBytes, startCoffer, type Coffer } from './coffer'
import { cpuMs, rssBytes } from './processes'
import { encodePath, prepareSigned, type Credentials } from './s3-sign'
import { ensureWrk, templateFile, wrk } from './wrk'
import { loadConfig } from '../../src/config'
import { createCore } from '../../src/core'

const CAP = 8000
let ticks: number | undefined
function threadCpuMs(pid: number): number {
  ticks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  const f = fs.readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(f[11]) + Number(f[12])) * 1000) / ticks
}

function seed(dir: string): Credentials {
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  try {
    const { tenant } = core.tenants.create({ name: 'put-cpu', quotaBytes: 64 * 1024 ** 3 })
    core.workspaces.create({ ...tenant }, { name: 'bench', slug: 'bench' })
    const pair = core.s3Credentials.create(tenant.id)
    return { accessKeyId: pair.accessKeyId, secretAccessKey: pair.secretAccessKey, region: core.config.s3Region }
  } finally {
    core.close()
  }
}

/** Group commit's totals from /metrics (builds before #29's counters have none: undefined). */
async function commitTotals(url: string): Promise<Record<string, number> | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const out: Record<string, number> = {}
  for (const m of text.matchAll(/^coffer_group_commit_(\w+)_total (\S+)$/gm)) out[m[1]!] = Number(m[2])
  return Object.keys(out).length > 0 ? out : undefined
}

/** RSS by mapping (anonymous memory together), the largest first. */
function smaps(pid: number): string {
  const by = new Map<string, number>()
  let name = ''
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head) name = head[1] || '[anon]'
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss) by.set(name, (by.get(name) ?? 0) + Number(rss[1]))
  }
  return [...by]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8)
    .map(([n, kb]) => `  ${(kb / 1024).toFixed(1)} MB ${n}`)
    .join('\n')
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      seconds: { type: 'string' },
      rounds: { type: 'string' },
      prof: { type: 'string' },
      settle: { type: 'string' },
      snapshot: { type: 'boolean' },
      env: { type: 'string', multiple: true },
    },
  })
  const seconds = Number(values.seconds ?? 5)
  const rounds = Number(values.rounds ?? 3)
  const settle = Number(values.settle ?? 15)
  const generator = ensureWrk((l) => process.stderr.write(`${l}\n`))
  if ('unavailable' in generator) throw new Error(generator.unavailable)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-put-cpu-'))
  const servers: { label: string; coffer: Coffer; creds: Credentials; idle: number }[] = []
  const extraEnv = Object.fromEntries((values.env ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
  try {
    for (const [i, spec] of positionals.entries()) {
      // BUNDLE, or BUNDLE|NAME=VALUE|… for environment variables of that server alone.
      const [bundle, ...vars] = spec.split('|') as [string, ...string[]]
      const own = Object.fromEntries(vars.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
      const data = path.join(dir, `data-${i}`)
      const creds = seed(data)
      const env = values.prof
        ? { ...extraEnv, ...own, NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${path.resolve(values.prof, String(i))}` }
        : { ...extraEnv, ...own }
      const coffer = await startCoffer(data, { label: bundle, command: process.execPath, args: [path.resolve(bundle)] }, env)
      servers.push({ label: spec, coffer, creds, idle: rssBytes(coffer.pid) })
    }
    const template = templateFile(dir, 'small', pngBytes(4096))
    let n = 0
    const run = async (s: (typeof servers)[number], secs: number) => {
      const r = ++n
      const paths = Array.from({ length: CAP * secs }, (_, i) => encodePath(`/bench/small/${r}/${i}.bin`))
      const file = prepareSigned(path.join(dir, `put-${r}.signed`), s.creds, 'PUT', s.coffer.s3Url.replace('http://', ''), paths)
      const commits0 = await commitTotals(s.coffer.url)
      const cpu0 = cpuMs(s.coffer.pid)
      const main0 = threadCpuMs(s.coffer.pid)
      const w = await wrk({
        bin: generator.path,
        dir,
        url: s.coffer.s3Url,
        script: 'preparedS3',
        args: [file, 'PUT', template, '1'],
        connections: 16,
        seconds: secs,
      })
      const cpu = cpuMs(s.coffer.pid) - cpu0
      const main = threadCpuMs(s.coffer.pid) - main0
      const commits1 = await commitTotals(s.coffer.url)
      // Writes per batch and per flush, the share of the run a flush was in progress, and the
      // event loop's time committing per PutObject (#29: does the flush overlap other work?).
      const d = (k: string) => (commits1?.[k] ?? 0) - (commits0?.[k] ?? 0)
      const batching =
        commits0 && commits1
          ? {
              perBatch: d('writes') / d('batches'),
              perFlush: d('writes') / d('flushes'),
              flushShare: d('flush_seconds') / secs,
              commitMsPerReq: (d('seconds') * 1000) / d('writes'),
            }
          : undefined
      return { rps: w.rps, p50: w.p50Ms, cpuPerReq: cpu / w.good, mainPerReq: main / w.good, wrkShare: w.generatorCpuShare, batching }
    }
    for (const s of servers) await run(s, 1)
    const results: Record<string, ReturnType<typeof run> extends Promise<infer R> ? R[] : never> = {}
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? servers : [...servers].reverse()
      for (const s of order) {
        const r = await run(s, seconds)
        ;(results[s.label] ??= []).push(r)
        const b = r.batching
        const batching = b
          ? `, ${b.perBatch.toFixed(1)} per batch, ${b.perFlush.toFixed(1)} per flush, a flush in progress ${(b.flushShare * 100).toFixed(0)}% of the time, commit ${b.commitMsPerReq.toFixed(3)} ms/req`
          : ''
        process.stderr.write(
          `${s.label}: ${r.rps.toFixed(0)}/s p50 ${r.p50.toFixed(1)} ms, CPU ${r.cpuPerReq.toFixed(3)} ms/req (main ${r.mainPerReq.toFixed(3)}), wrk ${(r.wrkShare * 100).toFixed(0)}%, load ${os.loadavg()[0]!.toFixed(1)}${batching}\n`,
        )
      }
    }
    const after = servers.map((s) => rssBytes(s.coffer.pid))
    await new Promise((r) => setTimeout(r, settle * 1000))
    const settled = servers.map((s) => rssBytes(s.coffer.pid))
    for (const s of servers) {
      const m = await (await fetch(`${s.coffer.url}/metrics`)).text()
      const mem = m.split('\n').filter((l) => /^(nodejs_heap_size|nodejs_external|nodejs_heap_space_size_(total|used)|process_resident)/.test(l))
      process.stderr.write(`${s.label} smaps:\n${smaps(s.coffer.pid)}\n${mem.map((l) => `  ${l}`).join('\n')}\n`)
    }
    if (values.snapshot) {
      for (const s of servers) s.coffer.child.kill('SIGUSR2')
      await new Promise((r) => setTimeout(r, 20_000))
    }
    for (const [i, s] of servers.entries()) {
      const rs = results[s.label]!
      const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
      process.stdout.write(
        `${s.label}\n  rps ${rs.map((r) => r.rps.toFixed(0)).join(' ')} | cpu/req ${rs.map((r) => r.cpuPerReq.toFixed(3)).join(' ')} (median ${med(rs.map((r) => r.cpuPerReq)).toFixed(3)}) | main/req ${rs.map((r) => r.mainPerReq.toFixed(3)).join(' ')} (median ${med(rs.map((r) => r.mainPerReq)).toFixed(3)})\n  RSS idle ${(s.idle / 1e6).toFixed(0)} MB, after ${(after[i]! / 1e6).toFixed(0)} MB, ${settle} s later ${(settled[i]! / 1e6).toFixed(0)} MB\n`,
      )
    }
  } finally {
    await Promise.all(servers.map((s) => s.coffer.stop()))
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`)
  process.exitCode = 1
})
