// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'
import { once } from 'node:events'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { createLogger } from '../src/lib/logger'
import { startServer, type Server } from '../src/server'
import { captureLogs, fileBytes, receivedAtLeast, tempDir, type Handshake } from './helper'
import { buildBundle, initDataDir, runCoffer, startCoffer } from './process-helper'

async function start(t: Test, env: Record<string, string> = {}) {
  const dir = tempDir(t)
  const config = loadConfig({ COFFER_LOG_LEVEL: 'debug', ...env }, { port: '0', 's3-port': '0', 'data-dir': dir })
  const { stream, lines } = captureLogs()
  const server = await startServer(config, createLogger(config.logLevel, stream))
  t.teardown(() => server.close())
  const { apiKey } = server.core.tenants.create({ name: 'shutdown' })
  return { server, config, dir, logs: lines, auth: { authorization: `Bearer ${apiKey}` } }
}

async function handshake(server: Pick<Server, 'url'>, auth: Record<string, string>, size: number): Promise<Handshake> {
  const res = await fetch(`${server.url}/api/v1/upload/request`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ fileType: 'image/png', fileName: 'big.png', fileSizeBytes: size }),
  })
  return (await res.json()) as Handshake
}

/** A PUT whose body is sent by hand: the caller decides when (and whether) the rest follows. */
function startPut(server: Pick<Server, 'url'>, h: Handshake, size: number) {
  const agent = new http.Agent({ keepAlive: true })
  const req = http.request(`${server.url}${h.presignedUrl}`, { method: 'PUT', agent, headers: { 'content-type': 'image/png', 'content-length': size } })
  const response = new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string } | Error>((resolve) => {
    req.on('response', (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on('error', resolve)
  })
  return { req, response, agent }
}

/** Resolves once the server has written `bytes` of upload content into its temp files. */
t.test('an upload in flight at SIGTERM finishes; a request arriving meanwhile gets 503 NOT_READY; then all stops', async (t) => {
  const { server, config, dir, auth } = await start(t)
  const size = 256 * 1024
  const bytes = fileBytes('image/png', size)
  const h = await handshake(server, auth, size)
  const put = startPut(server, h, size)
  put.req.write(bytes.subarray(0, size / 2))
  await receivedAtLeast(path.join(dir, 'tmp'), size / 2)

  // A second client has sent half a request: its connection is busy, not idle, so close keeps it.
  const late = net.connect(Number(new URL(server.url).port), '127.0.0.1')
  await once(late, 'connect')
  late.write('GET /health HTTP/1.1\r\nHost: coffer\r\n')

  const stopped: string[] = []
  for (const b of server.background) {
    const stop = b.stop.bind(b)
    b.stop = async () => {
      stopped.push(`${b.name}:${server.core.sqlite!.open ? 'db open' : 'db closed'}`)
      return stop()
    }
  }
  let closed = false
  const closing = server.close().then(() => (closed = true))
  await new Promise((r) => setTimeout(r, 100))
  t.equal(closed, false, 'close waits for the request in flight')
  t.equal(server.app.inFlightRequests(), 1)

  let lateAnswer = ''
  late.setEncoding('utf8')
  late.on('data', (c: string) => (lateAnswer += c))
  late.write('\r\n')
  await once(late, 'close')
  t.match(lateAnswer, /^HTTP\/1\.1 503 /)
  t.match(lateAnswer, /connection: close/i)
  t.match(lateAnswer, /"code":"NOT_READY"/)
  t.match(lateAnswer, /shutting down/)

  put.req.end(bytes.subarray(size / 2))
  const res = await put.response
  if (res instanceof Error) throw res
  t.equal(res.status, 200, 'the in-flight upload completes')
  t.equal(res.headers.connection, 'close', 'and its connection closes after the response')
  t.equal(JSON.parse(res.body).processingStatus, 'completed')
  await closing
  put.agent.destroy()
  t.same(
    stopped.sort(),
    ['checkpoint:db open', 'gc:db open', 'lifecycle:db open', 'reclaim-multipart-uploads:db open', 'sweep-expired-uploads:db open', 'webhooks:db open'],
    'every background component stopped, before the database closed',
  )
  t.equal(server.core.sqlite!.open, false, 'the database is closed')

  const core = createCore(config)
  t.teardown(() => core.close())
  t.equal(core.files.get(core.tenants.list({ limit: 1 }).tenants[0]!, h.fileId).status, 'completed')
})

t.test('an upload cut off by the shutdown timeout leaves no partial state', async (t) => {
  const { server, config, dir, logs, auth } = await start(t, { COFFER_SHUTDOWN_TIMEOUT_SECONDS: '1' })
  const size = 256 * 1024
  const h = await handshake(server, auth, size)
  const put = startPut(server, h, size)
  put.req.write(fileBytes('image/png', size).subarray(0, 1000))
  await receivedAtLeast(path.join(dir, 'tmp'), 1000)
  t.equal(fs.readdirSync(path.join(dir, 'tmp')).length, 1, 'the partial upload is on disk while it streams')

  const started = Date.now()
  await server.close()
  const took = Date.now() - started
  t.ok(took >= 900 && took < 5000, `close waited for the 1 s bound, no more (${took} ms)`)
  t.type(await put.response, Error, 'the client sees its connection closed')
  t.ok(logs.some((l) => l.msg === 'requests still running at the shutdown timeout: closing their connections'))

  const core = createCore(config)
  t.teardown(() => core.close())
  const tenant = core.tenants.list({ limit: 1 }).tenants[0]!
  t.equal(core.files.get(tenant, h.fileId).status, 'failed', 'the upload is failed, not left pending')
  t.equal(core.tenants.get(tenant.id).usedBytes, 0, 'its reservation is released')
  t.same(fs.readdirSync(path.join(dir, 'tmp')), [], 'no temp file is left')
  t.equal(core.sqlite!.prepare('SELECT count(*) FROM blobs').pluck().get(), 0, 'no blob row')
  const blobFiles = fs.readdirSync(path.join(dir, 'blobs', 'sha256'), { recursive: true }).filter((p) => /[0-9a-f]{64}$/.test(String(p)))
  t.same(blobFiles, [], 'no blob file')
})

t.test('close() is idempotent and a closed server refuses connections', async (t) => {
  const { server } = await start(t)
  await Promise.all([server.close(), server.close()])
  await t.rejects(fetch(`${server.url}/health`))
})

t.test('the process: SIGTERM waits for the upload in flight, then exits 0; a second signal exits at once', async (t) => {
  buildBundle()
  const dir = tempDir(t)
  initDataDir(dir)
  const created = runCoffer(['tenant', 'create', '--name', 'signals', '--json', '--data-dir', dir], { cwd: dir })
  const auth = { authorization: `Bearer ${(JSON.parse(created.stdout) as { apiKey: string }).apiKey}` }
  // Larger than INLINE_MAX_BYTES, so it streams to a staging file that shows it is in flight.
  const size = 128 * 1024
  const bytes = fileBytes('image/png', size)
  const run = async () => {
    const server = await startCoffer(['serve', '--port', '0', '--data-dir', dir], { cwd: dir })
    t.teardown(() => server.child.kill('SIGKILL'))
    const h = await handshake(server, auth, size)
    const put = startPut(server, h, size)
    put.req.write(bytes.subarray(0, 1000))
    await receivedAtLeast(path.join(dir, 'tmp'), 1000)
    server.child.kill('SIGTERM')
    await new Promise((r) => setTimeout(r, 300))
    t.equal(server.child.exitCode, null, 'still running while the upload is in flight')
    return { server, put }
  }

  const first = await run()
  first.put.req.end(bytes.subarray(1000))
  const res = await first.put.response
  t.equal(res instanceof Error ? res.message : res.status, 200, 'the upload completes')
  t.equal(await first.server.exited, 0, 'then the process exits 0')
  first.put.agent.destroy()

  const second = await run()
  const before = Date.now()
  second.server.child.kill('SIGINT')
  t.equal(await second.server.exited, 1, 'a second signal exits at once, with 1')
  t.ok(Date.now() - before < 3000)
  t.ok(second.server.lines.some((l) => l.includes('second signal')))
  second.put.agent.destroy()
})
