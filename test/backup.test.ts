// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { buildApp } from '../src/app'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { createLogger } from '../src/lib/logger'
import { backupDataDir } from '../src/services/backup'
import { INLINE_MAX_BYTES } from '../src/blobs/disk-blob-store'
import type { App } from '../src/http/types'
import type { Clock } from '../src/lib/clock'
import { BUNDLE, buildBundle, initDataDir, runCoffer, startCoffer } from './process-helper'
import { ADMIN_KEY, captureLogs, createTenant, diskOnly, fileBytes, makeApp, tempDir, upload, blobFile } from './helper'

/** Serves `dataDir` in-process (what `coffer serve --data-dir` does, without the socket). */
async function serveDir(t: Test, dataDir: string, clock?: Clock): Promise<{ app: App; core: ReturnType<typeof createCore> }> {
  const core = createCore(loadConfig({ COFFER_ADMIN_API_KEY: ADMIN_KEY }, { 'data-dir': dataDir }), clock ? { clock } : {})
  const app = await buildApp(core, { logger: createLogger('warn', captureLogs().stream) })
  t.teardown(async () => {
    await app.close()
    core.close()
  })
  return { app, core }
}

const blobFiles = (dataDir: string) =>
  fs
    .readdirSync(path.join(dataDir, 'blobs', 'sha256'), { recursive: true })
    .map(String)
    .filter((p) => /[0-9a-f]{64}$/.test(p))

const DISK_ONLY = diskOnly('copies blob files; a backup with the S3 store holds the metadata (s3-store.test.ts)')

