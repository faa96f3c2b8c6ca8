// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { BUNDLE, buildBundle } from './process-helper'
import { tempDir } from './helper'
import { withPg } from './pg/fixture'
import { checkBridge, PROBE_PRELOAD } from './pg/artifact'

// Every statement on PostgreSQL is a round trip through the synchronous bridge: hundreds of them take
// 40 s on a quiet machine and came within 20 s of the suite's 120 s per file at load 15.
t.setTimeout(300_000)

// The PostgreSQL bridge inside dist/coffer.cjs (#30): its worker thread, pg inlined, starts from
// the bundle alone. The single executable's twin is in sea.test.ts, which builds it.

buildBundle()

withPg(t, 'the bridge in dist/coffer.cjs', (url) => {
  t.test('a copy of the bundle alone in a directory runs a query and transactions on PostgreSQL', async (t) => {
    // The bundle and its SQLite addon, nothing else: no node_modules to find pg in.
    const dir = tempDir(t)
    for (const f of [BUNDLE, path.join(path.dirname(BUNDLE), 'better_sqlite3.node')]) fs.copyFileSync(f, path.join(dir, path.basename(f)))
    fs.writeFileSync(path.join(dir, 'probe.cjs'), PROBE_PRELOAD)
    const stderr = await checkBridge(t, url, { command: process.execPath, args: ['--require', './probe.cjs', 'coffer.cjs'], cwd: dir })
    t.match(stderr, /^probe: thread coffer-pg$/m, "the bridge's thread ran")
  })
})

t.test('the main script never evaluates pg: it is only in the worker, held as a string', async (t) => {
  const code = fs.readFileSync(BUNDLE, 'utf8')
  // pg-protocol's message parser names this error; it must appear once, inside the worker's string.
  const marker = 'received invalid response: '
  t.equal(code.split(marker).length - 1, 1, "pg's code is in the bundle once")
  const literal = code.indexOf('pgWorkerSource=function(){return{code:')
  t.ok(literal > 0 && code.indexOf(marker) > literal && code.indexOf(marker) < literal + 200_000, 'inside the string the worker source returns')
})

t.test('a worker that fails while loading wakes its caller at once, and the process lives on', async (t) => {
  // What a bundle whose worker cannot load pg would do: the thread ends before worker.ts runs.
  const { PgBridge } = t.mockRequire('../src/db/pg/bridge', {
    '../src/db/pg/worker-source': { pgWorkerSource: () => ({ code: "throw new Error('pg failed to load')" }) },
  }) as typeof import('../src/db/pg/bridge')
  const bridge = new PgBridge({ url: 'postgres://coffer@127.0.0.1:1/coffer', connectTimeoutMs: 20_000 })
  t.teardown(() => bridge.close())
  const started = Date.now()
  t.throws(() => bridge.query('SELECT 1'), { code: '08006', message: /thread ended/ })
  t.ok(Date.now() - started < 5_000, `answered in ${Date.now() - started} ms, not at the bridge's deadline (35 s)`)
  // The thread's uncaught error reaches the Worker object after the caller was told: no crash.
  await new Promise((r) => setTimeout(r, 300))
  t.pass('still running')
})

t.test('a worker that dies between calls neither crashes the process nor stalls the next call', async (t) => {
  // Answers each request, then dies of an uncaught error while the caller is idle.
  const code = `const { workerData } = require('node:worker_threads')
    const flag = new Int32Array(workerData.flag)
    workerData.port.on('message', (req) => {
      workerData.port.postMessage({ seq: req.seq, ok: true, rows: [{ thread: require('node:worker_threads').threadId }], fields: ['thread'], rowCount: 1 })
      Atomics.store(flag, 0, 1)
      Atomics.notify(flag, 0)
      setTimeout(() => { throw new Error('died while idle') }, 20)
    })`
  const { PgBridge } = t.mockRequire('../src/db/pg/bridge', {
    '../src/db/pg/worker-source': { pgWorkerSource: () => ({ code }) },
  }) as typeof import('../src/db/pg/bridge')
  const bridge = new PgBridge({ url: 'postgres://coffer@127.0.0.1:1/coffer', connectTimeoutMs: 20_000 })
  t.teardown(() => bridge.close())
  const first = bridge.query('SELECT 1').rows[0]!.thread
  // The thread's uncaught error reaches its Worker object on this event loop: no crash.
  await new Promise((r) => setTimeout(r, 300))
  const started = Date.now()
  const second = bridge.query('SELECT 1').rows[0]!.thread
  t.not(second, first, 'a new thread answered')
  t.ok(Date.now() - started < 5_000, `in ${Date.now() - started} ms, not at the bridge's deadline (35 s)`)
})
