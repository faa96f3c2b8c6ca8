// @suites: sqlite
// The WAL's checkpointer (src/db/checkpoint.ts, #29): the serving connection's commits never
// checkpoint (SQLite's automatic checkpoint ran two fsyncs and up to 1000 page writes inside a
// COMMIT, on the event loop); a thread does, and keeps the WAL under its bound under a steady load.
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3'
import { loadConfig } from '../src/config'
import { createLogger } from '../src/lib/logger'
import { startServer, type Server } from '../src/server'
import { ADMIN_KEY, captureLogs, createTenant, tempDir, testStoreEnv } from './helper'
import { pattern, s3Client } from './s3-helper'
import { crashServer, killLoop, sleep } from './s3-crash-harness'
import { buildBundle, startCoffer } from './process-helper'
import type { CheckpointOptions } from '../src/db/checkpoint'

/** A WAL frame: a page and its 24-byte header. */
// Several servers, one of them killed four times once it has acknowledged enough writes: on a
// loaded 2-core machine that takes longer than tap's 120 s for a file.
t.setTimeout(300_000)

const FRAME = 4096 + 24
const KiB = 1024

async function serve(t: Test, checkpoint: Partial<CheckpointOptions>): Promise<{ server: Server; client: S3Client; wal: string; bucket: string }> {
  const dir = tempDir(t, 'coffer-ckpt-')
  const config = loadConfig(
    { COFFER_ADMIN_API_KEY: ADMIN_KEY, COFFER_LOG_LEVEL: 'warn', COFFER_DISK_RESERVE_BYTES: '65536', ...testStoreEnv('disk') },
    { port: '0', 's3-port': '0', 'data-dir': dir, host: '127.0.0.1' },
  )
  const { stream } = captureLogs()
  const server = await startServer(config, createLogger(config.logLevel, stream), { checkpoint })
  t.teardown(() => server.close())
  const tenant = await createTenant(server.app)
  const res = await server.app.inject({
    method: 'POST',
    url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials`,
    headers: { authorization: `Bearer ${ADMIN_KEY}` },
  })
  const client = s3Client(server.s3!.url, res.json() as { accessKeyId: string; secretAccessKey: string }, config.s3Region)
  t.teardown(() => client.destroy())
  const bucket = 'ckpt'
  await client.send(new CreateBucketCommand({ Bucket: bucket }))
  return { server, client, wal: `${server.core.sqlite!.name}-wal`, bucket }
}

const walBytes = (wal: string) => {
  try {
    return fs.statSync(wal).size
  } catch {
    return 0
  }
}

/** 16 clients putting 4 KiB objects until `until()` says so; resolves with the keys acknowledged. */
async function putLoad(client: S3Client, bucket: string, until: () => boolean, prefix = 'k'): Promise<string[]> {
  const acked: string[] = []
  let n = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (!until()) {
        const key = `${prefix}${n++}`
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: pattern(4 * KiB, n) }))
        acked.push(key)
      }
    }),
  )
  return acked
}

t.test('under write load no COMMIT checkpoints: the WAL passes 1000 pages, and the thread resets it', async (t) => {
  // A thread that sleeps an hour unless woken, and a bound of 1 MiB.
  const { server, client, wal, bucket } = await serve(t, { intervalMs: 3_600_000, walLimitBytes: 1024 * KiB })
  const deadline = Date.now() + 60_000
  let largest = 0
  // SQLite's automatic checkpoint (1000 pages) would copy the WAL and start it over at its head:
  // the file would stay near 1000 frames, never 1500.
  const acked = await putLoad(client, bucket, () => {
    largest = Math.max(largest, walBytes(wal))
    return largest > 1500 * FRAME || Date.now() > deadline
  })
  t.ok(largest > 1500 * FRAME, `the WAL grew past 1500 frames (${(largest / FRAME).toFixed(0)} frames after ${acked.length} PutObjects)`)
  const checkpointer = server.checkpointer!
  t.ok(checkpointer.running, 'the checkpointer runs (this process holds its lease)')
  t.equal(checkpointer.counters().passes, 0, 'and had not copied anything before it was woken')

  await checkpointer.wake()
  const c = checkpointer.counters()
  t.ok(c.frames >= 1500, `one pass copied the frames (${c.frames})`)
  t.equal(c.restarts, 1, 'and, the WAL past its bound, had the next write start it over')
  const size = walBytes(wal)
  await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'after', Body: pattern(4 * KiB, 0) }))
  t.equal(walBytes(wal), size, 'the next PutObject overwrote the head of the WAL: the file did not grow')
  t.equal(c.errors, 0)
  // Everything acknowledged reads back from the database file.
  for (const key of [acked[0]!, acked[Math.floor(acked.length / 2)]!, acked.at(-1)!]) {
    const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))
    t.equal((await got.Body!.transformToByteArray()).length, 4 * KiB, `${key} reads back`)
  }
  t.equal(server.core.sqlite!.pragma('integrity_check', { simple: true }), 'ok')
})

t.test('under a steady write load the WAL stays within its bound', async (t) => {
  const limit = 1024 * KiB
  const { server, client, wal, bucket } = await serve(t, { intervalMs: 10, frames: 100, walLimitBytes: limit })
  // From sources the thread starts with the TypeScript loader: seconds on a busy machine.
  while (server.checkpointer!.counters().rounds === 0) await sleep(20)
  let largest = 0
  const sampler = setInterval(() => (largest = Math.max(largest, walBytes(wal))), 2)
  // At least 3 s, and until the WAL was reset three times (at most 40 s: a machine this busy fails).
  const start = Date.now()
  const acked = await putLoad(client, bucket, () => (Date.now() - start > 3000 && server.checkpointer!.counters().restarts >= 3) || Date.now() - start > 40_000)
  clearInterval(sampler)
  const c = server.checkpointer!.counters()
  t.comment(JSON.stringify({ acked: acked.length, largest, ...c }))
  t.ok(c.passes > 3, `the thread copied frames as they came (${c.passes} passes, ${c.frames} frames)`)
  t.ok(c.frames * FRAME > 3 * largest, `the load wrote several times the largest WAL (${((c.frames * FRAME) / KiB).toFixed(0)} KiB copied)`)
  t.ok(c.restarts >= 3, `the WAL was started over when it passed its bound (${c.restarts} times)`)
  // The bound is checked at each pass: the WAL may pass it by what the load writes until the pass
  // after and during the RESTART's wait for the write lock (up to 160 ms on a machine at load 19).
  t.ok(largest < 3 * limit, `the WAL never grew past its bound by more than twice that (largest ${(largest / KiB).toFixed(0)} KiB, bound ${limit / KiB} KiB)`)
  t.equal(c.errors, 0)
})

t.test('a kill -9 while the checkpointer copies and restarts loses nothing acknowledged', async (t) => {
  // Passes every 5 ms and a bound of 256 KiB: a checkpoint, often a RESTART, is under way most of the time.
  const crash = await crashServer(t, 'ckpt', {
    env: { COFFER_CHECKPOINT_INTERVAL_MS: '5', COFFER_WAL_LIMIT_BYTES: String(256 * KiB), COFFER_WRITE_STATS: '0.2' },
  })
  // Each killed process's checkpoint stats (COFFER_WRITE_STATS), to show its thread was at work.
  const stats: { passes: number; restarts: number }[] = []
  const kill = crash.kill.bind(crash)
  crash.kill = async () => {
    await kill()
    for (const line of crash.server.lines) if (line.includes('"checkpointStats"')) stats.push(JSON.parse(line.slice(line.indexOf('{'))))
  }
  await crash.client().send(new CreateBucketCommand({ Bucket: 'ckpt' }))
  const acked = new Map<string, number>()
  let n = 0
  const kills = Number(process.env.COFFER_CRASH_KILLS ?? 4)
  // Each round runs until at least 30 more PutObjects were acknowledged (whatever the machine's load).
  let roundStart = 0
  await killLoop(
    crash,
    kills,
    async (c, stop) => {
      while (!stop.now) {
        const seed = ++n
        const key = `k${seed}`
        try {
          await c.send(new PutObjectCommand({ Bucket: 'ckpt', Key: key, Body: pattern(4 * KiB, seed) }))
          acked.set(key, seed)
        } catch {
          // Cut off by the kill: never acknowledged.
          await sleep(1)
        }
      }
    },
    async (kill, c) => {
      let lost = 0
      for (const [key, seed] of acked) {
        try {
          const got = await c.send(new GetObjectCommand({ Bucket: 'ckpt', Key: key }))
          if (!Buffer.from(await got.Body!.transformToByteArray()).equals(pattern(4 * KiB, seed))) lost++
        } catch {
          lost++
        }
      }
      t.equal(lost, 0, `kill ${kill}: all ${acked.size} acknowledged objects read back`)
      roundStart = acked.size
    },
    () => acked.size - roundStart >= 30,
  )
  const sum = (k: 'passes' | 'restarts') => stats.reduce((n, s) => n + s[k], 0)
  t.ok(
    sum('passes') > 0 && sum('restarts') > 0,
    `the killed servers' threads copied (${sum('passes')} passes) and restarted the WAL (${sum('restarts')} times)`,
  )
  t.ok(acked.size >= 30 * kills, `${acked.size} PutObjects acknowledged`)
  // SQLite's own check, on the file itself (crash.inspect reads through the engine, which has no pragma).
  const db = new Database(path.join(crash.dataDir, 'coffer.db'), { readonly: true, fileMustExist: true })
  const integrity = db.pragma('integrity_check', { simple: true })
  db.close()
  t.equal(integrity, 'ok', 'the database is intact')
})

