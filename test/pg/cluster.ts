// Several real `coffer serve` processes on one PostgreSQL schema and one Ceph gateway (#30, "How
// it is tested"): the built dist/coffer.cjs, each node with a data dir of its own, one shared
// COFFER_SECRET (a presigned path or an S3 secret made by one node is checked by another), one
// key prefix on the gateway, `--workers 1`, ports 0. Requests go round-robin over the live nodes.
import path from 'node:path'
import type { Test } from 'tap'
import { S3Client } from '@aws-sdk/client-s3'
import { buildBundle, createTenantOverHttp, startCoffer, type Running } from '../process-helper'
import { purgeStoredBlobs, tempDir, testStoreEnv } from '../helper'
import { fixtureEnv } from '../s3/fixture'
import { admin as pgAdmin, freshSchema, pgFixture } from './fixture'

export const ADMIN = 'cluster-admin-key-0123456789abcdef'
export const SECRET = 'cluster-shared-secret-0123456789abcdef'

export interface ClusterNode {
  readonly index: number
  readonly dataDir: string
  /** The running process, undefined while the node is down. */
  running: Running | undefined
  api: string
  s3: string
  /** Starts the node (again) on its data dir: new ports. */
  start(): Promise<void>
  /** SIGKILLs the node and waits until it is gone. */
  kill(): Promise<void>
  /** The pid in the `holder` column of the leases it takes ("pid N …"). */
  pid(): number | undefined
}

export interface Cluster {
  /** The schema's URL (its search_path set), for the test's own SQL. */
  url: string
  nodes: ClusterNode[]
  /** The live nodes. */
  live(): ClusterNode[]
  /** The next live node, round-robin. */
  next(): ClusterNode
  /** One statement on the schema, on a connection of the test's own. */
  sql<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>
}

/**
 * Runs `body` with the two fixtures' settings, or skips visibly naming the one missing (fails
 * under CI=true, where both are started by .ci/run).
 */
export function withClusterFixtures(t: Test, name: string, body: (pgUrl: string) => void): void {
  const pg = pgFixture()
  const ceph = fixtureEnv()
  const missing =
    'unavailable' in pg ? `the PostgreSQL fixture: ${pg.unavailable}` : 'unavailable' in ceph ? `the Ceph fixture: ${ceph.unavailable}` : undefined
  if (missing === undefined && 'url' in pg) return body(pg.url)
  if (process.env.CI === 'true') t.fail(`${name} needs ${missing}`)
  else t.test(name, { skip: `needs ${missing}` }, () => {})
}

/**
 * `n` nodes on a fresh schema of `pgUrl` (the shared fixture's, or a private cluster's), started
 * one after another (the first migrates; the others find the schema done), killed at the end.
 */
