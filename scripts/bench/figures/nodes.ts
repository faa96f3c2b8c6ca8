/**
 * 4 KiB uploads and downloads through 1 and 3 Coffer nodes on one PostgreSQL (#30), beside one
 * node on SQLite, in the same run: S3 PutObject/GetObject (wrk, requests signed ahead as in s3.ts)
 * and the API's 4 KiB uploads (handshake + PUT) and downloads. The nodes are three `coffer serve`
 * processes (COFFER_WORKERS=1) on one schema of the PostgreSQL fixture, one data dir path (4 KiB
 * content lives in the database, blob_inline, so the path holds no content of these runs) and one
 * COFFER_SECRET. The load is spread round-robin: the 16 connections are dealt to the nodes in turn
 * (6, 5, 5), one wrk process per node, all at once.
 *
 * Everything shares the machine's 2 cores (nodes, wrk, PostgreSQL, the other sessions), so the
 * 3-node rate here says little about 3 machines: the figure reports each process's CPU per
 * operation from /proc (each node; the nodes' PostgreSQL backends, found by application_name; the
 * server's background processes, which other sessions' load shares) and derives what 3 nodes would
 * do each on a core of its own. A node waits for each statement's round trip (the synchronous
 * bridge holds its event loop, README "Metadata in PostgreSQL"), so one node's operation costs its
 * own CPU plus its backend's, in series: 1000 / (node + backend ms) per node, 3 of them, bounded by
 * 1000 / (all PostgreSQL ms) per core PostgreSQL has.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { auth, handshakeBody, pngBytes, startCoffer, upload, type Coffer } from '../coffer'
import { cliTenant, createBucket, s3Request, type Tenant } from '../cli-seed'
import { cpuMs } from '../processes'
import { benchSchema, pgCpu, pgCpuSpent, pgFixtureUrl, type BenchSchema } from '../pg'
import { encodePath, prepareSigned } from '../s3-sign'
import { interleaved, median } from '../stats'
import { GENERATOR_BOUND_SHARE, idsFile, templateFile, wrk, type WrkResult } from '../wrk'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'

const SMALL = 4096
const CONNECTIONS = 16
/** Keys signed per node and second of a PutObject run: more than one node here can write. */
const PUTS_PER_SECOND_CAP = 4000
const OBJECTS = 256

type Op = 's3Get' | 's3Put' | 'apiGet' | 'apiPut'
const OPS: Record<Op, { title: string; unit: string }> = {
  s3Get: { title: '4 KiB GetObject/s', unit: 'req/s' },
  s3Put: { title: '4 KiB PutObject/s', unit: 'objects/s' },
  apiGet: { title: '4 KiB API downloads/s', unit: 'req/s' },
  apiPut: { title: '4 KiB API uploads/s (handshake + PUT)', unit: 'uploads/s' },
}

interface Node {
  name: string
  server: Coffer
}

interface Setup {
  name: 'sqlite1' | 'pg1' | 'pg3'
  label: string
  nodes: Node[]
  tenant: Tenant
  /** The ids of the API's 4 KiB files, and the paths of the S3 objects, readable from every node of the setup. */
  ids: string
  keys: string[]
}

/** One measured run of one setup: operations/s, and CPU ms per operation of each process group. */
interface Sample {
  rate: number
  generatorShares: number[]
  /** Per node: CPU ms of its process over the operations it answered. */
  nodeMs: number[]
  /** CPU ms of all the setup's node processes over all its operations. */
  nodesMs: number
  /** Its PostgreSQL backends, and the server's background processes, per operation (PostgreSQL only). */
  backendsMs?: number
  backgroundMs?: number
  load: number
}

const specOf = (op: Op, which: 'pg3' | 'pg1'): Omit<FigureResult, 'coffer' | 'baseline' | 'ratio' | 'met'> =>
  which === 'pg3'
    ? {
        key: `nodes-3-${op}`,
        figure: `3 nodes on PostgreSQL: ${OPS[op].title} (c=16 round-robin)`,
        baselineLabel: '1 node on PostgreSQL, c=16, same run',
        unit: OPS[op].unit,
        target: 'report (same 2 cores)',
      }
    : {
        key: `nodes-1-${op}`,
        figure: `1 node on PostgreSQL: ${OPS[op].title} (c=16)`,
        baselineLabel: '1 node on SQLite, c=16, same run',
        unit: OPS[op].unit,
        target: 'report',
      }

