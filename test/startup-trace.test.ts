// @suites: sqlite
import t from 'tap'
import { buildBundle, startCoffer } from './process-helper'
import { tempDir } from './helper'

// COFFER_STARTUP_TRACE=1: where a start's wall and CPU time go, one line on stderr once ready (#28).

buildBundle()

const TRACE = /^\{"startupTrace":/

t.test('serve --ephemeral with COFFER_STARTUP_TRACE=1: each phase, in order, wall and CPU time growing; none without', async (t) => {
  const tmp = tempDir(t)
  const traced = await startCoffer(['serve', '--ephemeral', '--port', '0'], { cwd: tmp, env: { TMPDIR: tmp, COFFER_STARTUP_TRACE: '1' }, ready: TRACE })
  traced.child.kill('SIGTERM')
  t.equal(await traced.exited, 0)
  const line = traced.lines.find((l) => TRACE.test(l))!
  const { startupTrace, memory } = JSON.parse(line) as { startupTrace: { phase: string; ms: number; cpuMs: number }[]; memory: Record<string, number> }
  t.same(
    startupTrace.map((m) => m.phase),
    [
      'modules evaluated',
      'configured',
      'data dir and key',
      'database opened and migrated',
      'core created',
      'start-up clean-up',
      'API app built',
      'S3 app built',
      'before listen (buckets)',
      'listening',
      'ready',
    ],
  )
  for (let i = 1; i < startupTrace.length; i++) {
    t.ok(startupTrace[i]!.ms >= startupTrace[i - 1]!.ms, `${startupTrace[i]!.phase}: wall time since the process began`)
    t.ok(startupTrace[i]!.cpuMs >= startupTrace[i - 1]!.cpuMs, `${startupTrace[i]!.phase}: CPU time so far`)
  }
  t.ok(startupTrace[0]!.cpuMs > 0)
  t.ok(memory.rss! > memory.heapUsed! && memory.heapUsed! > 0, 'the process memory figures')
  t.notOk(
    traced.stdout.some((l) => TRACE.test(l)),
    'stdout keeps its one JSON line',
  )

  const plain = await startCoffer(['serve', '--ephemeral', '--port', '0'], { cwd: tmp, env: { TMPDIR: tmp }, ready: /^\{"url":/ })
  await new Promise((r) => setTimeout(r, 200))
  plain.child.kill('SIGTERM')
  t.equal(await plain.exited, 0)
  t.notOk(
    plain.lines.some((l) => l.includes('startupTrace')),
    'no trace unless asked',
  )
})
