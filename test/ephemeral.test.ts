// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import { buildBundle, runCoffer, startCoffer, type Running } from './process-helper'
import { fileBytes, tempDir } from './helper'
import { prepareEphemeral } from '../src/cli/ephemeral'
import { OWNER_FILE, ownerAlive, ownerLine } from '../src/cli/ephemeral-owner'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import net from 'node:net'
import { UsageError } from '../src/cli/io'
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'

buildBundle()

/** The one JSON line ephemeral mode prints on stdout once it listens. */
const READY = /^\{"url":"(http:\/\/[^"]+)"/

interface Announcement {
  url: string
  adminApiKey: string
  tenant: { id: string; apiKey: string }
  s3: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string }
}

function dataDirOf(server: Running): string {
  const line = server.lines.find((l) => l.includes('"coffer starting"'))
  return (JSON.parse(line!) as { dataDir: string }).dataDir
}

t.test('serve --ephemeral: one JSON line on stdout, a working tenant, logs on stderr, nothing left after SIGTERM', async (t) => {
  const tmp = tempDir(t)
  const server = await startCoffer(['serve', '--ephemeral', '--port', '0'], {
    cwd: tmp,
    // An operator's data dir must not leak into the throwaway instance (a fixed admin key is
    // honoured: test/ci-fixture.test.ts). No COFFER_S3_PORT: ephemeral mode picks a free S3
    // port by itself, never 9000.
    env: { TMPDIR: tmp, COFFER_DATA_DIR: '/nonexistent/coffer', COFFER_S3_PORT: '' },
    ready: READY,
  })
  t.teardown(() => server.child.kill('SIGKILL'))
  const info = JSON.parse(server.stdout[0]!) as Announcement
  t.same(Object.keys(info), ['url', 'adminApiKey', 'tenant', 's3'])
  t.same(Object.keys(info.tenant), ['id', 'apiKey'])
  t.same(Object.keys(info.s3), ['endpoint', 'region', 'accessKeyId', 'secretAccessKey'])
  t.match(info.s3, { endpoint: /^http:\/\/127\.0\.0\.1:\d+$/, region: 'us-east-1', accessKeyId: /^CK[A-Z0-9]{18}$/, secretAccessKey: /^.{40}$/ })
  t.not(info.s3.endpoint, 'http://127.0.0.1:9000', 'a free port, not the default')
  t.equal(info.url, server.url)
  t.match(info.url, /^http:\/\/127\.0\.0\.1:\d+$/)
  t.match(info.tenant.apiKey, /^sk_test_[A-Za-z0-9_-]{43}$/)
  t.ok(info.adminApiKey.length >= 32, 'a generated admin key')
  const dataDir = dataDirOf(server)
  t.ok(dataDir.startsWith(fs.realpathSync(tmp)) || dataDir.startsWith(tmp), `the data dir is under TMPDIR (${dataDir})`)

  const auth = { authorization: `Bearer ${info.tenant.apiKey}` }
  const bytes = fileBytes('application/pdf', 5000)
  const hs = await fetch(`${info.url}/api/v1/upload/request`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ fileType: 'application/pdf', fileName: 'report.pdf', webhookUrl: 'http://127.0.0.1:9/hook' }),
  })
  t.equal(hs.status, 200)
  const { fileId, presignedUrl } = (await hs.json()) as { fileId: string; presignedUrl: string }
  const put = await fetch(`${info.url}${presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'application/pdf' }, body: new Uint8Array(bytes) })
  t.equal(put.status, 200)
  const down = await fetch(`${info.url}/api/v1/files/${fileId}/download`, { headers: auth })
  t.same(Buffer.from(await down.arrayBuffer()), bytes, 'the round trip returns the same bytes')
  const created = await fetch(`${info.url}/api/v1/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${info.adminApiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'second' }),
  })
  t.equal(created.status, 201, 'the admin key works')

  // The S3 endpoint and pair work, and see the API's upload as an object.
  const s3 = new S3Client({ endpoint: info.s3.endpoint, region: info.s3.region, forcePathStyle: true, credentials: info.s3 })
  t.teardown(() => s3.destroy())
  const ws = await fetch(`${info.url}/api/v1/workspaces`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'CI', slug: 'ci-bucket' }),
  })
  t.equal(ws.status, 201)
  await s3.send(new PutObjectCommand({ Bucket: 'ci-bucket', Key: 'hello.txt', Body: 'hello over S3' }))
  t.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'ci-bucket', Key: 'hello.txt' }))).Body!.transformToString(), 'hello over S3')
  t.same(
    (await s3.send(new ListObjectsV2Command({ Bucket: 'ci-bucket' }))).Contents?.map((o) => o.Key),
    ['hello.txt'],
  )

  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0, 'SIGTERM exits 0')
  t.equal(server.stdout.length, 1, 'exactly one line on stdout, ever')
  t.notOk(fs.existsSync(dataDir), 'the temporary data dir is removed')
  const logs = server.lines.filter((l) => !server.stdout.includes(l))
  t.ok(logs.length > 3 && logs.every((l) => typeof JSON.parse(l) === 'object'), 'the logs are JSON lines on stderr')
  t.ok(logs.some((l) => l.includes('shutdown complete')))
  for (const secret of [info.adminApiKey, info.tenant.apiKey, info.s3.secretAccessKey])
    t.notOk(
      logs.some((l) => l.includes(secret)),
      'no key is logged',
    )
})

