import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { BUNDLE, buildBundle } from './process-helper'
import { tempDir } from './helper'
import { withPg } from './pg/fixture'
import { checkBridge, PROBE_PRELOAD } from './pg/artifact'

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