export async function nodesFigures(ctx: BenchContext): Promise<FigureResult[]> {
  const all = (why: string) => (Object.keys(OPS) as Op[]).flatMap((op) => [notMeasured(specOf(op, 'pg1'), why), notMeasured(specOf(op, 'pg3'), why)])
  if ('unavailable' in ctx.wrk) return all(`wrk: ${ctx.wrk.unavailable}`)
  const bin = ctx.wrk.path
  const fixture = pgFixtureUrl()
  if ('unavailable' in fixture) return all(`PostgreSQL: ${fixture.unavailable}`)
  const schema: BenchSchema = await benchSchema(fixture.url)
  const servers: Coffer[] = []
  try {
    const cmd = ctx.shipped
    // SQLite: one node on a data dir of its own.
    const sqliteDir = path.join(ctx.dir, 'nodes-sqlite')
    const sqlite = await startCoffer(sqliteDir, cmd)
    servers.push(sqlite)
    // PostgreSQL: three nodes on one schema, one data dir path and one secret.
    const pgDir = path.join(ctx.dir, 'nodes-pg')
    const secret = randomBytes(24).toString('hex')
    const pgEnv = (node: string) => ({ COFFER_DATABASE_URL: schema.urlFor(node), COFFER_SECRET: secret })
    const pgNodes: Node[] = []
    for (const name of ['node1', 'node2', 'node3']) {
      const server = await startCoffer(pgDir, cmd, pgEnv(name))
      servers.push(server)
      pgNodes.push({ name, server })
    }
    ctx.log(`  nodes: SQLite node, 3 nodes on PostgreSQL schema ${schema.name} (${cmd.label})`)

    const seedSetup = async (dir: string, node: Coffer, env: Record<string, string>, tag: string) => {
      const tenant = cliTenant(cmd, dir, env)
      const bucket = await createBucket(node.s3Url, tenant.creds)
      const ids: string[] = []
      const keys: string[] = []
      for (let i = 0; i < OBJECTS; i++) {
        ids.push((await upload(node.url, tenant.apiKey, pngBytes(SMALL))).fileId)
        const p = `${bucket}/get/${i}.bin`
        await s3Request(node.s3Url, tenant.creds, 'PUT', p, pngBytes(SMALL))
        keys.push(p)
      }
      return { tenant, ids: idsFile(ctx.dir, `nodes-${tag}`, ids), keys }
    }
    const sqliteSeed = await seedSetup(sqliteDir, sqlite, {}, 'sqlite')
    const pgSeed = await seedSetup(pgDir, pgNodes[0]!.server, pgEnv('cli'), 'pg')
    const setups: Setup[] = [
      { name: 'sqlite1', label: '1 node, SQLite', nodes: [{ name: 'sqlite', server: sqlite }], ...sqliteSeed },
      { name: 'pg1', label: '1 node, PostgreSQL', nodes: pgNodes.slice(0, 1), ...pgSeed },
      { name: 'pg3', label: '3 nodes, PostgreSQL', nodes: pgNodes, ...pgSeed },
    ]

    let round = 0
    /** One wrk process per node, all at once, the connections dealt in turn. */
    const runOnce = async (s: Setup, op: Op, seconds: number): Promise<Sample> => {
      const r = ++round
      const template = templateFile(ctx.dir, `nodes-${r}`, pngBytes(SMALL))
      const runs = s.nodes.map((n, i) => {
        const connections = Math.floor(CONNECTIONS / s.nodes.length) + (i < CONNECTIONS % s.nodes.length ? 1 : 0)
        const host = n.server.s3Url.replace('http://', '')
        // Each wrk writes its script into its dir: three writing one file at once left one reading
        // it truncated (no script: unsigned GETs of /, and no summary).
        const dir = path.join(ctx.dir, `wrk-${n.name}`)
        fs.mkdirSync(dir, { recursive: true })
        const common = { bin, dir, connections, seconds }
        switch (op) {
          case 's3Get': {
            const file = prepareSigned(path.join(ctx.dir, `nodes-get-${n.name}.signed`), s.tenant.creds, 'GET', host, s.keys)
            return () => wrk({ ...common, url: n.server.s3Url, script: 'preparedS3', args: [file, 'GET'] })
          }
          case 's3Put': {
            const paths = Array.from({ length: PUTS_PER_SECOND_CAP * seconds }, (_, k) => encodePath(`/bench/put/${r}/${n.name}/${k}.bin`))
            const file = prepareSigned(path.join(ctx.dir, `nodes-put-${r}-${n.name}.signed`), s.tenant.creds, 'PUT', host, paths)
            return () => wrk({ ...common, url: n.server.s3Url, script: 'preparedS3', args: [file, 'PUT', template, '1'] })
          }
          case 'apiGet':
            return () =>
              wrk({ ...common, url: n.server.url, script: 'randomGet', args: [s.ids, '/api/v1/files/', '/download', auth(s.tenant.apiKey).authorization] })
          case 'apiPut':
            return () => wrk({ ...common, url: n.server.url, script: 'twoStepUpload', args: [s.tenant.apiKey, template, handshakeBody(SMALL).toString()] })
        }
      })
      const onPg = s.name !== 'sqlite1'
      const pg0 = onPg ? await pgCpu(fixture.url) : undefined
      const cpu0 = s.nodes.map((n) => cpuMs(n.server.pid))
      const results: WrkResult[] = await Promise.all(runs.map((run) => run()))
      const cpu1 = s.nodes.map((n) => cpuMs(n.server.pid))
      const pg1 = onPg ? await pgCpu(fixture.url) : undefined
      const ops = results.reduce((sum, w) => sum + w.good, 0)
      // A node that answered nothing in the run (starved by the machine's other load) has no CPU per operation.
      const nodeMs = results.map((w, i) => (w.good > 0 ? (cpu1[i]! - cpu0[i]!) / w.good : Number.NaN))
      const sample: Sample = {
        rate: results.reduce((sum, w) => sum + w.rps, 0),
        generatorShares: results.map((w) => w.generatorCpuShare),
        nodeMs,
        nodesMs: cpu1.reduce((sum, v, i) => sum + v - cpu0[i]!, 0) / ops,
        load: os.loadavg()[0]!,
      }
      if (pg0 && pg1) {
        const d = pgCpuSpent(pg0, pg1)
        const mine = s.nodes.reduce((sum, n) => sum + (d.backends.get(n.name) ?? 0), 0)
        if (mine === 0) throw new Error(`no CPU found for the backends of ${s.nodes.map((n) => n.name).join(', ')} (application_name not seen?)`)
        sample.backendsMs = mine / ops
        sample.backgroundMs = d.background / ops
      }
      return sample
    }

    const out: FigureResult[] = []
    for (const op of Object.keys(OPS) as Op[]) {
      ctx.log(`  nodes: ${OPS[op].title}: 1 node on SQLite, 1 and 3 nodes on PostgreSQL`)
      for (const s of setups) await runOnce(s, op, 2)
      const samples: Record<Setup['name'], Sample[]> = { sqlite1: [], pg1: [], pg3: [] }
      await interleaved(
        ctx.runs,
        setups.map((s) => async () => {
          const x = await runOnce(s, op, ctx.loadSeconds)
          samples[s.name].push(x)
          return x.rate
        }),
      )
      out.push(...rows(op, samples, ctx.loadSeconds))
    }
    return out
  } finally {
    await Promise.all(servers.map((c) => c.stop()))
    await schema.drop().catch((err: unknown) => ctx.log(`  nodes: could not drop schema ${schema.name}: ${(err as Error).message}`))
  }
}

