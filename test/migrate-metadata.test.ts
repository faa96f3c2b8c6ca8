// @suites: sqlite
// `coffer migrate-metadata` (#30): a data dir a real server filled, copied into PostgreSQL and
// verified, killed mid-copy and resumed, copied back into a new data dir that a server serves,
// and the refusals. Against the PostgreSQL fixture (test/pg/fixture.ts), a schema of its own per
// test, dropped after it; the command runs as shipped, from dist/coffer.cjs.
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawn } from 'node:child_process'
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  PutBucketLifecycleConfigurationCommand,
  PutBucketTaggingCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectTaggingCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import Database from 'better-sqlite3'
import { buildApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { createLogger } from '../src/lib/logger'
import { ADMIN_KEY, admin as adminHeaders, captureLogs, fileBytes, tempDir, upload } from './helper'
import { createTenantWithS3, makeS3, pattern } from './s3-helper'
import { BUNDLE, buildBundle, startCoffer } from './process-helper'
import { admin, freshSchema, withPg } from './pg/fixture'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

buildBundle()

interface Run {
  code: number | string
  stdout: string
  stderr: string
}

/** The bundle's `migrate-metadata ARGS`, to its end. */
function migrate(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const child = spawn(process.execPath, [BUNDLE, 'migrate-metadata', ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code: code ?? signal ?? -1, stdout, stderr })))
}

interface Filled {
  dir: string
  apiKey: string
  credentials: { accessKeyId: string; secretAccessKey: string }
  /** API uploads: id → content. */
  files: Map<string, Buffer>
  /** S3 objects (latest versions): bucket/key → content. */
  objects: Map<string, Buffer>
}

/**
 * A data dir filled through both fronts of a server: API uploads (one small enough to live inline
 * in the database, a BLOB) with tags and a webhook (rows in the outbox), a quota past 2^32, S3
 * objects with versions under keys of any UTF-8, a multipart upload in progress, lifecycle,
 * bucket tags, an object lock bucket with a legal hold, object tags.
 */
