// @suites: sqlite
// `coffer health`: the container image's health check, which has no shell or curl to run. It asks
// the coffer serve of its machine for GET /health on the port serve reads (--port, COFFER_PORT),
// exit 0 on 200 and 1 otherwise, within a short timeout.
import t, { type Test } from 'tap'
import http from 'node:http'
import net from 'node:net'
import { execFile } from 'node:child_process'
import type { AddressInfo } from 'node:net'
import { BUNDLE, buildBundle, startCoffer } from './process-helper'
import { tempDir } from './helper'

buildBundle()
// Each run starts a Node process: past tap's 120 s on a loaded 2-core machine.
t.setTimeout(300_000)

interface Run {
  code: number
  stdout: string
  stderr: string
}

/** `coffer health …` without blocking this process, whose servers it may ask. */
function health(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BUNDLE, 'health', ...args], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr })
    })
  })
}

/** An HTTP server on 127.0.0.1 answering every request with `handler`. */
async function server(t: Test, handler: http.RequestListener): Promise<number> {
  const s = http.createServer(handler)
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        s.close(() => resolve())
        s.closeAllConnections()
      }),
  )
  return (s.address() as AddressInfo).port
}

/** A port nothing listens on (free a moment ago). */
async function closedPort(): Promise<number> {
  const s = net.createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const { port } = s.address() as AddressInfo
  await new Promise<void>((resolve) => s.close(() => resolve()))
  return port
}

t.test('a running coffer serve: exit 0, found through --port or COFFER_PORT, on 127.0.0.1 when bound to 0.0.0.0', async (t) => {
  const running = await startCoffer(['serve', '--port', '0', '--host', '0.0.0.0', '--data-dir', tempDir(t)], { cwd: tempDir(t) })
  t.teardown(() => {
    running.child.kill('SIGKILL')
  })
  const port = new URL(running.url).port
  const byFlag = await health(['--port', port, '--host', '0.0.0.0'])
  t.equal(byFlag.code, 0, byFlag.stderr)
  t.equal(byFlag.stdout, `http://127.0.0.1:${port}/health: 200\n`)
  const byEnv = await health([], { COFFER_PORT: port, COFFER_HOST: '0.0.0.0' })
  t.equal(byEnv.code, 0, byEnv.stderr)
  t.equal(byEnv.stderr, '')
  const byHost = await health([], { COFFER_PORT: port, COFFER_HOST: '127.0.0.1' })
  t.equal(byHost.code, 0, byHost.stderr)

  running.child.kill('SIGTERM')
  t.equal(await running.exited, 0)
  const gone = await health(['--port', port])
  t.equal(gone.code, 1, 'the server stopped: exit 1')
  t.equal(gone.stderr, `coffer: health: http://127.0.0.1:${port}/health: ECONNREFUSED\n`)
  t.equal(gone.stdout, '')
})

t.test('another status than 200 is unhealthy: exit 1 naming it', async (t) => {
  const port = await server(t, (req, res) => {
    t.equal(req.url, '/health')
    res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"DATABASE_UNAVAILABLE"}}')
  })
  const r = await health(['--port', String(port)])
  t.equal(r.code, 1)
  t.equal(r.stderr, `coffer: health: http://127.0.0.1:${port}/health: answered 503\n`)
})

t.test('a server that does not answer: exit 1 after the timeout, not a hang', async (t) => {
  const port = await server(t, () => {
    // Never answers.
  })
  const started = performance.now()
  const r = await health(['--port', String(port), '--timeout', '1'])
  t.equal(r.code, 1)
  t.equal(r.stderr, `coffer: health: http://127.0.0.1:${port}/health: no answer within 1 s\n`)
  t.ok(performance.now() - started < 20_000, 'it gave up on its own')
})

t.test('nothing listening on the port: exit 1', async (t) => {
  const port = await closedPort()
  const r = await health([], { COFFER_PORT: String(port) })
  t.equal(r.code, 1)
  t.match(r.stderr, `coffer: health: http://127.0.0.1:${port}/health: ECONNREFUSED`)
})

t.test('usage: a port of 0 cannot be asked, a bad timeout or port is a usage error, --help explains', async (t) => {
  const zero = await health([], { COFFER_PORT: '0' })
  t.equal(zero.code, 1)
  t.match(zero.stderr, /^coffer: health: the port is 0 .*set --port or COFFER_PORT/)
  const timeout = await health(['--timeout', 'soon'])
  t.equal(timeout.code, 2)
  t.match(timeout.stderr, /^coffer: --timeout must be a number of seconds/)
  const port = await health(['--port', '70000'])
  t.equal(port.code, 2)
  t.match(port.stderr, /^coffer: invalid configuration: --port="70000" must be an integer from 0 to 65535/)
  const help = await health(['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /^Usage: coffer health \[--port PORT\]/)
})
