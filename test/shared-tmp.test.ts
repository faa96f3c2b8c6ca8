// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { loadConfig, type Config } from '../src/config'
import { createLogger } from '../src/lib/logger'
import { startServer, type Server, type StartOptions } from '../src/server'
import { UNOWNED_TMP_MIN_AGE_MS } from '../src/services/node-tmp'
import { captureLogs, fileBytes, receivedAtLeast, tempDir, type Handshake } from './helper'
import { freshSchema, withPg } from './pg/fixture'

// <data-dir>/tmp shared by several servers (#30): nodes on one PostgreSQL over one disk path, and
// --workers N on SQLite. A server starting removes only the temp files of servers whose lease
// (tmp:<node id>) lapsed, never those of a server receiving an upload (services/node-tmp.ts).
t.setTimeout(300_000)

const SIZE = 512 * 1024

function configFor(dir: string): Config {
  return loadConfig({ COFFER_DISK_RESERVE_BYTES: '65536' }, { port: '0', 's3-port': 'off', host: '127.0.0.1', 'data-dir': dir })
}

async function start(t: Test, config: Config, opts: StartOptions = {}): Promise<Server> {
  const server = await startServer(config, createLogger('silent', captureLogs().stream), opts)
  t.teardown(() => server.close())
  return server
}

async function handshake(server: Server, apiKey: string): Promise<Handshake> {
  const res = await fetch(`${server.url}/api/v1/upload/request`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ fileType: 'image/png', fileName: 'slow.png', fileSizeBytes: SIZE }),
  })
  return (await res.json()) as Handshake
}

/** A PUT sent by hand: its first half now, the rest when the caller says. */
function startPut(server: Server, h: Handshake, bytes: Buffer) {
  const agent = new http.Agent()
  const req = http.request(`${server.url}${h.presignedUrl}`, { method: 'PUT', agent, headers: { 'content-type': 'image/png', 'content-length': bytes.length } })
  const response = new Promise<{ status: number; body: string } | Error>((resolve) => {
    req.on('response', (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('error', resolve)
  })
  req.write(bytes.subarray(0, bytes.length / 2))
  return {
    finish: async () => {
      req.end(bytes.subarray(bytes.length / 2))
      const res = await response
      agent.destroy()
      return res
    },
  }
}

async function download(server: Server, apiKey: string, fileId: string): Promise<string> {
  const res = await fetch(`${server.url}/api/v1/files/${fileId}/download`, { headers: { authorization: `Bearer ${apiKey}` } })
  if (res.status !== 200) throw new Error(`download answered ${res.status}: ${await res.text()}`)
  return createHash('sha256')
    .update(Buffer.from(await res.arrayBuffer()))
    .digest('hex')
}

/**
 * An upload streaming into `a` while `restart` starts (or restarts) another server on the same
 * data dir path: the upload completes with its content.
 */
async function uploadAcross(t: Test, a: Server, dir: string, restart: () => Promise<void>): Promise<void> {
  const { apiKey } = a.core.tenants.create({ name: `slow-${Date.now()}` })
  const bytes = fileBytes('image/png', SIZE)
  const h = await handshake(a, apiKey)
  const put = startPut(a, h, bytes)
  await receivedAtLeast(path.join(dir, 'tmp'), SIZE / 2)
  const staged = fs.readdirSync(path.join(dir, 'tmp'))
  t.equal(staged.length, 1, 'the partial upload is in tmp/')
  t.match(staged[0], /^[0-9a-f]{12}\.upload-/, "named after its server's node id")
  await restart()
  t.same(fs.readdirSync(path.join(dir, 'tmp')), staged, 'the other start left it in place')
  const res = await put.finish()
  if (res instanceof Error) throw res
  t.equal(res.status, 200, `the upload completes (${res.body.slice(0, 200)})`)
  t.equal(await download(a, apiKey, h.fileId), createHash('sha256').update(bytes).digest('hex'), 'with its content')
}

/** Temp files as servers that are gone, a live one elsewhere, a CLI command and an older Coffer leave them. */
function leftovers(server: Server, dir: string) {
  const tmp = path.join(dir, 'tmp')
  const file = (name: string, ageMs = 0) => {
    const p = path.join(tmp, name)
    fs.writeFileSync(p, 'partial')
    const at = new Date(Date.now() - ageMs)
    fs.utimesSync(p, at, at)
    return name
  }
  const { leases } = server.core
  // A node killed a while ago: its lease lapsed. One alive elsewhere: its lease is current.
  leases.take('tmp:0000000000aa', 1, 'killed node')
  leases.take('tmp:0000000000bb', 3_600_000, 'live node')
  return {
    dead: [file('0000000000aa.upload-1'), file('0000000000aa.removed-2')],
    live: file('0000000000bb.upload-3'),
    youngUnowned: file('upload-4'),
    oldUnowned: file('upload-5', UNOWNED_TMP_MIN_AGE_MS + 60_000),
  }
}

withPg(t, 'two nodes on one PostgreSQL and one data dir path', (url) => {
  t.test('an upload streaming into one node completes while the other restarts', async (t) => {
    const dir = tempDir(t)
    const config = configFor(dir)
    const database = { postgres: await freshSchema(t, url) }
    const a = await start(t, config, { database })
    let b = await start(t, config, { database })
    await uploadAcross(t, a, dir, async () => {
      await b.close()
      b = await start(t, config, { database })
    })
  })

  t.test('a starting node removes the temp files of nodes whose lease lapsed, and only those', async (t) => {
    const dir = tempDir(t)
    const config = configFor(dir)
    const database = { postgres: await freshSchema(t, url) }
    const a = await start(t, config, { database })
    const left = leftovers(a, dir)
    await new Promise((resolve) => setTimeout(resolve, 10))
    await start(t, config, { database })
    t.same(
      fs.readdirSync(path.join(dir, 'tmp')).sort(),
      [left.live, left.youngUnowned].sort(),
      "the dead node's files and the old file of no node went; the live node's and a young file of no node (a CLI command's) stay",
    )
  })
})

t.test('--workers N on SQLite: a worker started while another serves', async (t) => {
  t.test("leaves the other's upload in flight alone", async (t) => {
    const dir = tempDir(t)
    const config = configFor(dir)
    const a = await start(t, config)
    await uploadAcross(t, a, dir, async () => {
      await start(t, config, { startup: false })
    })
  })

  t.test("removes a dead worker's temp files once its lease lapsed, and only those", async (t) => {
    const dir = tempDir(t)
    const config = configFor(dir)
    const a = await start(t, config)
    const left = leftovers(a, dir)
    await new Promise((resolve) => setTimeout(resolve, 10))
    await start(t, config, { startup: false })
    t.same(fs.readdirSync(path.join(dir, 'tmp')).sort(), [left.live, left.youngUnowned].sort())
  })

  t.test("the service's start (its first worker, the data dir's only process) removes every temp file a previous run left", async (t) => {
    const dir = tempDir(t)
    const config = configFor(dir)
    const a = await start(t, config)
    leftovers(a, dir)
    await a.close()
    await start(t, config)
    t.same(fs.readdirSync(path.join(dir, 'tmp')), [], 'its leases were cleared: all of them are gone, as before')
  })
})
