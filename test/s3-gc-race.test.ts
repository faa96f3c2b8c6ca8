// @suites: pg-all
// A garbage collection of some content racing an S3 write of the same content (PutObject, and
// CompleteMultipartUpload assembling it) never loses the acknowledged object, on the disk store and
// on the S3 blob store (the Ceph gateway). The moments that matter are forced with a store wrapper
// that holds one operation until the test lets it go, so each interleaving runs every time.
import t, { type Test } from 'tap'
import { createHash } from 'node:crypto'
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import type { BlobStore, StagedBlob } from '../src/blobs/blob-store'
import { BlobLeasesRepo } from '../src/db/repos/blob-leases'
import { storedBlobs } from './helper'
import { makeS3, pattern } from './s3-helper'
import { fixtureEnv } from './s3/fixture'

t.setTimeout(180_000)

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
const MiB = 1024 * 1024

/** One held operation: `reached` resolves when it starts; it goes on once `release()` is called. */
interface Hold {
  reached: Promise<void>
  release: () => void
}

function hold(): Hold & { wait: () => Promise<void> } {
  let arrive!: () => void
  let go!: () => void
  const reached = new Promise<void>((r) => (arrive = r))
  const released = new Promise<void>((r) => (go = r))
  return {
    reached,
    release: go,
    wait: () => {
      arrive()
      return released
    },
  }
}

/** The core's store, with `place` and `remove` of one hash held when the test asks. */
function holdingStore() {
  const holds: { place?: { sha256: string; h: ReturnType<typeof hold> }; remove?: { sha256: string; h: ReturnType<typeof hold> } } = {}
  const wrap = (inner: BlobStore): BlobStore =>
    new Proxy(inner, {
      get(target, prop, receiver) {
        if (prop === 'place') {
          return async (staged: StagedBlob) => {
            const p = holds.place
            if (p && p.sha256 === staged.sha256) {
              holds.place = undefined
              await p.h.wait()
            }
            return target.place(staged)
          }
        }
        if (prop === 'remove') {
          return async (sha256: string) => {
            const r = holds.remove
            if (r && r.sha256 === sha256) {
              holds.remove = undefined
              await r.h.wait()
            }
            return target.remove(sha256)
          }
        }
        const v = Reflect.get(target, prop, receiver) as unknown
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
      },
    })
  return {
    wrap,
    holdPlace(sha256: string): Hold {
      const h = hold()
      holds.place = { sha256, h }
      return h
    },
    holdRemove(sha256: string): Hold {
      const h = hold()
      holds.remove = { sha256, h }
      return h
    },
  }
}

type Writer = 'PutObject' | 'CompleteMultipartUpload'

/**
 * A context whose bucket held `bytes` at key `old`, deleted: with no retention, a collection
 * removes that content, unless the write of the same content under way keeps it.
 */
async function setup(t: Test, store: 'disk' | 's3', bytes: Buffer) {
  const holding = holdingStore()
  const ctx = await makeS3(t, { COFFER_DELETED_RETENTION_SECONDS: '0' }, { store, wrapStore: holding.wrap })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'race' }))
  await ctx.client.send(new PutObjectCommand({ Bucket: 'race', Key: 'old', Body: bytes }))
  await ctx.client.send(new DeleteObjectCommand({ Bucket: 'race', Key: 'old' }))
  ctx.clock.advance(1)
  return { ...ctx, holding }
}

