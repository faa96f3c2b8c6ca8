// @suites: sqlite
import t, { type Test } from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListBucketsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { fileBytes } from './helper'
import { bodyOf, s3Error } from './s3-helper'
import { startReceiver } from './webhook-receiver'
import { ADMIN, clusterTenant, quotaDrift, s3Of, startCluster, uploadVia, withClusterFixtures, type Cluster, type ClusterNode } from './pg/cluster'

// Three real `coffer serve` processes on one PostgreSQL and one Ceph gateway (#30, "How it is
// tested"), requests sent round-robin: what one node writes, another reads and a third deletes;
// one quota, one outbox, one set of credentials and one lease table shared by all three.
t.setTimeout(300_000)

const LEASE_SECONDS = 3
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')
const adminAuth = { authorization: `Bearer ${ADMIN}` }

withClusterFixtures(t, 'three coffer nodes on one PostgreSQL and one Ceph gateway', (pgUrl) => {
  t.test('three nodes', async (t) => {
    const started = Date.now()
    const cluster = await startCluster(t, pgUrl, { env: { COFFER_LEASE_SECONDS: String(LEASE_SECONDS) } })
    t.comment(`3 nodes started in ${Date.now() - started} ms`)
    const [n1, n2, n3] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode]

    await t.test('an upload on node 1 is read on node 2 and deleted on node 3, then gone from all three', async (t) => {
      const owner = await clusterTenant(n1, { name: 'roundtrip' })
      const bytes = fileBytes('image/png', 70_000, 7)
      const up = await uploadVia(n1, owner.auth, bytes)
      t.same([up.handshake, up.put], [200, 200], 'handshake and PUT on node 1')
      const meta = await fetch(`${n2.api}/api/v1/files/${up.fileId}`, { headers: owner.auth })
      t.equal(meta.status, 200, 'metadata on node 2')
      t.match(await meta.json(), { id: up.fileId, sizeBytes: bytes.length, processingStatus: 'completed' })
      const dl = await fetch(`${n2.api}/api/v1/files/${up.fileId}/download`, { headers: owner.auth })
      t.equal(dl.status, 200, 'download on node 2')
      t.equal(sha(Buffer.from(await dl.arrayBuffer())), sha(bytes), 'the same bytes')
      const del = await fetch(`${n3.api}/api/v1/files/${up.fileId}`, { method: 'DELETE', headers: owner.auth })
      t.equal(del.status, 200, 'deleted on node 3')
      for (const n of cluster.nodes) {
        t.equal((await fetch(`${n.api}/api/v1/files/${up.fileId}`, { headers: owner.auth })).status, 404, `metadata 404 on node ${n.index}`)
        t.equal((await fetch(`${n.api}/api/v1/files/${up.fileId}/download`, { headers: owner.auth })).status, 404, `download 404 on node ${n.index}`)
      }
    })

    await t.test('200 concurrent uploads against room for 50: exactly 50 commit across the nodes, usage is their sum', async (t) => {
      const size = 1000
      const owner = await clusterTenant(n1, { name: 'quota', quotaBytes: 50 * size })
      // Handshake on one node, PUT on the next (the presigned path is signed with the shared secret).
      const outcomes = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          uploadVia(cluster.nodes[i % 3]!, owner.auth, fileBytes('image/png', size, i), { putOn: cluster.nodes[(i + 1) % 3]! }),
        ),
      )
      const committed = outcomes.filter((o) => o.put === 200)
      const refused = outcomes.filter((o) => o.handshake !== 200)
      t.comment(`committed ${committed.length}, refused at the handshake ${refused.length}, other ${200 - committed.length - refused.length}`)
      t.equal(committed.length, 50, 'exactly 50 committed')
      t.equal(refused.length, 150, 'the other 150 refused at the handshake')
      t.ok(
        refused.every((o) => (o.body as { error?: { code?: string } }).error?.code === 'QUOTA_EXCEEDED'),
        'each with 403 QUOTA_EXCEEDED',
      )
      t.ok(
        refused.every((o) => o.handshake === 403),
        'status 403',
      )
      for (const n of cluster.nodes) {
        const quota = (await (await fetch(`${n.api}/api/v1/tenant/quota`, { headers: owner.auth })).json()) as { usedBytes: number }
        t.equal(quota.usedBytes, committed.length * size, `node ${n.index}: usedBytes is the sum of what committed`)
      }
      t.same(await quotaDrift(cluster), [], "every tenant's and workspace's used_bytes equals its rows")
    })

    await t.test('every webhook is delivered exactly once', async (t) => {
      const receiver = await startReceiver(t)
      const owner = await clusterTenant(n2, { name: 'hooks' })
      const uploads = await Promise.all(
        Array.from({ length: 30 }, (_, i) => {
          const node = cluster.next()
          return uploadVia(node, owner.auth, fileBytes('image/png', 500 + i, 100 + i), { webhookUrl: receiver.url })
        }),
      )
      t.ok(
        uploads.every((u) => u.put === 200),
        '30 uploads committed',
      )
      await receiver.waitFor(30, 60_000)
      // Time for a duplicate to arrive, had two nodes both sent one event (a scheduler polls within a second).
      await new Promise((r) => setTimeout(r, 3000))
      const ids = receiver.received.map((r) => String(r.headers['webhook-id']))
      const fileIds = receiver.received.map((r) => (JSON.parse(r.body) as { fileId: string }).fileId)
      t.comment(`deliveries ${receiver.received.length}, distinct webhook-ids ${new Set(ids).size}`)
      t.equal(receiver.received.length, 30, '30 deliveries')
      t.equal(new Set(ids).size, 30, 'no webhook-id twice')
      t.same(fileIds.sort(), uploads.map((u) => u.fileId).sort(), 'one per uploaded file')
      const states = await cluster.sql<{ status: string; n: string }>('SELECT status, count(*)::text AS n FROM outbox WHERE tenant_id = $1 GROUP BY status', [
        owner.id,
      ])
      t.same(states, [{ status: 'delivered', n: '30' }], 'the outbox holds 30 delivered events')
    })

    await t.test('a key regenerated and an S3 credential deleted on one node are refused by the others at their next request', async (t) => {
      const owner = await clusterTenant(n3, { name: 'revoke' })
      const info = (n: ClusterNode, key: string) => fetch(`${n.api}/api/v1/tenant/info`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status)
      // Each node has seen (and cached) the key and the credential before they change.
      t.same(await Promise.all(cluster.nodes.map((n) => info(n, owner.apiKey))), [200, 200, 200], 'the key works on every node')
      const clients = cluster.nodes.map((n) => s3Of(t, n, owner.credentials))
      for (const c of clients) await c.send(new ListBucketsCommand({}))
      const regen = await fetch(`${n1.api}/api/v1/admin/tenants/${owner.id}/regenerate-key`, { method: 'POST', headers: adminAuth })
      t.equal(regen.status, 200, 'regenerated on node 1')
      const { apiKey } = (await regen.json()) as { apiKey: string }
      t.same([await info(n2, owner.apiKey), await info(n3, owner.apiKey)], [401, 401], 'the old key is refused on nodes 2 and 3')
      t.same([await info(n2, apiKey), await info(n3, apiKey)], [200, 200], 'the new key works there')
      const revoked = await fetch(`${n2.api}/api/v1/admin/tenants/${owner.id}/s3-credentials/${owner.credentials.accessKeyId}`, {
        method: 'DELETE',
        headers: adminAuth,
      })
      t.equal(revoked.status, 204, 'the S3 credential deleted on node 2')
      for (const i of [0, 2]) {
        t.same(await s3Error(clients[i]!.send(new ListBucketsCommand({}))), { name: 'InvalidAccessKeyId', status: 403 }, `refused on node ${i + 1}`)
      }
    })

    await t.test('a multipart upload created on node 1, parts on nodes 2 and 3, completed on node 1, reads back whole everywhere', async (t) => {
      const owner = await clusterTenant(n1, { name: 'multipart' })
      const [c1, c2, c3] = cluster.nodes.map((n) => s3Of(t, n, owner.credentials)) as [
        ReturnType<typeof s3Of>,
        ReturnType<typeof s3Of>,
        ReturnType<typeof s3Of>,
      ]
      const Bucket = 'cluster-mpu'
      const Key = 'big/object.bin'
      await c3.send(new CreateBucketCommand({ Bucket }))
      const parts = [randomBytes(5 * 1024 * 1024), randomBytes(5 * 1024 * 1024 + 17), randomBytes(123_457)]
      const { UploadId } = await c1.send(new CreateMultipartUploadCommand({ Bucket, Key }))
      const on = [c2, c3, c2]
      const etags = []
      for (const [i, Body] of parts.entries()) {
        const r = await on[i]!.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: i + 1, Body }))
        etags.push({ PartNumber: i + 1, ETag: r.ETag! })
      }
      const done = await c1.send(new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts: etags } }))
      t.match(done.ETag, /-3"$/, 'completed on node 1: a three-part ETag')
      const whole = Buffer.concat(parts)
      for (const [i, c] of [c1, c2, c3].entries()) {
        const got = await bodyOf(c.send(new GetObjectCommand({ Bucket, Key })))
        t.equal(got.length, whole.length, `node ${i + 1}: the whole length`)
        t.equal(sha(got), sha(whole), `node ${i + 1}: the same bytes`)
      }
      t.same(await quotaDrift(cluster), [], 'usage equals the rows after the multipart upload')
    })

    await t.test('content released by an abort on one node while another uploads the same bytes is never lost', async (t) => {
      const lost = await sameContentRounds(t, cluster, 120)
      t.comment(`120 rounds, ${lost.length} lost`)
      t.same(lost, [], 'every acknowledged PutObject reads back')
    })

    await t.test("a background job's lease is held by one node; SIGKILLed, another takes it within the lease", async (t) => {
      const holders = async () =>
        cluster.sql<{ name: string; holder: string }>("SELECT name, holder FROM leases WHERE name LIKE 'background:%' AND expires_at > $1 ORDER BY name", [
          Date.now(),
        ])
      const nodeOf = (holder: string) => cluster.nodes.find((n) => n.running && holder.startsWith(`pid ${n.pid()} `))
      const before = await holders()
      t.ok(before.length >= 3, `leases held: ${before.map((l) => l.name).join(', ')}`)
      for (const l of before) t.ok(nodeOf(l.holder), `${l.name} is held by a live node (node ${nodeOf(l.holder)?.index})`)
      // Each job runs in one node at a time: its "taken" line in one node's log, or, when a node
      // starved past the lease (a loaded machine: 3 s here) lost it to another, the "lost" line in
      // every earlier taker's log after its "taken" (test/pg-leases.test.ts shows no two holders
      // of one lease ever overlap).
      for (const l of before) {
        const job = l.name.slice('background:'.length)
        const ofJob = (line: string) => line.includes(`"job":"${job}"`)
        const taking = cluster.nodes.filter((n) => n.running!.lines.some((line) => line.includes('background job taken') && ofJob(line)))
        const holder = nodeOf(l.holder)
        const handedOver = taking.filter((n) => n !== holder)
        for (const n of handedOver) {
          const lines = n.running!.lines
          const taken = lines.findIndex((line) => line.includes('background job taken') && ofJob(line))
          t.ok(
            lines.slice(taken).some((line) => line.includes('background lease lost') && ofJob(line)),
            `${job}: node ${n.index}, which held it before node ${holder?.index}, gave it up`,
          )
        }
        t.ok(holder && taking.includes(holder), `${job}: taken by its holder, node ${holder?.index} (takers: ${taking.map((n) => n.index).join(', ')})`)
      }
      const victim = nodeOf(before.find((l) => l.name === 'background:webhooks')!.holder)!
      const lost = before.filter((l) => nodeOf(l.holder) === victim).map((l) => l.name)
      const killedAt = Date.now()
      await victim.kill()
      let after: { name: string; holder: string }[] = []
      while (Date.now() - killedAt < 4 * LEASE_SECONDS * 1000) {
        after = await holders()
        if (lost.every((name) => after.some((l) => l.name === name && nodeOf(l.holder)))) break
        await new Promise((r) => setTimeout(r, 100))
      }
      const tookMs = Date.now() - killedAt
      t.comment(`node ${victim.index} held ${lost.join(', ')}; taken over in ${tookMs} ms (lease ${LEASE_SECONDS} s)`)
      for (const name of lost) {
        const now = after.find((l) => l.name === name)
        t.ok(now && nodeOf(now.holder) && nodeOf(now.holder) !== victim, `${name} taken by node ${now && nodeOf(now.holder)?.index}`)
      }
      // A renewal tick every third of the lease: expiry plus one tick, and the machine's load.
      t.ok(tookMs < (LEASE_SECONDS + LEASE_SECONDS / 3) * 1000 + 2500, `within the lease and a tick (${tookMs} ms)`)
      // The job runs on the new holder: a webhook of an upload made now is delivered.
      const receiver = await startReceiver(t)
      const owner = await clusterTenant(cluster.next(), { name: 'after-takeover' })
      const up = await uploadVia(cluster.next(), owner.auth, fileBytes('image/png', 300, 3), { webhookUrl: receiver.url })
      t.equal(up.put, 200)
      await receiver.waitFor(1, 30_000)
      t.pass('a webhook delivered by the node that took the job over')
    })
  })
})