t.test('SIGINT removes the data dir too', async (t) => {
  const tmp = tempDir(t)
  const server = await startCoffer(['serve', '--ephemeral', '--port', '0'], { cwd: tmp, env: { TMPDIR: tmp }, ready: READY })
  t.teardown(() => server.child.kill('SIGKILL'))
  const dataDir = dataDirOf(server)
  t.ok(fs.existsSync(dataDir))
  server.child.kill('SIGINT')
  t.equal(await server.exited, 0)
  t.notOk(fs.existsSync(dataDir))
})

t.test('a bad setting or --data-dir: exit 2, nothing left behind', async (t) => {
  const tmp = tempDir(t)
  const badPort = runCoffer(['serve', '--ephemeral', '--port', 'abc'], { cwd: tmp, env: { TMPDIR: tmp } })
  t.equal(badPort.status, 2)
  t.match(badPort.stderr, /--port="abc"/)
  t.equal(badPort.stdout, '', 'nothing on stdout')
  const withDir = runCoffer(['serve', '--ephemeral', '--data-dir', 'x'], { cwd: tmp, env: { TMPDIR: tmp } })
  t.equal(withDir.status, 2)
  t.match(withDir.stderr, /--ephemeral makes its own temporary data dir/)
  t.same(fs.readdirSync(tmp), [], 'no temporary data dir was made')
})

t.test('prepareEphemeral: the configuration it builds', async (t) => {
  const eph = prepareEphemeral({ COFFER_LOG_LEVEL: 'warn', COFFER_WEBHOOK_ALLOW_PRIVATE: 'false' }, { port: '0' })
  t.teardown(() => eph.remove())
  t.equal(eph.config.webhookAllowPrivate, true, 'webhooks to loopback and private addresses are allowed')
  t.equal(eph.config.adminApiKey, eph.adminApiKey)
  t.equal(eph.config.logLevel, 'warn', 'other settings come from the environment as usual')
  t.equal(eph.config.port, 0)
  t.ok(eph.config.dataDir.startsWith(os.tmpdir()))
  t.ok(fs.statSync(eph.config.dataDir).isDirectory())
  eph.remove()
  eph.remove()
  t.notOk(fs.existsSync(eph.config.dataDir))
  t.throws(() => prepareEphemeral({}, { 'data-dir': 'x' }), UsageError)
  // Free ports by default (#28: the API port stayed 8080), a port given by flag or env as given.
  const free = prepareEphemeral({}, {})
  t.teardown(() => free.remove())
  t.match(free.config, { port: 0, s3Port: 0 }, 'no port given: free ones')
  const fromEnv = prepareEphemeral({ COFFER_PORT: '18080', COFFER_S3_PORT: '19000' }, {})
  t.teardown(() => fromEnv.remove())
  t.match(fromEnv.config, { port: 18080, s3Port: 19000 }, 'COFFER_PORT and COFFER_S3_PORT')
  const fromFlags = prepareEphemeral({ COFFER_PORT: '18080' }, { port: '28080', 's3-port': 'off' })
  t.teardown(() => fromFlags.remove())
  t.match(fromFlags.config, { port: 28080, s3Port: 'off' }, '--port and --s3-port')
})

