// @suites: sqlite
import t, { type Test } from 'tap'
import path from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { CreateBucketCommand, GetObjectCommand, PutBucketVersioningCommand, PutObjectCommand, type S3Client, type S3ServiceException } from '@aws-sdk/client-s3'
import { fileBytes } from './helper'
import { bodyOf } from './s3-helper'
import { startReceiver, type Received } from './webhook-receiver'
import { clusterTenant, quotaDrift, s3Of, startCluster, uploadVia, withClusterFixtures, type Cluster, type ClusterNode } from './pg/cluster'

// The crash loop of #30 ("How it is tested"): clients upload (the API's handshake and PUT, S3
// PutObject) round-robin to three real nodes while random nodes are SIGKILLed and started again,
// and, separately, while PostgreSQL itself crashes (a private cluster, never the shared fixture)
// and comes back. Whatever was acknowledged reads back byte-identical from any node, and every
// tenant's and workspace's usage equals the sum of its rows.
t.setTimeout(300_000)

const PG_SCRIPT = path.resolve(__dirname, '..', 'scripts', 'pg-fixture.sh')
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const rand = (n: number) => Math.floor(Math.random() * n)

type Owner = Awaited<ReturnType<typeof clusterTenant>>

/** An upload a node acknowledged (200), and where to read it back. */
type Acked =
  | { kind: 'api'; owner: Owner; fileId: string; sha: string; size: number }
  | { kind: 's3'; owner: Owner; bucket: string; key: string; versionId?: string; sha: string; size: number }

/** One request's outcome: its HTTP status (0: no answer, the node died under it) and when it ran. */
interface Outcome {
  kind: 'handshake' | 'put' | 's3'
  node: number
  status: number
  retryAfter: string | null
  code?: string
  startedAt: number
  endedAt: number
}

/**
 * Clients uploading until stopped: `workers` loops, each taking the next live node for every
 * request (an API handshake on one, its PUT on the next; or a PutObject), sizes up to 200 KB.
 */
function startLoad(
  t: Test,
  cluster: Cluster,
  owners: { api: Owner; workspaceId?: string; s3: Owner; bucket: string; versioned: boolean }[],
  webhookUrl: string,
  workers = 6,
) {
  const acked: Acked[] = []
  const outcomes: Outcome[] = []
  const unanswered: { owner: Owner; fileId: string; presignedUrl: string; bytes: Buffer }[] = []
  const clients = new Map<string, S3Client>()
  const clientOf = (node: ClusterNode, owner: Owner) => {
    const id = `${node.s3} ${owner.id}`
    let c = clients.get(id)
    if (!c) clients.set(id, (c = s3Of(t, node, owner.credentials)))
    return c
  }
  let stopping = false
  let n = 0
  const one = async () => {
    const i = n++
    const o = owners[i % owners.length]!
    const size = 1 + rand(200_000)
    const startedAt = Date.now()
    if (i % 2 === 0) {
      const bytes = fileBytes('image/png', Math.max(size, 16), i)
      // The handshake on the next node, its PUT on the one after it (without taking its turn, so
      // that handshakes, PUTs and PutObjects each go to every node in turn).
      const on = cluster.next()
      const live = cluster.live()
      const putOn = live[(live.indexOf(on) + 1) % live.length]!
      try {
        const r = await uploadVia(on, o.api.auth, bytes, { putOn, webhookUrl, ...(o.workspaceId ? { workspaceId: o.workspaceId } : {}) })
        const record = (kind: 'handshake' | 'put', node: ClusterNode, status: number, body: unknown, retryAfter: string | null) =>
          outcomes.push({
            kind,
            node: node.index,
            status,
            retryAfter,
            code: (body as { error?: { code?: string } }).error?.code,
            startedAt,
            endedAt: Date.now(),
          })
        if (r.handshake !== 200) return record('handshake', on, r.handshake, r.body, r.retryAfter ?? null)
        record('handshake', on, 200, {}, null)
        record('put', putOn, r.put!, r.body, r.retryAfter ?? null)
        if (r.put === 200) acked.push({ kind: 'api', owner: o.api, fileId: r.fileId!, sha: sha(bytes), size: bytes.length })
        // Nothing was changed: the client may send the same PUT again once the database is back.
        if (r.put === 503) unanswered.push({ owner: o.api, fileId: r.fileId!, presignedUrl: r.presignedUrl!, bytes })
      } catch {
        outcomes.push({ kind: 'put', node: on.index, status: 0, retryAfter: null, startedAt, endedAt: Date.now() })
      }
    } else {
      const node = cluster.next()
      const body = randomBytes(size)
      // A few keys overwritten again and again in the versioned bucket (noncurrent versions are charged).
      const key = o.versioned ? `k/${rand(8)}` : `k/${i}`
      try {
        const r = await clientOf(node, o.s3).send(new PutObjectCommand({ Bucket: o.bucket, Key: key, Body: body }))
        outcomes.push({ kind: 's3', node: node.index, status: 200, retryAfter: null, startedAt, endedAt: Date.now() })
        acked.push({ kind: 's3', owner: o.s3, bucket: o.bucket, key, ...(r.VersionId ? { versionId: r.VersionId } : {}), sha: sha(body), size })
      } catch (err) {
        const e = err as S3ServiceException & { $response?: { headers?: Record<string, string> } }
        outcomes.push({
          kind: 's3',
          node: node.index,
          status: e.$metadata?.httpStatusCode ?? 0,
          retryAfter: e.$response?.headers?.['retry-after'] ?? null,
          code: e.name,
          startedAt,
          endedAt: Date.now(),
        })
      }
    }
  }
  const loops = Array.from({ length: workers }, async () => {
    while (!stopping) {
      if (cluster.live().length === 0) await sleep(50)
      else await one()
    }
  })
  return {
    acked,
    outcomes,
    unanswered,
    async stop() {
      stopping = true
      await Promise.all(loops)
    },
  }
}