/** Starts the write of `bytes` to `key` by `writer`; for a multipart upload the parts go up first. */
async function startWrite(ctx: Awaited<ReturnType<typeof setup>>, writer: Writer, key: string, bytes: Buffer): Promise<() => Promise<unknown>> {
  if (writer === 'PutObject') return () => ctx.client.send(new PutObjectCommand({ Bucket: 'race', Key: key, Body: bytes }))
  const split = 5 * MiB
  const { UploadId } = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'race', Key: key }))
  const e1 = await ctx.client.send(new UploadPartCommand({ Bucket: 'race', Key: key, UploadId, PartNumber: 1, Body: bytes.subarray(0, split) }))
  const e2 = await ctx.client.send(new UploadPartCommand({ Bucket: 'race', Key: key, UploadId, PartNumber: 2, Body: bytes.subarray(split) }))
  return () =>
    ctx.client.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'race',
        Key: key,
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: e1.ETag },
            { PartNumber: 2, ETag: e2.ETag },
          ],
        },
      }),
    )
}

/** What must hold once the write was acknowledged, whatever the collector did. */
async function assertKept(t: Test, ctx: Awaited<ReturnType<typeof setup>>, key: string, bytes: Buffer): Promise<void> {
  // Another full collection now: the object references the content, nothing may go.
  await ctx.core.gc.collect(true)
  const got = await ctx.client.send(new GetObjectCommand({ Bucket: 'race', Key: key }))
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(bytes), `${key} reads back byte for byte`)
  t.ok((await storedBlobs(ctx.core)).includes(sha(bytes)), 'the content is in the store')
  t.same((await ctx.core.gc.verify(true)).missing, [], 'coffer verify finds nothing missing')
  t.equal(new BlobLeasesRepo(ctx.core.db).count(), 0, 'no tombstone is left')
  t.equal(ctx.core.db.pluck('SELECT count(*) FROM blob_leases').get(), 0, 'no lease is left')
}

function races(store: 'disk' | 's3'): void {
  for (const writer of ['PutObject', 'CompleteMultipartUpload'] as const) {
    const bytes = pattern(writer === 'PutObject' ? 40_000 : 5 * MiB + 3_000, writer === 'PutObject' ? 71 : 72)

    t.test(`${store} store: a full collection while ${writer} of the same content is between place and commit`, async (t) => {
      const ctx = await setup(t, store, bytes)
      const send = await startWrite(ctx, writer, 'new', bytes)
      const held = ctx.holding.holdPlace(sha(bytes))
      const write = send()
      await held.reached
      const gc = await ctx.core.gc.collect(true)
      // On a remote store the writer's lease keeps the content (and its row); on disk the
      // collector removes the file and the commit re-links its staged copy (ensurePlaced).
      if (store === 's3') t.equal(gc.blobsRemoved, 0, 'the leased content is not collected')
      held.release()
      await write
      await assertKept(t, ctx, 'new', bytes)
    })

    if (store === 's3') {
      t.test(`${store} store: ${writer} of content whose deletion is in progress waits for it, then stores its own copy`, async (t) => {
        const ctx = await setup(t, store, bytes)
        const send = await startWrite(ctx, writer, 'new', bytes)
        const held = ctx.holding.holdRemove(sha(bytes))
        const gc = ctx.core.gc.collect(true)
        await held.reached
        // The collector has tombstoned the content and its DELETE is on the way: the write must
        // not be acknowledged before that DELETE is over, or the DELETE would remove its object.
        let acknowledged = false
        const write = send().then((r) => {
          acknowledged = true
          return r
        })
        await new Promise((r) => setTimeout(r, 500))
        t.notOk(acknowledged, 'the write waits for the deletion in progress')
        held.release()
        t.match(await gc, { blobsRemoved: 1 }, 'the collection finishes its deletion')
        await write
        t.ok(acknowledged)
        await assertKept(t, ctx, 'new', bytes)
      })
    }
  }
}

races('disk')
const fixture = fixtureEnv()
if ('unavailable' in fixture) {
  if (process.env.CI === 'true') t.fail(`the Ceph fixture is required in CI: ${fixture.unavailable}`)
  else t.test('the same races on the S3 blob store', { skip: `needs the Ceph fixture (scripts/ceph-fixture.sh): ${fixture.unavailable}` }, () => {})
} else {
  races('s3')
}