/**
 * Holds 127.0.0.1:`port` busy for the test. When something else holds it already, the port is
 * just as busy: that is said, and checked by connecting to it.
 */
async function holdPort(t: Test, port: number): Promise<string> {
  const holder = net.createServer((socket) => socket.destroy())
  const err = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    holder.once('error', resolve)
    holder.listen(port, '127.0.0.1', () => resolve(undefined))
  })
  if (err === undefined) {
    t.teardown(() => new Promise<void>((r) => holder.close(() => r())))
    return 'held by this test'
  }
  t.equal(err.code, 'EADDRINUSE', `binding ${port}: ${err.message}`)
  const reached = await new Promise<boolean>((resolve) => {
    const c = net.connect(port, '127.0.0.1', () => resolve(true)).once('error', () => resolve(false))
    c.once('connect', () => c.destroy())
  })
  t.ok(reached, `${port} is held by another process: it accepts connections`)
  return 'held by another process'
}

t.test('serve --ephemeral with 8080 and 9000 busy: free ports, unless a port is given (#28)', async (t) => {
  const tmp = tempDir(t)
  const held = [await holdPort(t, 8080), await holdPort(t, 9000)]
  t.comment(`8080 ${held[0]}, 9000 ${held[1]}`)
  // No --port, no COFFER_PORT, and COFFER_S3_PORT unset (the test helper's 0 removed): the defaults.
  const server = await startCoffer(['serve', '--ephemeral'], { cwd: tmp, env: { TMPDIR: tmp, COFFER_S3_PORT: '' }, ready: READY })
  t.teardown(() => server.child.kill('SIGKILL'))
  const info = JSON.parse(server.stdout[0]!) as Announcement
  const apiPort = Number(new URL(info.url).port)
  const s3Port = Number(new URL(info.s3.endpoint).port)
  t.not(apiPort, 8080, `the API is on a free port (${apiPort})`)
  t.not(s3Port, 9000, `S3 is on a free port (${s3Port})`)
  t.equal((await fetch(`${info.url}/health`)).status, 200, 'the API answers')
  const s3 = new S3Client({ endpoint: info.s3.endpoint, region: info.s3.region, forcePathStyle: true, credentials: info.s3 })
  t.teardown(() => s3.destroy())
  await s3.send(new PutObjectCommand({ Bucket: 'busy-ports', Key: 'k', Body: 'x' })).catch((err: Error) => t.equal(err.name, 'NoSuchBucket', 'S3 answers'))

  // A port that is given is the one used, busy or not: never quietly moved elsewhere.
  const busy = runCoffer(['serve', '--ephemeral', '--port', '8080'], { cwd: tmp, env: { TMPDIR: tmp } })
  t.equal(busy.status, 2, '--port 8080 while it is busy: exit 2')
  t.match(busy.stderr, /the API port 8080 on 127\.0\.0\.1 is already in use/, 'the one line names the port given')
  t.equal(busy.stdout, '', 'no JSON line')
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)

  const fromEnv = await startCoffer(['serve', '--ephemeral'], {
    cwd: tmp,
    env: { TMPDIR: tmp, COFFER_PORT: String(apiPort), COFFER_S3_PORT: String(s3Port) },
    ready: READY,
  })
  t.teardown(() => fromEnv.child.kill('SIGKILL'))
  const again = JSON.parse(fromEnv.stdout[0]!) as Announcement
  t.equal(again.url, `http://127.0.0.1:${apiPort}`, 'COFFER_PORT is used')
  t.equal(again.s3.endpoint, `http://127.0.0.1:${s3Port}`, 'COFFER_S3_PORT is used')
  fromEnv.child.kill('SIGTERM')
  t.equal(await fromEnv.exited, 0)
})