const r2 = (v: number) => Math.round(v * 100) / 100
const list = (v: number[]) => v.map((x) => x.toFixed(2)).join(', ')
const range = (v: number[]) => `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)}`

function rows(op: Op, s: Record<'sqlite1' | 'pg1' | 'pg3', Sample[]>, seconds: number): FigureResult[] {
  const rate = (k: keyof typeof s) => s[k].map((x) => x.rate)
  const ratios = (a: keyof typeof s, b: keyof typeof s) => s[a].map((x, i) => x.rate / s[b][i]!.rate)
  const busiest = Math.max(...Object.values(s).flatMap((v) => v.flatMap((x) => x.generatorShares)))
  const invalid =
    busiest >= GENERATOR_BOUND_SHARE
      ? `a wrk process used ${(busiest * 100).toFixed(0)}% of its core (limit ${GENERATOR_BOUND_SHARE * 100}%): the generator was the limit`
      : undefined
  // What 3 nodes would do on machines of their own, from the 3-node runs' CPU per operation.
  const nodeMs = median(s.pg3.map((x) => x.nodesMs))
  const backendMs = median(s.pg3.map((x) => x.backendsMs!))
  const backgroundMs = median(s.pg3.map((x) => x.backgroundMs!))
  const perNode = 1000 / (nodeMs + backendMs)
  const pgBound = 1000 / (backendMs + backgroundMs)
  const projected = Math.min(3 * perNode, pgBound)
  const cpu = (k: keyof typeof s) =>
    `${s[k].map((x) => list(x.nodeMs)).join(' | ')} ms per op per node` +
    (k === 'sqlite1' ? '' : `; its PostgreSQL backends ${list(s[k].map((x) => x.backendsMs!))} ms, background ${list(s[k].map((x) => x.backgroundMs!))} ms`)
  const loads = Object.values(s).flatMap((v) => v.map((x) => x.load))
  const details = {
    seconds,
    rates: { sqlite1: rate('sqlite1'), pg1: rate('pg1'), pg3: rate('pg3') },
    cpuMsPerOp: Object.fromEntries(
      Object.entries(s).map(([k, v]) => [
        k,
        v.map((x) => ({ nodes: x.nodeMs.map(r2), allNodes: r2(x.nodesMs), pgBackends: x.backendsMs, pgBackground: x.backgroundMs })),
      ]),
    ),
    generatorCpuShare: Object.fromEntries(Object.entries(s).map(([k, v]) => [k, v.map((x) => x.generatorShares.map(r2))])),
    loadAverage1m: loads.map(r2),
    projection: {
      nodeMs: r2(nodeMs),
      backendMs: r2(backendMs),
      backgroundMs: r2(backgroundMs),
      perNode: Math.round(perNode),
      pgBoundPerCore: Math.round(pgBound),
      threeNodes: Math.round(projected),
    },
  }
  const three: FigureResult = {
    ...specOf(op, 'pg3'),
    coffer: median(rate('pg3')),
    baseline: median(rate('pg1')),
    ratio: median(ratios('pg3', 'pg1')),
    met: null,
    ...(invalid ? { invalid } : {}),
    note:
      `runs ${range(rate('pg3'))} against ${range(rate('pg1'))}/s, load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}; ` +
      `CPU: 3 nodes ${cpu('pg3')}; 1 node ${cpu('pg1')}. On machines of their own: a node ${nodeMs.toFixed(2)} ms + its backend ` +
      `${backendMs.toFixed(2)} ms in series → ${perNode.toFixed(0)}/s per node, 3 nodes ${(3 * perNode).toFixed(0)}/s, bounded by PostgreSQL ` +
      `(${(backendMs + backgroundMs).toFixed(2)} ms per op, background included) at ${pgBound.toFixed(0)}/s per core: ≈ ${projected.toFixed(0)}/s`,
    details,
  }
  const one: FigureResult = {
    ...specOf(op, 'pg1'),
    coffer: median(rate('pg1')),
    baseline: median(rate('sqlite1')),
    ratio: median(ratios('pg1', 'sqlite1')),
    met: null,
    ...(invalid ? { invalid } : {}),
    note: `runs ${range(rate('pg1'))} against ${range(rate('sqlite1'))}/s; CPU: PostgreSQL node ${cpu('pg1')}; SQLite node ${cpu('sqlite1')}; the fixture runs fsync = off, SQLite fsyncs its commits`,
    details: { seconds, rates: details.rates },
  }
  return [one, three]
}