async function fill(t: Test): Promise<Filled> {
  const ctx = await makeS3(t, { COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' }, { store: 'disk', quotaBytes: 2 ** 40 + 7 })
  const { app, client } = ctx
  const files = new Map<string, Buffer>()
  for (const [i, size] of [100, 5000, 70_000].entries()) {
    const bytes = fileBytes('image/png', size, i + 1)
    const r = await upload(app, ctx.tenant.headers, { bytes, name: `ph😀to-${i}.png`, extra: { tags: { k: `é${i}` }, webhookUrl: 'http://127.0.0.1:9/hook' } })
    files.set(r.fileId, bytes)
  }
  const objects = new Map<string, Buffer>()
  await client.send(new CreateBucketCommand({ Bucket: 'docs' }))
  await client.send(new PutBucketVersioningCommand({ Bucket: 'docs', VersioningConfiguration: { Status: 'Enabled' } }))
  for (const key of ['a/é.txt', 'a/e\u0301.txt', 'z/🦊/\u4e2d.bin']) {
    for (let v = 0; v < 2; v++) {
      const body = pattern(3000 + v, key.length + v)
      await client.send(new PutObjectCommand({ Bucket: 'docs', Key: key, Body: body }))
      objects.set(`docs/${key}`, body)
    }
  }
  await client.send(new PutObjectTaggingCommand({ Bucket: 'docs', Key: 'a/é.txt', Tagging: { TagSet: [{ Key: 'color', Value: 'blau' }] } }))
  await client.send(new PutBucketTaggingCommand({ Bucket: 'docs', Tagging: { TagSet: [{ Key: 'team', Value: 'ops' }] } }))
  await client.send(
    new PutBucketLifecycleConfigurationCommand({
      Bucket: 'docs',
      LifecycleConfiguration: { Rules: [{ ID: 'old', Status: 'Enabled', Filter: { Prefix: 'a/' }, NoncurrentVersionExpiration: { NoncurrentDays: 30 } }] },
    }),
  )
  const mp = await client.send(new CreateMultipartUploadCommand({ Bucket: 'docs', Key: 'big/in-progress' }))
  await client.send(new UploadPartCommand({ Bucket: 'docs', Key: 'big/in-progress', UploadId: mp.UploadId, PartNumber: 1, Body: pattern(5 * 1024 * 1024, 9) }))
  await client.send(new CreateBucketCommand({ Bucket: 'locked', ObjectLockEnabledForBucket: true }))
  const held = pattern(1234, 5)
  await client.send(new PutObjectCommand({ Bucket: 'locked', Key: 'held', Body: held }))
  await client.send(new PutObjectLegalHoldCommand({ Bucket: 'locked', Key: 'held', LegalHold: { Status: 'ON' } }))
  objects.set('locked/held', held)
  // A deleted tenant whose file the collector has not removed yet: its row stays, under a
  // placeholder name that SQLite writes with a NUL, which PostgreSQL's text cannot hold.
  const leaving = await createTenantWithS3(app)
  await upload(app, leaving.headers, { bytes: fileBytes('image/png', 200, 7), name: 'left.png' })
  const deleted = await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${leaving.id}`, headers: adminHeaders })
  if (deleted.statusCode !== 204) throw new Error(`tenant deletion failed: ${deleted.statusCode} ${deleted.body}`)
  const filled = { dir: ctx.dir, apiKey: ctx.tenant.apiKey, credentials: ctx.credentials, files, objects }
  await ctx.close()
  return filled
}

/** The database's tables and their rows, as the test reads them (async pg, its own connection). */
async function pgCount(url: string, table: string): Promise<number> {
  return Number((await admin(url, `SELECT count(*) AS n FROM ${table}`)).rows[0].n)
}

withPg(t, 'migrate-metadata', (fixture) => {
  t.test('a data dir a server filled is copied into PostgreSQL and verified, counters and type edges included', async (t) => {
    const url = await freshSchema(t, fixture)
    const src = await fill(t)
    const r = await migrate(['--to', url, '--data-dir', src.dir, '--json'])
    t.equal(r.code, 0, r.stderr)
    const report = JSON.parse(r.stdout) as { ok: boolean; tables: { table: string; rows: number; checksum: string }[]; copied: Record<string, number> }
    t.ok(report.ok)
    const names = report.tables.map((x) => x.table)
    for (const table of [
      'tenants',
      'files',
      'blob_inline',
      'outbox',
      'object_versions',
      's3_uploads',
      's3_parts',
      'bucket_configs',
      's3_credentials',
      'file_counts',
      'blob_totals',
    ])
      t.ok(names.includes(table), `${table} is copied`)
    for (const x of report.tables) t.equal(report.copied[x.table], x.rows, `${x.table}: every row written once`)
    t.ok(report.tables.find((x) => x.table === 'outbox')!.rows >= 3, 'the webhooks wait in the outbox')
    t.equal(await pgCount(url, 's3_uploads'), 1, 'the multipart upload in progress')
    // Counters and type edges, read on PostgreSQL itself. The triggers were off while files were
    // written: usage is the source's, not charged a second time.
    const sqlite = new Database(path.join(src.dir, 'coffer.db'), { readonly: true })
    const used = sqlite.prepare('SELECT id, used_bytes FROM tenants ORDER BY id').all() as { id: string; used_bytes: number }[]
    sqlite.close()
    t.ok(
      used.some((u) => u.used_bytes > 0),
      'the source has usage to carry',
    )
    t.same((await admin(url, `SELECT id, used_bytes FROM tenants ORDER BY id`)).rows, used, "usage equals the source's")
    const placeholders = new Database(path.join(src.dir, 'coffer.db'), { readonly: true })
      .prepare('SELECT count(*) AS n FROM tenants WHERE deleted_at IS NOT NULL AND instr(name, char(0)) > 0')
      .get() as { n: number }
    t.equal(placeholders.n, 1, 'the source holds a deleted tenant named with a NUL')
    t.same(
      (await admin(url, `SELECT count(*)::int AS n FROM tenants WHERE deleted_at IS NOT NULL AND strpos(name, chr(1)) > 0 AND strpos(name_key, chr(1)) > 0`))
        .rows,
      [{ n: 1 }],
      'which PostgreSQL holds with U+0001, as its own repository names one',
    )
    const tenant = (await admin(url, `SELECT quota_bytes::text AS q FROM tenants WHERE quota_bytes IS NOT NULL AND deleted_at IS NULL`)).rows
    t.same(tenant, [{ q: String(2 ** 40 + 7) }], 'a quota past 2^32 stays exact')
    const inline = (await admin(url, `SELECT length(content) AS n FROM blob_inline`)).rows
    t.ok(inline.length >= 1, 'small content lives in the database as bytea')
    t.ok((await admin(url, `SELECT 1 FROM object_versions WHERE object_key = 'z/🦊/\u4e2d.bin'`)).rowCount! >= 2, 'any UTF-8 key, its versions')
    t.equal((await admin(url, `SELECT count(*)::int AS n FROM object_versions WHERE legal_hold = 1`)).rows[0].n, 1, 'the legal hold')

    // Run again: nothing is written twice, the same checksums.
    const again = await migrate(['--to', url, '--data-dir', src.dir, '--json'])
    t.equal(again.code, 0, again.stderr)
    const second = JSON.parse(again.stdout) as typeof report
    t.same(second.tables, report.tables, 'a second run finds the same rows')
    t.ok(
      Object.values(second.copied).every((n) => n <= 1),
      'and rewrites at most the last row of each table',
    )

    // A row on the target only, then one value changed there: verification fails and names the table and the row.
    await admin(url, `INSERT INTO leases (name, holder, expires_at) VALUES ('stray', 'nobody', 0)`)
    const stray = await migrate(['--to', url, '--data-dir', src.dir, '--verify-only'])
    t.equal(stray.code, 1)
    t.match(stray.stderr, /table leases: 0 row\(s\) in the source, 1 in the target; row \["stray"\] is in the postgres target only/)
    await admin(url, `DELETE FROM leases`)
    // One value changed on PostgreSQL: verification fails and names the table and the row.
    const file = [...src.files.keys()][1]!
    await admin(url, `UPDATE files SET original_name = 'changed' WHERE id = $1`, [file])
    const verify = await migrate(['--to', url, '--data-dir', src.dir, '--verify-only'])
    t.equal(verify.code, 1)
    t.match(verify.stderr, new RegExp(`table files: .*row \\["${file}"\\] differs`))
  })

  t.test('a run killed at a batch boundary resumes where it stopped, without duplicates, to the same checksums', async (t) => {
    const url = await freshSchema(t, fixture)
    const src = await fill(t)
    let total = 0
    for (const killAfter of [3, 4]) {
      const r = await migrate(['--to', url, '--data-dir', src.dir, '--batch-size', '2', '--json'], {
        COFFER_TEST_MIGRATE_KILL_AFTER_BATCHES: String(killAfter),
      })
      t.equal(r.code, 'SIGKILL', `killed after ${killAfter} batches`)
      const now = Number(
        (await admin(url, `SELECT (SELECT count(*) FROM tenants) + (SELECT count(*) FROM blob_inline) + (SELECT count(*) FROM blobs) AS n`)).rows[0].n,
      )
      t.ok(now >= total, 'what was committed stays')
      total = now
    }
    const done = await migrate(['--to', url, '--data-dir', src.dir, '--batch-size', '2', '--json'])
    t.equal(done.code, 0, done.stderr)
    const report = JSON.parse(done.stdout) as { ok: boolean; tables: { table: string; rows: number }[]; copied: Record<string, number> }
    t.ok(report.ok, 'verified equal')
    const rows = report.tables.reduce((n, x) => n + x.rows, 0)
    const written = Object.values(report.copied).reduce((n, x) => n + x, 0)
    t.ok(written < rows, `the last run wrote ${written} of ${rows} rows: the rest was there`)
    for (const x of report.tables) t.equal(await pgCount(url, x.table), x.rows, `${x.table}: no duplicate`)
  })

  t.test('copied back into a new data dir, a server serves every file byte for byte', async (t) => {
    const url = await freshSchema(t, fixture)
    const src = await fill(t)
    t.equal((await migrate(['--to', url, '--data-dir', src.dir])).code, 0)
    const back = path.join(tempDir(t), 'back')
    // Killed once on the way back too: SQLite's triggers, dropped and created again inside each
    // batch's transaction, are all there after the kill, and the next run resumes.
    const killed = await migrate(['--from', url, '--to-data-dir', back, '--batch-size', '2'], { COFFER_TEST_MIGRATE_KILL_AFTER_BATCHES: '5' })
    t.equal(killed.code, 'SIGKILL')
    const half = new Database(path.join(back, 'coffer.db'), { readonly: true })
    t.ok((half.prepare(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger'`).pluck().get() as number) > 0, 'the triggers survive the kill')
    half.close()
    const r = await migrate(['--from', url, '--to-data-dir', back])
    t.equal(r.code, 0, r.stderr)
    t.match(r.stdout, /verified equal in postgres .* and sqlite/)
    t.notMatch(r.stdout + r.stderr, /:[0-9a-f]{20,}@/, 'the password is never printed')
    // What the metadata does not hold: the blob files and the secret (README).
    fs.cpSync(path.join(src.dir, 'blobs'), path.join(back, 'blobs'), { recursive: true })
    fs.copyFileSync(path.join(src.dir, 'secret'), path.join(back, 'secret'))
    const config = loadConfig({ COFFER_ADMIN_API_KEY: ADMIN_KEY, COFFER_S3_PORT: '0' }, { 'data-dir': back })
    const core = createCore(config)
    const app = await buildApp(core, { logger: createLogger('warn', captureLogs().stream) })
    t.teardown(async () => {
      await app.close()
      core.close()
    })
    for (const [id, bytes] of src.files) {
      const res = await app.inject({ url: `/api/v1/files/${id}/download`, headers: { authorization: `Bearer ${src.apiKey}` } })
      t.equal(res.statusCode, 200)
      t.ok(res.rawPayload.equals(bytes), `file ${id} byte for byte`)
    }
    const s3 = await makeS3(
      t,
      {},
      {
        dir: back,
        store: 'disk',
        existing: { id: '', apiKey: src.apiKey, webhookSecret: '', headers: { authorization: `Bearer ${src.apiKey}` }, credentials: src.credentials },
      },
    )
    for (const [name, bytes] of src.objects) {
      const [bucket, ...key] = name.split('/')
      const got = await s3.client.send(new GetObjectCommand({ Bucket: bucket, Key: key.join('/') }))
      t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(bytes), `${name} byte for byte over S3`)
    }
  })

  t.test('refusals: a server running, another schema version, a target holding other data', async (t) => {
    const url = await freshSchema(t, fixture)
    const src = await fill(t)

    const server = await startCoffer(['serve', '--data-dir', src.dir, '--port', '0'], { cwd: src.dir, env: { COFFER_ADMIN_API_KEY: ADMIN_KEY } })
    const running = await migrate(['--to', url, '--data-dir', src.dir]).finally(() => server.child.kill('SIGTERM'))
    await server.exited
    t.equal(running.code, 2)
    t.match(running.stderr, /a server is running on the data dir/)
    t.equal(await pgCount(url, 'tenants'), 0, 'nothing was copied')

    await admin(url, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'from a newer coffer', 0)`)
    const newer = await migrate(['--to', url, '--data-dir', src.dir])
    t.equal(newer.code, 2)
    t.match(newer.stderr, /newer|version 999/)
    await admin(url, `DELETE FROM schema_migrations WHERE version = 999`)

    // A table on one side only (a later migration's) is named, never skipped.
    await admin(url, `CREATE TABLE later_feature (id TEXT PRIMARY KEY)`)
    const extra = await migrate(['--to', url, '--data-dir', src.dir])
    t.equal(extra.code, 2)
    t.match(extra.stderr, /table later_feature is in the postgres target but not in the sqlite source/)
    await admin(url, `DROP TABLE later_feature`)

    const other = await fill(t)
    t.equal((await migrate(['--to', url, '--data-dir', other.dir])).code, 0, 'another data dir copied there')
    // A node working on the PostgreSQL database (its lease renewed) stops the copy back.
    await admin(url, `INSERT INTO leases (name, holder, expires_at) VALUES ('gc', 'pid 1 node-b', $1)`, [Date.now() + 60_000])
    const node = await migrate(['--from', url, '--to-data-dir', path.join(tempDir(t), 'back')])
    t.equal(node.code, 2)
    t.match(node.stderr, /a server is running on the PostgreSQL database .*pid 1 node-b/)
    await admin(url, `DELETE FROM leases`)

    const mixed = await migrate(['--to', url, '--data-dir', src.dir])
    t.equal(mixed.code, 2)
    t.match(mixed.stderr, /holds (a row|rows) .*not a copy of this source/)
  })
})
