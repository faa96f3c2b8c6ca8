// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { Readable } from 'node:stream'
import type { Engine } from '../src/db/engine'
import { BlobsRepo, CONTENT_LOCK_CLASS } from '../src/db/repos/blobs'
import { FilesRepo } from '../src/db/repos/files'
import { DiskBlobStore } from '../src/blobs/disk-blob-store'
import { blobPath } from '../src/blobs/layout'
import { ManualClock } from '../src/lib/clock'
import { BlobWrites } from '../src/services/blob-writes'
import { GarbageCollector, ORPHAN_MIN_AGE_MS } from '../src/services/gc'
import { tempDir } from './helper'
import { admin, withPg } from './pg/fixture'
import { pending, postgres, sqlite, twoTenants, type Databases } from './pg/repos'

// Released content on a disk path several nodes share, with the metadata in PostgreSQL (#30):
// the disk store unlinks it after the commit (BlobWrites.drain), under the content's lock, only
// when no blob row records it by then. Two "nodes" here are two connections (two bridges) over
// one blob directory; the concurrent write that holds the content's lock is a psql session, a
// process of its own, since a sync bridge waiting on a lock blocks the thread that would commit.
t.setTimeout(300_000)

interface BlobNode {
  engine: Engine
  blobs: BlobsRepo
  store: DiskBlobStore
  writes: BlobWrites
}

const clock = new ManualClock(Date.now())

/** Two nodes over one data dir's blobs/ and tmp/ (every blob a file: no inline repo). */
function shared(t: Test, dbs: Databases): { a: BlobNode; b: BlobNode; file: (sha: string) => string } {
  const dir = tempDir(t)
  const root = path.join(dir, 'blobs', 'sha256')
  const tmp = path.join(dir, 'tmp')
  fs.mkdirSync(root, { recursive: true })
  fs.mkdirSync(tmp, { recursive: true })
  const node = (engine: Engine): BlobNode => {
    const blobs = new BlobsRepo(engine)
    const store = new DiskBlobStore(root, tmp)
    return { engine, blobs, store, writes: new BlobWrites({ db: engine, clock, blobs, store }) }
  }
  return { a: node(dbs.engine), b: node(dbs.other), file: (sha) => blobPath(root, sha) }
}

/** The collector of node `n`'s blobs (no files or tenants to purge), releasing through `writes`. */
function collectorOf(n: BlobNode, writes: BlobWrites): GarbageCollector {
  return new GarbageCollector({
    db: n.engine,
    clock,
    files: new FilesRepo(n.engine),
    blobs: n.blobs,
    store: n.store,
    tenants: { purgeDeleted: () => 0 } as never,
    retentionMs: 1000,
    writes,
    reserve: { freeing: (fn) => fn(), ensure: () => 'off' },
  })
}

async function stage(n: BlobNode, bytes: Buffer) {
  return n.store.stage(Readable.from([bytes]), { maxBytes: bytes.length, onOverflow: () => new Error('longer than announced') })
}

/** An upload through BlobWrites, as the API's and the S3 front's: staged, placed, settled in a transaction. */
async function upload(n: BlobNode, bytes: Buffer): Promise<string> {
  const staged = await stage(n, bytes)
  await n.writes.write(BlobWrites.writerId(), staged, (settle) => n.engine.transaction(settle))
  await n.store.discard(staged)
  return staged.sha256
}

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')
const content = () => randomBytes(100_000)

