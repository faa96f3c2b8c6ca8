// @suites: sqlite
// Memory under a load of small writes (#29): V8's young generation stays small while objects that
// live across a flush wait keep surviving scavenges, and SQLite's page cache goes back once idle.
import t from 'tap'
import v8 from 'node:v8'
import vm from 'node:vm'
import { loadConfig } from '../src/config'
import { createLogger } from '../src/lib/logger'
import { startServer } from '../src/server'
import { idleCollectionCount, noteStreamed } from '../src/lib/heap-relief'
import { captureLogs, tempDir } from './helper'
import type { DB } from '../src/db/database'

v8.setFlagsFromString('--expose-gc')

const newSpaceBytes = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size

/** Allocates for `ms` while keeping the last ~60k objects alive: requests waiting for their flush. */
async function survivingLoad(ms: number): Promise<void> {
  const live: unknown[] = []
  const end = Date.now() + ms
  while (Date.now() < end) {
    for (let i = 0; i < 2000; i++) live.push({ body: Buffer.alloc(64), key: `small/${i}/${Date.now()}` })
    if (live.length > 60_000) live.splice(0, live.length - 60_000)
    await new Promise((r) => setImmediate(r))
  }
}

t.test("a started server's young generation stays at its size under a load whose objects survive", async (t) => {
  // Start from the young generation's initial size, as `coffer serve` does a moment after start
  // (settle-heap.ts); the test runner's loaders have grown it by now.
  ;(vm.runInNewContext('gc') as (o: object) => void)({ type: 'major', execution: 'sync', flavor: 'last-resort' })
  const initial = newSpaceBytes()
  const config = loadConfig({}, { port: '0', 's3-port': '0', 'data-dir': tempDir(t) })
  const server = await startServer(config, createLogger(config.logLevel, captureLogs().stream))
  t.teardown(() => server.close())
  await survivingLoad(2500)
  t.ok(initial <= 4 * 1024 * 1024, `new space ${(initial / 1e6).toFixed(1)} MB before the load`)
  // V8's default grows it to two 64 MiB semi-spaces (134 MB) under this load.
  t.ok(newSpaceBytes() <= 16 * 1024 * 1024, `new space ${(newSpaceBytes() / 1e6).toFixed(1)} MB`)
})

t.test('once a load is over, the database gives its page cache back', async (t) => {
  const config = loadConfig({}, { port: '0', 's3-port': '0', 'data-dir': tempDir(t) })
  const server = await startServer(config, createLogger(config.logLevel, captureLogs().stream))
  t.teardown(() => server.close())
  const pragma = server.core.sqlite!.pragma.bind(server.core.sqlite!)
  const asked: string[] = []
  server.core.sqlite!.pragma = ((source: string, options?: object) => {
    asked.push(source)
    return pragma(source, options)
  }) as DB['pragma']
  const before = idleCollectionCount()
  noteStreamed(4096)
  for (let waited = 0; idleCollectionCount() === before && waited < 12_000; waited += 20) await new Promise((r) => setTimeout(r, 20))
  t.equal(idleCollectionCount(), before + 1, 'the load is over')
  t.same(asked, ['shrink_memory'], "SQLite's cache released")
  server.core.sqlite!.pragma = pragma
})
