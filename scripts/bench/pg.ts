/**
 * The PostgreSQL fixture as the bench sees it (#30): its URL, a schema of the bench's own (the
 * fixture is shared by every session on the machine: never stopped, restarted or purged here), and
 * the CPU its server processes spend, read from /proc.
 */
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { ROOT } from './coffer'
import { cpuMs } from './processes'

/** The fixture's COFFER_DATABASE_URL (`scripts/pg-fixture.sh start`: idempotent, fast when it runs), or why not. */
export function pgFixtureUrl(): { url: string } | { unavailable: string } {
  const r = spawnSync('bash', [path.join(ROOT, 'scripts', 'pg-fixture.sh'), 'start'], { encoding: 'utf8', timeout: 15 * 60_000 })
  const url = /^COFFER_DATABASE_URL=(.+)$/m.exec(r.stdout ?? '')?.[1]
  if (r.status !== 0 || url === undefined)
    return { unavailable: `scripts/pg-fixture.sh start failed: ${(r.stderr ?? '').trim().split('\n').slice(-2).join(' | ')}` }
  return { url }
}

/** One statement on a connection of its own, named so that it is never counted as a node's backend. */
export async function pgAdmin(url: string, sql: string): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: url, application_name: 'coffer-bench-admin' })
  await c.connect()
  try {
    return await c.query(sql)
  } finally {
    await c.end()
  }
}

export interface BenchSchema {
  name: string
  /**
   * The URL for one node: the schema first on its search path, and an application_name of its own
   * (the URL's parameters win over the bridge's `application_name: 'coffer'`), by which its
   * backend is found in pg_stat_activity.
   */
  urlFor(node: string): string
  drop(): Promise<void>
}

export async function benchSchema(url: string): Promise<BenchSchema> {
  const name = `bench_${randomBytes(5).toString('hex')}`
  await pgAdmin(url, `CREATE SCHEMA ${name}`)
  return {
    name,
    urlFor(node) {
      const u = new URL(url)
      u.searchParams.set('options', `-c search_path=${name}`)
      u.searchParams.set('application_name', `coffer-bench-${node}`)
      return u.toString()
    },
    drop: () => pgAdmin(url, `DROP SCHEMA ${name} CASCADE`).then(() => undefined),
  }
}

/** CPU ms so far of each pid, skipping those that have ended. */
function cpuOf(pids: Iterable<number>): Map<number, number> {
  const out = new Map<number, number>()
  for (const pid of pids) {
    try {
      out.set(pid, cpuMs(pid))
    } catch {
      // ended since it was listed
    }
  }
  return out
}

const children = (pid: number): number[] => {
  const r = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
  return r.stdout.split('\n').filter(Boolean).map(Number)
}

const cmdline = (pid: number): string => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim()
  } catch {
    return ''
  }
}

/** A snapshot of the server's processes' CPU: the nodes' own backends, and the server's background processes. */
export interface PgCpu {
  /** node name (the application_name after `coffer-bench-`) → CPU ms of its backends. */
  backends: Map<string, Map<number, number>>
  /** The postmaster and its background processes (checkpointer, walwriter, autovacuum…): not client backends. */
  background: Map<number, number>
}

/**
 * Reads the CPU of the nodes' backends (found by application_name) and of the server's background
 * processes. Other sessions' backends are left out; the background processes serve them too, so
 * their share is an upper bound of what the nodes cost them.
 */
export async function pgCpu(url: string): Promise<PgCpu> {
  const c = new pg.Client({ connectionString: url, application_name: 'coffer-bench-admin' })
  await c.connect()
  let rows: { pid: number; app: string }[]
  let postmaster: number
  try {
    rows = (await c.query("SELECT pid, application_name AS app FROM pg_stat_activity WHERE application_name LIKE 'coffer-bench-%'")).rows as typeof rows
    // The postmaster is the parent of any backend: this connection's own, read while it lives.
    const self = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0] as { pid: number }
    postmaster = Number(fs.readFileSync(`/proc/${self.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1])
  } finally {
    await c.end()
  }
  const backends = new Map<string, Map<number, number>>()
  for (const r of rows) {
    if (r.app === 'coffer-bench-admin') continue
    const node = r.app.slice('coffer-bench-'.length)
    const m = backends.get(node) ?? new Map<number, number>()
    for (const [pid, ms] of cpuOf([r.pid])) m.set(pid, ms)
    backends.set(node, m)
  }
  // Background processes have no client address in their title ("postgres: walwriter").
  const bg = children(postmaster).filter((p) => !/\(\d+\)|\[local\]/.test(cmdline(p)))
  return { backends, background: cpuOf([postmaster, ...bg]) }
}

/** CPU ms between two snapshots: per pid, the later reading less the earlier (0 for a pid new since). */
function spent(before: Map<number, number>, after: Map<number, number>): number {
  let ms = 0
  for (const [pid, v] of after) ms += v - (before.get(pid) ?? 0)
  return ms
}

export function pgCpuSpent(before: PgCpu, after: PgCpu): { backends: Map<string, number>; background: number } {
  const backends = new Map<string, number>()
  for (const [node, m] of after.backends) backends.set(node, spent(before.backends.get(node) ?? new Map<number, number>(), m))
  return { backends, background: spent(before.background, after.background) }
}