t.test('with --workers 2 exactly one process checkpoints, and another takes over when it dies', async (t) => {
  buildBundle()
  const cwd = tempDir(t, 'coffer-ckpt-workers-')
  const server = await startCoffer(['serve', '--port', '0', '--data-dir', 'data'], {
    cwd,
    env: { COFFER_WORKERS: '2', COFFER_LEASE_SECONDS: '1', COFFER_LOG_LEVEL: 'info', COFFER_WRITE_STATS: '0.2', COFFER_ADMIN_API_KEY: ADMIN_KEY },
    ready: /coffer ready: 2 workers listening on (http:\/\/[^\s"]+)/,
  })
  t.teardown(() => void server.child.kill('SIGKILL'))
  const json = () => server.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
  const checkpointers = () =>
    new Set(
      json()
        .filter((l) => 'checkpointStats' in l)
        .map((l) => l.checkpointStats),
    )
  const writers = () =>
    new Set(
      json()
        .filter((l) => 'writeStats' in l)
        .map((l) => l.writeStats),
    )
  while (writers().size < 2) await sleep(50)
  await sleep(600)
  t.equal(writers().size, 2, 'two workers serve (each reports its group commit)')
  t.equal(checkpointers().size, 1, 'one of them runs the checkpointer')
  const taken = json().filter((l) => l.job === 'checkpoint' && l.msg === 'background job taken: this worker runs it')
  t.equal(taken.length, 1, 'it took the lease once')
  // The holder dies: the primary starts a worker again, and one of the live ones takes the lease.
  const [holder] = checkpointers()
  process.kill(holder as number, 'SIGKILL')
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline && ![...checkpointers()].some((pid) => pid !== holder)) await sleep(100)
  t.ok(
    [...checkpointers()].some((pid) => pid !== holder),
    'another process checkpoints once the lease expired',
  )
})