t.test('a backup is one consistent snapshot: blobs it references survive a collection during the backup', { skip: DISK_ONLY }, async (t) => {
  const { app, core, dir, clock } = await makeApp(t, { COFFER_DELETED_RETENTION_SECONDS: '0' })
  const a = await createTenant(app)
  const b = await createTenant(app)
  const files = new Map<string, { headers: Record<string, string>; bytes: Buffer }>()
  for (let i = 0; i < 6; i++) {
    const owner = i % 2 ? a : b
    // Three contents, each uploaded by both tenants: stored once each. One is small enough to be
    // kept inline in the database (INLINE_MAX_BYTES), two are files.
    const bytes = fileBytes('image/png', i % 3 === 0 ? 2000 : INLINE_MAX_BYTES + (i % 3) * 500, i % 3)
    files.set((await upload(app, owner.headers, { bytes })).fileId, { headers: owner.headers, bytes })
  }
  const doomed = await upload(app, a.headers, { bytes: fileBytes('image/png', 777, 99) })
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/files/${doomed.fileId}`, headers: a.headers })).statusCode, 200)
  const [firstId, first] = [...files][0]!
  const signed = (await app.inject({ method: 'GET', url: `/api/v1/files/${firstId}/signed-url`, headers: first.headers })).json() as { url: string }

  const dest = path.join(tempDir(t), 'backup')
  let after: string | undefined
  const result = await backupDataDir(core, dest, {
    afterSnapshot: async () => {
      // The live server goes on: the deleted file is purged with its blob, a new file arrives.
      clock.advance(1000)
      t.same(await core.gc.collect(), { filesPurged: 1, blobsRemoved: 1, bytesFreed: 777, tenantsPurged: 0 })
      after = (await upload(app, b.headers, { bytes: fileBytes('image/png', 1234, 42) })).fileId
    },
  })
  t.same({ files: result.files, blobs: result.blobs, missing: result.missing }, { files: 7, blobs: 4, missing: [] })
  t.equal(result.linked, 2, 'same filesystem: hard links')
  t.equal(result.inline, 2, 'the small blobs, the purged one too, are inside the copied database')
  t.equal(result.copied, 0)
  t.same(fs.readdirSync(path.dirname(dest)), ['backup'], 'no .tmp- directory is left')
  t.same(fs.readdirSync(path.join(dir, 'tmp')), [], 'the staging links are gone from the live tmp/')
  t.same(fs.readdirSync(path.join(dest, 'tmp')), [])
  t.equal(fs.readFileSync(path.join(dest, 'secret'), 'utf8'), fs.readFileSync(path.join(dir, 'secret'), 'utf8'))
  t.equal(fs.statSync(path.join(dest, 'secret')).mode & 0o777, 0o600)
  t.equal(fs.statSync(path.join(dest, 'coffer.db')).mode & 0o777, 0o600, 'the database copy is private like the live one (#24)')
  t.notOk(fs.existsSync(path.join(dest, 'coffer.db-wal')), 'the copy is checkpointed')

  const restored = await serveDir(t, dest, clock)
  const report = await restored.core.gc.verify()
  t.same({ checked: report.checked, missing: report.missing, corrupt: report.corrupt }, { checked: 4, missing: [], corrupt: [] })
  t.equal(blobFiles(dest).length, 2)
  t.equal(
    restored.core.sqlite!.prepare('SELECT count(*) FROM blob_inline').pluck().get(),
    2,
    "the purged file's blob is in the backup (inline, as it is small): its row is in the snapshot",
  )
  for (const [id, f] of files) {
    const res = await restored.app.inject({ method: 'GET', url: `/api/v1/files/${id}/download`, headers: f.headers })
    t.equal(res.statusCode, 200)
    t.ok(res.rawPayload.equals(f.bytes), `file ${id} restored byte for byte`)
  }
  const late = await restored.app.inject({ method: 'GET', url: `/api/v1/files/${after}`, headers: b.headers })
  t.equal(late.statusCode, 404, 'a file uploaded after the snapshot is not in the backup')
  const viaSigned = await restored.app.inject({ method: 'GET', url: new URL(signed.url).pathname + new URL(signed.url).search })
  t.equal(viaSigned.statusCode, 200, 'signed URLs keep working: the secret is in the backup')
  const quota = (await restored.app.inject({ method: 'GET', url: '/api/v1/tenant/quota', headers: a.headers })).json()
  const live = (await app.inject({ method: 'GET', url: '/api/v1/tenant/quota', headers: a.headers })).json()
  t.same(quota, live, 'quota usage is restored with the files')
})

/** A writable directory on another filesystem than the temp dirs, for the EXDEV path. */
const OTHER_FS = '/dev/shm'
function otherFsUsable(): boolean {
  try {
    fs.accessSync(OTHER_FS, fs.constants.W_OK)
    return fs.statSync(OTHER_FS).dev !== fs.statSync(os.tmpdir()).dev
  } catch {
    return false
  }
}

t.test(
  'on another filesystem the blobs are copied',
  { skip: DISK_ONLY || (otherFsUsable() ? false : `${OTHER_FS} is not a separate writable filesystem here`) },
  async (t) => {
    const other = OTHER_FS
    const { app, core } = await makeApp(t)
    const tenant = await createTenant(app)
    const bytes = fileBytes('application/pdf', INLINE_MAX_BYTES + 50_000)
    const { fileId } = await upload(app, tenant.headers, { type: 'application/pdf', bytes })
    const dest = fs.mkdtempSync(path.join(other, 'coffer-backup-test-'))
    t.teardown(() => fs.rmSync(dest, { recursive: true, force: true }))
    const result = await backupDataDir(core, path.join(dest, 'b'))
    t.same({ linked: result.linked, copied: result.copied }, { linked: 0, copied: 1 })
    const restored = await serveDir(t, path.join(dest, 'b'))
    const res = await restored.app.inject({ method: 'GET', url: `/api/v1/files/${fileId}/download`, headers: tenant.headers })
    t.ok(res.rawPayload.equals(bytes))
    t.not(
      fs.statSync(blobFile(restored.core, res.headers.etag!.toString().slice(1, -1))).ino,
      fs.statSync(blobFile(core, res.headers.etag!.toString().slice(1, -1))).ino,
    )
  },
)

t.test('coffer backup of a live server under upload load; the restored copy serves every file', { skip: DISK_ONLY }, async (t) => {
  buildBundle()
  const dir = tempDir(t)
  const live = path.join(dir, 'live')
  const server = await startCoffer(['serve', '--port', '0', '--data-dir', live], { cwd: dir, env: { COFFER_ADMIN_API_KEY: ADMIN_KEY } })
  t.teardown(() => server.child.kill('SIGKILL'))
  const created = await fetch(`${server.url}/api/v1/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'backed up' }),
  })
  const auth = { authorization: `Bearer ${((await created.json()) as { apiKey: string }).apiKey}` }
  const sent = new Map<string, Buffer>()
  const uploadOne = async (i: number) => {
    const bytes = fileBytes('image/png', 1000 + ((i * 7919) % 60_000), i)
    const hs = await fetch(`${server.url}/api/v1/upload/request`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ fileType: 'image/png', fileName: `f${i}.png` }),
    })
    const { fileId, presignedUrl } = (await hs.json()) as { fileId: string; presignedUrl: string }
    const put = await fetch(`${server.url}${presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: new Uint8Array(bytes) })
    if (put.status !== 200) throw new Error(`upload ${i}: ${put.status}`)
    sent.set(fileId, bytes)
  }
  for (let i = 0; i < 20; i++) await uploadOne(i)
  const before = new Set(sent.keys())

  const dest = path.join(dir, 'backups', 'nightly')
  const backup = spawn(process.execPath, [BUNDLE, 'backup', dest, '--data-dir', live, '--json'], { cwd: dir, env: { PATH: process.env.PATH ?? '' } })
  let out = ''
  backup.stdout.on('data', (c: Buffer) => (out += c.toString()))
  const exited = new Promise<number | null>((resolve) => backup.once('exit', resolve))
  let done = false
  void exited.then(() => (done = true))
  // Uploads keep arriving while the backup runs (bounded: at most 40 more).
  for (let i = 20; i < 60 && !done; i++) await uploadOne(i)
  t.equal(await exited, 0, 'coffer backup exits 0')
  t.comment(`${sent.size - before.size} upload(s) completed while the backup ran`)
  const summary = JSON.parse(out) as { files: number; linked: number; missing: string[] }
  t.same(summary.missing, [])
  t.ok(summary.files >= before.size)

  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  const restored = await startCoffer(['serve', '--port', '0', '--data-dir', dest], { cwd: dir })
  t.teardown(() => restored.child.kill('SIGKILL'))
  const listed: { id: string; processingStatus: string }[] = []
  for (let cursor: string | null = null; ;) {
    const page = (await (await fetch(`${restored.url}/api/v1/files?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { headers: auth })).json()) as {
      files: { id: string; processingStatus: string }[]
      nextCursor: string | null
    }
    listed.push(...page.files)
    if (!(cursor = page.nextCursor)) break
  }
  const completed = listed.filter((f) => f.processingStatus === 'completed').map((f) => f.id)
  for (const id of before) t.ok(completed.includes(id), `file ${id}, complete before the backup, is in it`)
  let same = 0
  for (const id of completed) {
    const res = await fetch(`${restored.url}/api/v1/files/${id}/download`, { headers: auth })
    if (res.status === 200 && Buffer.from(await res.arrayBuffer()).equals(sent.get(id)!)) same++
  }
  t.equal(same, completed.length, `every one of the ${completed.length} restored files downloads byte for byte`)
  restored.child.kill('SIGTERM')
  t.equal(await restored.exited, 0)
})

