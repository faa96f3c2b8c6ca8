// @suites: sqlite
import t from 'tap'
import { spawn } from 'node:child_process'
import { BUNDLE, buildBundle, initDataDir } from './process-helper'
import { tempDir } from './helper'

// #12 item 16: `coffer verify … | head -1` must not die with an EPIPE stack trace. The reader
// here closes its end of the pipe before the command writes anything, so every write fails.

buildBundle()

function runWithClosedStdout(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BUNDLE, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.destroy()
    let stderr = ''
    child.stderr.setEncoding('utf8')
    child.stderr.on('data', (d: string) => (stderr += d))
    child.on('close', (code) => resolve({ code, stderr }))
  })
}

t.test('every command survives a reader that went away', async (t) => {
  // A data dir as serve leaves it: the other commands refuse a path that holds none (#13).
  const dir = initDataDir(tempDir(t))
  const env = { COFFER_DATA_DIR: dir }
  for (const args of [
    ['version'],
    ['--help'],
    ['tenant', 'create', '--name', 'Pipe'],
    ['tenant', 'list'],
    ['verify'],
    ['verify', '--json'],
    ['gc'],
    ['webhooks', 'list'],
  ]) {
    const { code, stderr } = await runWithClosedStdout(args, env)
    t.equal(code, 0, `coffer ${args.join(' ')}: exit code`)
    t.notMatch(stderr, /EPIPE|Error|at /, `coffer ${args.join(' ')}: no stack trace`)
  }
})