withPg(t, 'released content on a shared disk path', (url) => {
  t.test('a release rolled back keeps the file; one committed unlinks it after the commit, not before', async (t) => {
    const { a, file } = shared(t, await postgres(t, url))
    const h = await upload(a, content())
    t.ok(fs.existsSync(file(h)), 'stored')

    t.throws(
      () =>
        a.engine.transaction(() => {
          t.equal(a.writes.releaseInTx(h), 100_000, 'released inside the transaction')
          throw new Error('refused after the release')
        }),
      /refused after the release/,
    )
    t.same(await a.writes.drain(), { deleted: 0, failed: 0 }, 'the drain after it unlinks nothing')
    t.ok(fs.existsSync(file(h)), 'the file of a rolled-back release is kept')
    t.ok(a.blobs.exists(h), 'as is its row')

    a.engine.transaction(() => {
      t.equal(a.writes.releaseInTx(h), 100_000)
      t.ok(fs.existsSync(file(h)), 'not unlinked inside the transaction, which may still roll back')
    })
    t.notOk(a.blobs.exists(h), 'the row went with the commit')
    t.same(await a.writes.drain(), { deleted: 1, failed: 0 }, 'unlinked by the drain after the commit')
    t.notOk(fs.existsSync(file(h)), 'gone after the commit')
  })

  t.test('a release whose transaction is retried after 40001 keeps the file the retry still needs', async (t) => {
    const dbs = await postgres(t, url)
    const { a, b, file } = shared(t, dbs)
    twoTenants(dbs.other)
    const h = await upload(a, content())
    let runs = 0
    a.engine.transaction(() => {
      runs++
      if (runs === 2) {
        // Between the runs another node committed a file that references the content (as a
        // CopyObject or a restored version does, without placing it again).
        const files = new FilesRepo(b.engine)
        const id = randomUUID()
        files.insertPending(pending(id, { sizeBytes: 100_000 }))
        files.complete(id, 100_000, h, clock.now())
      }
      const released = a.writes.releaseInTx(h)
      if (runs === 1) {
        t.equal(released, 100_000, 'the first run releases it')
        // A real serialization failure from PostgreSQL: the engine runs the transaction again.
        a.engine.prepare(`DO $$ BEGIN RAISE EXCEPTION 'made by the test' USING ERRCODE = '40001'; END $$`).run()
      } else t.equal(released, undefined, 'the second run finds it referenced')
    })
    t.equal(runs, 2, 'run twice')
    await a.writes.drain()
    t.ok(a.blobs.exists(h), 'the row is there')
    t.ok(fs.existsSync(file(h)), 'and so is its file')
  })

  t.test('a re-upload of the same content on another node keeps its file', async (t) => {
    const { a, b, file } = shared(t, await postgres(t, url))
    const bytes = content()
    const h = await upload(a, bytes)

    // Committed before the drain: the drain finds the row and keeps the file.
    a.engine.transaction(() => a.writes.releaseInTx(h))
    t.equal(await upload(b, bytes), h)
    t.same(await a.writes.drain(), { deleted: 0, failed: 0 }, 'nothing unlinked')
    t.ok(fs.existsSync(file(h)), 'the re-upload committed before the drain keeps its file')

    // Placed before the drain, committed after it: the commit re-places what the drain removed.
    t.equal(
      a.engine.transaction(() => a.writes.releaseInTx(h)),
      100_000,
      'released again',
    )
    const staged = await stage(b, bytes)
    let drained: unknown
    await b.writes.write(BlobWrites.writerId(), staged, async (settle) => {
      // Between B's place (a link that found the file there) and B's commit.
      drained = await a.writes.drain()
      t.notOk(fs.existsSync(file(h)), 'the drain unlinked it: no row recorded it')
      return b.engine.transaction(settle)
    })
    await b.store.discard(staged)
    t.same(drained, { deleted: 1, failed: 0 })
    t.ok(fs.existsSync(file(h)), 're-placed by the commit')
    t.ok(b.blobs.exists(h))
    t.equal(sha(fs.readFileSync(file(h))), h, 'with its content')
  })

  t.test("a write committing the same content on another node holds the drain's unlink until it commits", async (t) => {
    const dbs = await postgres(t, url)
    const { a, file } = shared(t, dbs)
    const bytes = content()
    const h = await upload(a, bytes)
    a.engine.transaction(() => a.writes.releaseInTx(h))
    t.notOk(a.blobs.exists(h))

    // Another node in the middle of its commit of the same content: it holds the content's lock
    // (BlobWrites.write's settle) and has inserted the row, not committed yet.
    const key = Number.parseInt(h.slice(0, 8), 16) | 0
    const search = dbs.engine.pluck<[], string>('SHOW search_path').get()!
    const psql = spawn(
      'psql',
      [
        url,
        '-v',
        'ON_ERROR_STOP=1',
        '-q',
        '-c',
        'BEGIN',
        '-c',
        `SELECT pg_advisory_xact_lock(${CONTENT_LOCK_CLASS}, ${key})`,
        '-c',
        `INSERT INTO blobs (sha256, size_bytes, created_at) VALUES ('${h}', ${bytes.length}, 1)`,
        '-c',
        'SELECT pg_sleep(1.5)',
        '-c',
        'COMMIT',
      ],
      // The test's schema, as its bridges have it (libpq's PGOPTIONS).
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PGOPTIONS: `-c search_path=${search}` } },
    )
    let stderr = ''
    psql.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const exited = once(psql, 'exit')
    // Until its session holds the lock (two int4 keys: classid and objid, objsubid 2).
    for (let i = 0; ; i++) {
      const held = await admin(
        url,
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::bigint AND objid = $2::bigint`,
        [CONTENT_LOCK_CLASS >>> 0, key >>> 0],
      )
      if (held.rows[0].n > 0) break
      if (i > 300) throw new Error(`the psql session never took the lock: ${stderr}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const started = Date.now()
    const drained = await a.writes.drain()
    const [code] = await exited
    t.equal(code, 0, `psql committed ${stderr}`)
    t.ok(Date.now() - started >= 500, 'the drain waited for the lock')
    t.same(drained, { deleted: 0, failed: 0 }, 'and then found the row')
    t.ok(fs.existsSync(file(h)), 'the file of the content committed meanwhile is kept')
    t.equal(sha(fs.readFileSync(file(h))), h)
  })

  t.test('a crash between the commit and the unlink leaves an orphan file that the collector removes', async (t) => {
    const { a, file } = shared(t, await postgres(t, url))
    const h = await upload(a, content())
    a.engine.transaction(() => a.writes.releaseInTx(h))
    // The process dies here: its candidates were in its memory only. The next one starts afresh.
    const restarted = new BlobWrites({ db: a.engine, clock, blobs: a.blobs, store: a.store })
    t.same(await restarted.drain(), { deleted: 0, failed: 0 }, 'nothing to drain after the restart')
    t.ok(fs.existsSync(file(h)), 'an orphan: a file no row records')
    const gc = collectorOf(a, restarted)
    t.equal((await gc.verify()).orphans.length, 1, 'coffer verify lists it')
    clock.set(Date.now())
    t.equal(await gc.removeOrphans(), 0, 'a young orphan is spared (it may be mid-commit)')
    t.ok(fs.existsSync(file(h)))
    clock.set(Date.now() + ORPHAN_MIN_AGE_MS + 1000)
    t.equal(await gc.removeOrphans(), 1, 'an old one is removed')
    t.notOk(fs.existsSync(file(h)), 'the orphan is gone')
  })

  t.test("the collector's run unlinks what it released once it committed", async (t) => {
    const { a, file } = shared(t, await postgres(t, url))
    const h = await upload(a, content())
    const gc = collectorOf(a, a.writes)
    t.same(await gc.collect(true), { filesPurged: 0, blobsRemoved: 1, bytesFreed: 100_000, tenantsPurged: 0 })
    t.notOk(fs.existsSync(file(h)), 'the unreferenced content is gone when collect returns')
  })
})

t.test('SQLite: released content is unlinked inside the transaction, as before', async (t) => {
  const { a, file } = shared(t, await sqlite(t))
  const h = await upload(a, content())
  a.engine.transaction(() => {
    t.equal(a.writes.releaseInTx(h), 100_000)
    t.notOk(fs.existsSync(file(h)), 'unlinked under the write lock, which orders it against a write of the same content')
  })
  t.same(await a.writes.drain(), { deleted: 0, failed: 0 })
})