t.test('coffer backup refuses what it must not do', async (t) => {
  buildBundle()
  const dir = tempDir(t)
  const data = path.join(dir, 'data')
  initDataDir(data)
  t.equal(runCoffer(['tenant', 'create', '--name', 'x', '--data-dir', data], { cwd: dir }).status, 0)
  fs.mkdirSync(path.join(dir, 'full'))
  fs.writeFileSync(path.join(dir, 'full', 'precious'), 'keep me')
  const cases: [string[], number, RegExp][] = [
    [['backup', path.join(dir, 'full'), '--data-dir', data], 2, /exists and is not an empty directory/],
    [['backup', path.join(data, 'inside'), '--data-dir', data], 2, /is inside the data dir/],
    [['backup', data, '--data-dir', data], 2, /is inside the data dir/],
    [['backup', path.join(dir, 'b'), '--data-dir', path.join(dir, 'nothing')], 2, /data dir .*nothing does not exist/],
    [['backup', '--data-dir', data], 2, /backup needs a DEST directory/],
  ]
  for (const [args, status, message] of cases) {
    const r = runCoffer(args, { cwd: dir })
    t.equal(r.status, status, args.join(' '))
    t.match(r.stderr, message)
  }
  t.equal(fs.readFileSync(path.join(dir, 'full', 'precious'), 'utf8'), 'keep me')
  t.notOk(fs.existsSync(path.join(dir, 'nothing')), 'no data dir is created by a refused backup')
  fs.mkdirSync(path.join(dir, 'empty'))
  const ok = runCoffer(['backup', path.join(dir, 'empty'), '--data-dir', data], { cwd: dir })
  t.equal(ok.status, 0, 'an empty DEST is fine')
  t.match(ok.stdout, /backed up 0 file record\(s\) and 0 blob\(s\)/)
  t.ok(fs.existsSync(path.join(dir, 'empty', 'coffer.db')))
  t.match(runCoffer(['backup', '--help'], { cwd: dir }).stdout, /Usage: coffer backup DEST/)
})