export async function startCluster(t: Test, pgUrl: string, o: { nodes?: number; env?: Record<string, string> } = {}): Promise<Cluster> {
  buildBundle()
  const url = await freshSchema(t, pgUrl)
  const storeEnv = testStoreEnv('s3')
  const cwd = tempDir(t, 'coffer-cluster-')
  const env = {
    ...storeEnv,
    COFFER_DATABASE_URL: url,
    COFFER_SECRET: SECRET,
    COFFER_ADMIN_API_KEY: ADMIN,
    COFFER_LOG_LEVEL: 'info',
    COFFER_WEBHOOK_ALLOW_PRIVATE: 'true',
    COFFER_DISK_RESERVE_BYTES: '65536',
    ...o.env,
  }
  const nodes: ClusterNode[] = Array.from({ length: o.nodes ?? 3 }, (_, i) => {
    const dataDir = path.join(cwd, `node${i + 1}`)
    const node: ClusterNode = {
      index: i + 1,
      dataDir,
      running: undefined,
      api: '',
      s3: '',
      async start() {
        // --s3-port overrides the COFFER_S3_PORT=off of the store env (flags win over the environment).
        const r = await startCoffer(['serve', '--host', '127.0.0.1', '--port', '0', '--s3-port', '0', '--workers', '1', '--data-dir', dataDir], {
          cwd,
          env,
          ready: /coffer S3 listening on (http:\/\/[^\s"]+)/,
          timeoutMs: 120_000,
        })
        node.running = r
        node.s3 = r.url
        node.api = /coffer listening on (http:\/\/[^\s"]+)/.exec(r.lines.join('\n'))![1]!
      },
      async kill() {
        const r = node.running
        if (!r) return
        node.running = undefined
        r.child.kill('SIGKILL')
        await r.exited
      },
      pid: () => node.running?.child.pid,
    }
    return node
  })
  t.teardown(async () => {
    await Promise.all(nodes.map((n) => n.kill()))
    await purgeStoredBlobs(storeEnv, nodes[0]!.dataDir)
  })
  for (const n of nodes) await n.start()
  let turn = 0
  const cluster: Cluster = {
    url,
    nodes,
    live: () => nodes.filter((n) => n.running),
    next() {
      const live = cluster.live()
      if (live.length === 0) throw new Error('no live node')
      return live[turn++ % live.length]!
    },
    sql: async (text, params) => (await pgAdmin(url, text, params)).rows,
  }
  return cluster
}

/** A tenant made over the admin API of `node`, with one S3 credential. */
export async function clusterTenant(
  node: ClusterNode,
  body: { name: string; quotaBytes?: number },
): Promise<{ id: string; apiKey: string; auth: { authorization: string }; credentials: { accessKeyId: string; secretAccessKey: string } }> {
  const tenant = await createTenantOverHttp(node.api, ADMIN, body)
  const res = await fetch(`${node.api}/api/v1/admin/tenants/${tenant.id}/s3-credentials`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } })
  if (res.status !== 201) throw new Error(`S3 credential creation failed: ${res.status} ${await res.text()}`)
  const credentials = (await res.json()) as { accessKeyId: string; secretAccessKey: string }
  return { ...tenant, credentials }
}

/** An SDK client of `node`'s S3 front that never retries (an answer lost with a node is not re-sent), destroyed at the end. */
export function s3Of(t: Test, node: ClusterNode, credentials: { accessKeyId: string; secretAccessKey: string }): S3Client {
  const c = new S3Client({ endpoint: node.s3, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 })
  t.teardown(() => c.destroy())
  return c
}

/** Handshake on `on`, PUT on `putOn` (default the same node): the status of each and the file id. */
export async function uploadVia(
  on: ClusterNode,
  auth: { authorization: string },
  bytes: Buffer,
  o: { putOn?: ClusterNode; declare?: boolean; workspaceId?: string; webhookUrl?: string; name?: string } = {},
): Promise<{ handshake: number; put?: number; fileId?: string; presignedUrl?: string; body?: unknown; retryAfter?: string | null }> {
  const hs = await fetch(`${on.api}/api/v1/upload/request`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({
      fileType: 'image/png',
      fileName: o.name ?? 'photo.png',
      ...(o.declare === false ? {} : { fileSizeBytes: bytes.length }),
      ...(o.workspaceId ? { workspaceId: o.workspaceId } : {}),
      ...(o.webhookUrl ? { webhookUrl: o.webhookUrl } : {}),
    }),
  })
  const hsBody = (await hs.json()) as { fileId: string; presignedUrl: string }
  if (hs.status !== 200) return { handshake: hs.status, body: hsBody, retryAfter: hs.headers.get('retry-after') }
  const put = await fetch(`${(o.putOn ?? on).api}${hsBody.presignedUrl}`, {
    method: 'PUT',
    headers: { 'content-type': 'image/png' },
    body: new Uint8Array(bytes),
  })
  const body = (await put.json()) as unknown
  return { handshake: 200, put: put.status, fileId: hsBody.fileId, presignedUrl: hsBody.presignedUrl, body, retryAfter: put.headers.get('retry-after') }
}

/**
 * What each tenant's and workspace's `used_bytes` should be, from the rows the triggers charge
 * (live non-failed files, noncurrent versions, parts of open multipart uploads), beside the
 * counter: a row per scope whose two differ.
 */
export async function quotaDrift(cluster: Cluster): Promise<{ scope: string; id: string; used: number; expected: number }[]> {
  const sums = `
    WITH charged AS (
      SELECT tenant_id, workspace_id, size_bytes AS n FROM files WHERE deleted_at IS NULL AND status <> 'failed'
      UNION ALL SELECT tenant_id, workspace_id, size_bytes FROM object_versions WHERE noncurrent_at IS NOT NULL
      UNION ALL SELECT u.tenant_id, u.workspace_id, p.size_bytes FROM s3_parts p JOIN s3_uploads u ON u.id = p.upload_id
    )`
  const rows = await cluster.sql<{ scope: string; id: string; used: string; expected: string }>(
    `${sums}
     SELECT 'tenant' AS scope, t.id, t.used_bytes::text AS used, coalesce((SELECT sum(n) FROM charged c WHERE c.tenant_id = t.id), 0)::text AS expected FROM tenants t
     UNION ALL
     SELECT 'workspace', w.id, w.used_bytes::text, coalesce((SELECT sum(n) FROM charged c WHERE c.workspace_id = w.id), 0)::text FROM workspaces w`,
  )
  return rows.map((r) => ({ scope: r.scope, id: r.id, used: Number(r.used), expected: Number(r.expected) })).filter((r) => r.used !== r.expected)
}
