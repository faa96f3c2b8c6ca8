// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { BUNDLE, buildBundle, startCoffer } from './process-helper'
import { tempDir } from './helper'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { openDatabase } from '../src/db/database'

// What makes an idle CI fixture start faster and use less memory (#28, #29; README: CI fixture).

buildBundle()

const READY = /^\{"url":"(http:\/\/[^"]+)"/

/** Anonymous memory of a process (the V8 heap and malloc, not the pages of its executable), in bytes. */
function anonymous(pid: number): number {
  const m = /^Anonymous:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))
  return Number(m?.[1] ?? 0) * 1024
}

t.test('an ephemeral (throwaway) database is opened without fsync; a kept one with synchronous=FULL', async (t) => {
  const dir = tempDir(t)
  const kept = createCore(loadConfig({}, { 'data-dir': path.join(dir, 'kept') }))
  t.teardown(() => kept.close())
  t.equal(kept.sqlite!.pragma('synchronous', { simple: true }), 2, 'FULL')
  const throwaway = createCore(loadConfig({}, { 'data-dir': path.join(dir, 'throwaway') }), { throwaway: true })
  t.teardown(() => throwaway.close())
  t.equal(throwaway.sqlite!.pragma('synchronous', { simple: true }), 0, 'OFF: the start-up writes flush no WAL')
  const db = openDatabase(path.join(dir, 'direct.db'), dir, undefined, { throwaway: true })
  t.teardown(() => db.close())
  t.equal(db.pragma('synchronous', { simple: true }), 0, 'the migrations ran under OFF')
})

t.test('serve --ephemeral: start-up garbage is collected a moment after start, once', async (t) => {
  const tmp = tempDir(t)
  const server = await startCoffer(['serve', '--ephemeral', '--port', '0'], { cwd: tmp, env: { TMPDIR: tmp, COFFER_S3_PORT: '' }, ready: READY })
  t.teardown(() => server.child.kill('SIGKILL'))
  const pid = server.child.pid!
  const atReady = anonymous(pid)
  await new Promise((r) => setTimeout(r, 3000))
  const settled = anonymous(pid)
  const mib = (b: number) => (b / 1024 / 1024).toFixed(1)
  // Measured 48 → 38 MB (bundle); without the collection it stays where start-up left it.
  t.ok(atReady - settled > 4 * 1024 * 1024, `anonymous memory ${mib(atReady)} MiB at ready, ${mib(settled)} MiB 3 s later`)
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})

t.test('serve --ephemeral, idle: none of the modules only other features use is loaded (#28)', async (t) => {
  const tmp = tempDir(t)
  // Node's own list of the built-in modules this process has loaded, written once it is idle.
  const preload = path.join(tmp, 'loaded.cjs')
  const list = path.join(tmp, 'loaded.json')
  // And the worker threads it has started, by name (none is the PostgreSQL bridge's, #30).
  fs.writeFileSync(
    preload,
    `const threads = []; process.on('worker', (w) => threads.push(w.threadName));
    setTimeout(() => require('node:fs').writeFileSync(${JSON.stringify(list)}, JSON.stringify({ modules: process.moduleLoadList, threads })), 1500).unref()`,
  )
  const server = await startCoffer(['--require', preload, BUNDLE, 'serve', '--ephemeral'], {
    cwd: tmp,
    command: process.execPath,
    env: { TMPDIR: tmp, COFFER_S3_PORT: '' },
    ready: READY,
  })
  t.teardown(() => server.child.kill('SIGKILL'))
  const { url } = JSON.parse(server.stdout[0]!) as { url: string }
  t.equal((await fetch(`${url}/health`)).status, 200)
  await new Promise((r) => setTimeout(r, 2000))
  const { modules, threads } = JSON.parse(fs.readFileSync(list, 'utf8')) as { modules: string[]; threads: string[] }
  const loaded = new Set(modules.map((m) => m.replace(/^NativeModule /, '')))
  t.ok(loaded.has('http') && loaded.has('crypto'), 'the list is the one of a server that answers')
  // HTTP/2 and HTTPS (with TLS): Fastify's servers Coffer never makes, webhooks and the CLI client
  // to https URLs; readline: --detach; zlib: the first CRC32 checksum; DNS: the first webhook.
  for (const m of ['http2', 'https', 'tls', 'readline', 'zlib', 'dns/promises']) t.notOk(loaded.has(m), `${m} is not loaded`)
  // The PostgreSQL bridge's thread, and pg in it, start with the first connection only (#30);
  // the test below shows that this probe sees that thread when it starts.
  t.notOk(threads.includes('coffer-pg'), `no PostgreSQL bridge thread (threads started: ${JSON.stringify(threads)})`)
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})

t.test('the probe above sees the PostgreSQL bridge thread once the bridge is used (#30)', async (t) => {
  const tmp = tempDir(t)
  const preload = path.join(tmp, 'threads.cjs')
  fs.writeFileSync(preload, `process.on('worker', (w) => process.stderr.write('thread ' + w.threadName + '\\n'))`)
  // Nothing listens on port 1: the thread starts, pg is evaluated in it, and connecting fails at once.
  const r = spawnSync(process.execPath, ['--require', preload, BUNDLE, '__pg-bridge'], {
    cwd: tmp,
    input: JSON.stringify({ url: 'postgres://coffer@127.0.0.1:1/coffer', steps: [{ sql: 'SELECT 1' }] }),
    encoding: 'utf8',
    timeout: 30_000,
  })
  t.equal(r.status, 1)
  t.match(r.stdout, /"code":"08001"/, 'the connection refused, as a SQLSTATE')
  t.match(r.stderr, /^thread coffer-pg$/m)
})