/** Two tenants: one uploading into a workspace (and an unversioned bucket), one into a versioned bucket. */
async function owners(cluster: Cluster) {
  const [n1, n2] = cluster.nodes as [ClusterNode, ClusterNode]
  const a = await clusterTenant(n1, { name: 'crash-a', quotaBytes: 10 * 1024 ** 3 })
  const b = await clusterTenant(n2, { name: 'crash-b', quotaBytes: 10 * 1024 ** 3 })
  const ws = await fetch(`${n2.api}/api/v1/workspaces`, {
    method: 'POST',
    headers: { ...a.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Crash', slug: 'crash', quotaBytes: 5 * 1024 ** 3 }),
  })
  if (ws.status !== 201) throw new Error(`workspace: ${ws.status} ${await ws.text()}`)
  const workspaceId = ((await ws.json()) as { id: string }).id
  const ca = s3Of(t, n1, a.credentials)
  await ca.send(new CreateBucketCommand({ Bucket: 'plain' }))
  const cb = s3Of(t, n2, b.credentials)
  await cb.send(new CreateBucketCommand({ Bucket: 'versions' }))
  await cb.send(new PutBucketVersioningCommand({ Bucket: 'versions', VersioningConfiguration: { Status: 'Enabled' } }))
  return [
    { api: a, workspaceId, s3: a, bucket: 'plain', versioned: false },
    { api: b, s3: b, bucket: 'versions', versioned: true },
  ]
}

/** Every acknowledged upload read back from the live nodes in turn: the ones that differ or are missing. */
async function readBack(t: Test, cluster: Cluster, acked: Acked[]): Promise<string[]> {
  const lost: string[] = []
  const clients = new Map<string, S3Client>()
  for (const a of acked) {
    const node = cluster.next()
    try {
      if (a.kind === 'api') {
        const res = await fetch(`${node.api}/api/v1/files/${a.fileId}/download`, { headers: a.owner.auth })
        const got = Buffer.from(await res.arrayBuffer())
        if (res.status !== 200 || sha(got) !== a.sha) lost.push(`file ${a.fileId} on node ${node.index}: ${res.status}, ${got.length} of ${a.size} bytes`)
      } else {
        const id = `${node.s3} ${a.owner.id}`
        let c = clients.get(id)
        if (!c) clients.set(id, (c = s3Of(t, node, a.owner.credentials)))
        const got = await bodyOf(c.send(new GetObjectCommand({ Bucket: a.bucket, Key: a.key, ...(a.versionId ? { VersionId: a.versionId } : {}) })))
        if (sha(got) !== a.sha) lost.push(`${a.bucket}/${a.key} ${a.versionId ?? ''} on node ${node.index}: ${got.length} of ${a.size} bytes`)
      }
    } catch (err) {
      lost.push(`${a.kind === 'api' ? a.fileId : `${a.bucket}/${a.key} ${a.versionId ?? ''}`} on node ${node.index}: ${String(err)}`)
    }
  }
  return lost
}

/**
 * Waits up to `ms` for a `file.uploaded` event of every acknowledged API upload at the receiver:
 * the ones still missing then, and how many deliveries repeated a webhook-id (at-least-once).
 */
/**
 * What the crash loop requires after its crashes: every acknowledged upload reads back
 * byte-identical, no quota drift, and every acknowledged API upload's webhook delivered within `ms`.
 */
async function nothingLost(t: Test, cluster: Cluster, receiver: { received: Received[] }, acked: Acked[], ms: number, atLeastOnce = ''): Promise<void> {
  t.same(await readBack(t, cluster, acked), [], 'every acknowledged upload reads back byte-identical')
  t.same(await quotaDrift(cluster), [], "every tenant's and workspace's used_bytes equals the sum of its rows")
  const hooks = await webhooksOf(receiver, acked, ms)
  t.comment(
    `webhooks: ${acked.filter((a) => a.kind === 'api').length - hooks.missing.length} received, ${hooks.tookMs} ms after the checks; ${hooks.repeated} sent twice`,
  )
  t.same(hooks.missing, [], `every acknowledged upload's file.uploaded webhook delivered${atLeastOnce}`)
}

async function webhooksOf(receiver: { received: Received[] }, acked: Acked[], ms: number): Promise<{ missing: string[]; repeated: number; tookMs: number }> {
  const want = acked.flatMap((a) => (a.kind === 'api' ? [a.fileId] : []))
  const started = Date.now()
  const uploaded = () =>
    new Set(
      receiver.received.flatMap((r) => {
        const body = JSON.parse(r.body) as { event: string; fileId: string }
        return body.event === 'file.uploaded' ? [body.fileId] : []
      }),
    )
  let missing = want
  while (Date.now() - started < ms) {
    const got = uploaded()
    missing = want.filter((id) => !got.has(id))
    if (missing.length === 0) break
    await sleep(200)
  }
  const ids = receiver.received.map((r) => String(r.headers['webhook-id']))
  return { missing, repeated: ids.length - new Set(ids).size, tookMs: Date.now() - started }
}

const tally = (outcomes: Outcome[]) => {
  const by = new Map<string, number>()
  for (const o of outcomes) by.set(`${o.kind} ${o.status}`, (by.get(`${o.kind} ${o.status}`) ?? 0) + 1)
  return [...by].map(([k, v]) => `${k}: ${v}`).join(', ')
}

withClusterFixtures(t, 'the crash loop on three nodes', (pgUrl) => {
  t.test('random nodes SIGKILLed and started again while clients upload: nothing acknowledged lost, no quota drift', async (t) => {
    const cluster = await startCluster(t, pgUrl)
    const receiver = await startReceiver(t)
    const load = startLoad(t, cluster, await owners(cluster), receiver.url)
    const rounds = 5
    const killed: number[] = []
    for (let round = 0; round < rounds; round++) {
      await sleep(1000 + rand(1500))
      // One node, and now and then a second one at once (one always stays up).
      const victims = [cluster.live()[rand(cluster.live().length)]!]
      if (Math.random() < 0.4) victims.push(cluster.live().find((n) => n !== victims[0])!)
      for (const v of victims) await v.kill()
      killed.push(...victims.map((v) => v.index))
      await sleep(300 + rand(700))
      await Promise.all(victims.map((v) => v.start()))
    }
    await sleep(1000)
    await load.stop()
    const five = load.outcomes.filter((o) => o.status >= 500)
    t.comment(`${rounds} rounds, nodes killed: ${killed.join(' ')}; ${load.acked.length} uploads acknowledged (${tally(load.outcomes)})`)
    t.ok(load.acked.filter((a) => a.kind === 'api').length > 10 && load.acked.filter((a) => a.kind === 's3').length > 10, 'uploads of both fronts acknowledged')
    t.same(
      five.map((o) => `${o.kind} on node ${o.node}: ${o.status} ${o.code}`),
      [],
      'no 5xx answered (a node killed under a request answers nothing)',
    )
    await nothingLost(t, cluster, receiver, load.acked, 90_000, " (at least once: a killed node's claims lapse)")
  })

  t.test(
    'PostgreSQL crashed and started again while clients upload: 503 with Retry-After, nothing acknowledged lost, nodes recover by themselves',
    async (t) => {
      const pg = privatePg(t)
      if (!pg) return
      const cluster = await startCluster(t, pg.url)
      const receiver = await startReceiver(t)
      const load = startLoad(t, cluster, await owners(cluster), receiver.url)
      const outages: { from: number; to: number }[] = []
      const recovered: number[] = []
      for (let round = 0; round < 2; round++) {
        await sleep(1500)
        const from = Date.now()
        pg.run('crash')
        await sleep(2000 + rand(1000))
        const to = Date.now()
        pg.run('start')
        outages.push({ from, to })
        // Each node answers again by itself: /health 200 at its next look, no restart.
        const back = Date.now()
        await Promise.all(
          cluster.nodes.map(async (n) => {
            for (;;) {
              const res = await fetch(`${n.api}/health`)
              if (res.status === 200) return
              await sleep(100)
            }
          }),
        )
        recovered.push(Date.now() - back)
        await sleep(1500)
      }
      await load.stop()
      const during = load.outcomes.filter((o) => outages.some((w) => o.startedAt >= w.from + 200 && o.endedAt <= w.to))
      const unavailable = load.outcomes.filter((o) => o.status === 503)
      t.comment(
        `outages ${outages.map((w) => `${w.to - w.from} ms`).join(', ')}; all nodes healthy again ${recovered.map((ms) => `${ms} ms`).join(', ')} after PostgreSQL's start; ` +
          `${load.acked.length} acknowledged; ${unavailable.length} answered 503 (${during.length} requests wholly inside an outage); ${tally(load.outcomes)}`,
      )
      t.ok(during.length > 0, 'requests were made during the outages')
      t.same(
        during.filter((o) => o.status !== 503).map((o) => `${o.kind} on node ${o.node}: ${o.status} ${o.code}`),
        [],
        'every request inside an outage answered 503',
      )
      t.same(
        unavailable.filter((o) => o.retryAfter !== '5').map((o) => `${o.kind}: Retry-After ${o.retryAfter}`),
        [],
        'each 503 with Retry-After: 5',
      )
      t.same(
        load.outcomes.filter((o) => o.status >= 500 && o.status !== 503).map((o) => `${o.kind} on node ${o.node}: ${o.status} ${o.code}`),
        [],
        'never another 5xx',
      )
      t.same(
        load.outcomes.filter((o) => o.status === 0).map((o) => `${o.kind} on node ${o.node}`),
        [],
        'every request answered (no node died)',
      )
      t.equal(cluster.live().length, 3, 'all three nodes still running')
      const after = load.outcomes.filter((o) => o.startedAt > outages.at(-1)!.to + recovered.at(-1)! && o.status === 200)
      t.same([...new Set(after.map((o) => o.node))].sort(), [1, 2, 3], 'each node served uploads after the last outage')
      // A PUT answered 503 (its commit found the database gone) is sent again, as Retry-After says.
      const retried = await Promise.all(
        load.unanswered.map(async (u) => {
          const node = cluster.next()
          const res = await fetch(`${node.api}${u.presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: new Uint8Array(u.bytes) })
          if (res.status === 200) load.acked.push({ kind: 'api', owner: u.owner, fileId: u.fileId, sha: sha(u.bytes), size: u.bytes.length })
          return `${res.status} ${res.status === 200 ? '' : await res.text()}`.trim()
        }),
      )
      t.comment(`${retried.length} PUTs answered 503 sent again: ${retried.join(', ')}`)
      t.same(
        retried.filter((r) => r !== '200'),
        [],
        'each PUT answered 503 completes when sent again',
      )
      await nothingLost(t, cluster, receiver, load.acked, 30_000)
    },
  )
})

/**
 * A PostgreSQL cluster of this test's own (scripts/pg-fixture.sh with COFFER_PG_DIR), stopped and
 * removed at the end: the shared fixture is never crashed. Undefined (and a failure) if it cannot start.
 */
function privatePg(t: Test): { url: string; run(cmd: 'crash' | 'start'): void } | undefined {
  const dir = `/tmp/coffer-pg-crash-${randomBytes(4).toString('hex')}`
  const env = { ...process.env, COFFER_PG_DIR: dir }
  const run = (cmd: string) => {
    const r = spawnSync('bash', [PG_SCRIPT, ...cmd.split(' ')], { env, encoding: 'utf8', timeout: 300_000 })
    if (r.status !== 0) throw new Error(`pg-fixture.sh ${cmd} failed (${r.status}): ${r.stderr}`)
    return r.stdout
  }
  t.teardown(() => void run('stop --purge'))
  const started = Date.now()
  let url: string | undefined
  try {
    url = /^COFFER_DATABASE_URL=(.+)$/m.exec(run('start'))?.[1]
  } catch (err) {
    t.fail(`a private PostgreSQL cluster: ${String(err)}`)
    return undefined
  }
  t.comment(`a private PostgreSQL cluster in ${dir}, started in ${Date.now() - started} ms`)
  return { url: url!, run: (cmd) => void run(cmd) }
}