t.test("an instance killed with SIGKILL leaves its dir; the next start removes it, never a live instance's", async (t) => {
  const tmp = tempDir(t)
  const opts = { cwd: tmp, env: { TMPDIR: tmp }, ready: READY }
  const killed = await startCoffer(['serve', '--ephemeral', '--port', '0'], opts)
  const live = await startCoffer(['serve', '--ephemeral', '--port', '0'], opts)
  t.teardown(() => live.child.kill('SIGKILL'))
  const killedDir = dataDirOf(killed)
  const liveDir = dataDirOf(live)
  killed.child.kill('SIGKILL')
  await killed.exited
  t.ok(fs.existsSync(killedDir), 'SIGKILL runs no exit handler: the dir stays')

  // A dir whose owner file names a process that is alive (this test) but started at another time
  // (a reused pid): its owner is gone. One without an owner file may be an instance just starting.
  const reused = fs.mkdtempSync(`${tmp}/coffer-ephemeral-`)
  const [, start, ns] = ownerLine().split(' ')
  fs.writeFileSync(`${reused}/${OWNER_FILE}`, `${process.pid} ${Number(start) - 1} ${ns}`)
  const starting = fs.mkdtempSync(`${tmp}/coffer-ephemeral-`)
  const mine = fs.mkdtempSync(`${tmp}/coffer-ephemeral-`)
  fs.writeFileSync(`${mine}/${OWNER_FILE}`, ownerLine())

  const next = await startCoffer(['serve', '--ephemeral', '--port', '0'], opts)
  t.teardown(() => next.child.kill('SIGKILL'))
  t.notOk(fs.existsSync(killedDir), "the killed instance's dir is removed")
  t.notOk(fs.existsSync(reused), 'a dir whose pid was reused by a later process is removed')
  t.ok(fs.existsSync(liveDir), "a live instance's dir is kept")
  t.ok(fs.existsSync(starting), 'a dir without an owner is kept')
  t.ok(fs.existsSync(mine), 'a dir of a live process is kept')
  const note = next.lines.find((l) => l.includes('ephemeral instances that are gone'))
  t.ok(note, 'the removal is logged')
  t.same((JSON.parse(note!) as { removed: string[] }).removed.sort(), [killedDir, reused].sort())
  // The live instance still works.
  t.equal((await fetch(`${live.url}/health`)).status, 200)
  next.child.kill('SIGTERM')
  live.child.kill('SIGTERM')
  t.equal(await next.exited, 0)
  t.equal(await live.exited, 0)
  t.same(fs.readdirSync(tmp).sort(), [path.basename(starting), path.basename(mine)].sort())
})

t.test('ownerAlive: gone only when the pid is free or names a later process', async (t) => {
  t.ok(ownerAlive(ownerLine()), 'this process')
  const child = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' })
  t.notOk(ownerAlive(`${child.stdout.trim()} 1 ${ownerLine().split(' ')[2]}`), 'an exited process')
  t.ok(ownerAlive(`${process.pid} 1 pid:[1]`), 'a pid of another namespace is not judged')
  t.ok(ownerAlive('garbage'), 'an unreadable owner is kept')
})