/**
 * The remote store's leases and tombstones (services/remote-blobs.ts) order an upload of content H
 * against the deletion of H that releasing its last other copy starts: each round uploads H as
 * the only part of a multipart upload, then at once aborts that upload on one node (its part's
 * content is released and deleted from the store at once) and puts H under another key on
 * another node (a few ms apart, so that the two transactions overlap in some rounds). Returns
 * what did not read back.
 */
async function sameContentRounds(t: Test, cluster: Cluster, rounds: number): Promise<string[]> {
  const owner = await clusterTenant(cluster.next(), { name: `same-content-${randomBytes(3).toString('hex')}` })
  const clients = cluster.nodes.map((n) => s3Of(t, n, owner.credentials))
  const Bucket = 'same-content'
  await clients[0]!.send(new CreateBucketCommand({ Bucket }))
  const lost: string[] = []
  const round = async (i: number) => {
    const body = randomBytes(1024 + (i % 7))
    // The delete a few ms before or after the second PUT's lease (which follows its body).
    const [c1, c2, c3] = [clients[i % 3]!, clients[(i + 1) % 3]!, clients[(i + 2) % 3]!]
    const { UploadId } = await c1.send(new CreateMultipartUploadCommand({ Bucket, Key: `a/${i}` }))
    await c1.send(new UploadPartCommand({ Bucket, Key: `a/${i}`, UploadId, PartNumber: 1, Body: body }))
    await Promise.all([
      new Promise((r) => setTimeout(r, (i * 7) % 40)).then(() => c2.send(new AbortMultipartUploadCommand({ Bucket, Key: `a/${i}`, UploadId }))),
      c3.send(new PutObjectCommand({ Bucket, Key: `b/${i}`, Body: body })),
    ])
    try {
      const got = await bodyOf(c1.send(new GetObjectCommand({ Bucket, Key: `b/${i}` })))
      if (sha(got) !== sha(body)) lost.push(`b/${i}: ${got.length} bytes differ`)
    } catch (err) {
      lost.push(`b/${i}: ${(err as Error).name} ${(err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode}`)
    }
  }
  for (let i = 0; i < rounds; i += 8) await Promise.all(Array.from({ length: 8 }, (_, j) => round(i + j)))
  return lost
}
