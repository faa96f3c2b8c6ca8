// Measures the cold start of Coffer: the time from spawning `coffer serve` to the first 200 from
// GET /health, over N runs (default 10), and prints the median, min and max as JSON.
//   node scripts/cold-start.mjs [--runs N] [--command PATH] [--ephemeral]
// --command defaults to dist/coffer (npm run build:sea first); `--command dist/coffer.cjs` times
// the bundle under this Node instead. Two cases: a fresh data dir every run (the addon is unpacked
// and the schema created: a first start) and one data dir reused (every later start).
// --ephemeral times `serve --ephemeral` to its JSON line instead, what a CI job waits for.
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import readline from 'node:readline'
import { spawn } from 'node:child_process'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const { values } = parseArgs({ options: { runs: { type: 'string', default: '10' }, command: { type: 'string' }, ephemeral: { type: 'boolean' } } })
const runs = Number(values.runs)
const target = path.resolve(root, values.command ?? 'dist/coffer')
const [command, prefix] = target.endsWith('.cjs') ? [process.execPath, [target]] : [target, []]
if (!fs.existsSync(target)) throw new Error(`${target} does not exist: build it first (npm run build:sea)`)

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = net.createServer().once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })

async function healthy(url, deadline) {
  while (performance.now() < deadline) {
    try {
      if ((await fetch(url)).status === 200) return
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 2))
  }
  throw new Error(`${url} never answered 200`)
}

/** One start: spawn, wait until ready, stop with SIGTERM; milliseconds from spawn to ready. */
async function once(args, ready) {
  const child = spawn(command, [...prefix, ...args], { stdio: ['ignore', 'pipe', 'ignore'], env: { PATH: process.env.PATH, TMPDIR: os.tmpdir() } })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const started = performance.now()
  try {
    await ready(child)
    return performance.now() - started
  } finally {
    child.kill('SIGTERM')
    await exited
  }
}

async function serveRun(dataDir) {
  const port = await freePort()
  return once(['serve', '--port', String(port), '--s3-port', '0', '--data-dir', dataDir, '--log-level', 'warn'], () =>
    healthy(`http://127.0.0.1:${port}/health`, performance.now() + 20_000),
  )
}

const ephemeralRun = () =>
  once(
    ['serve', '--ephemeral', '--port', '0', '--log-level', 'warn'],
    (child) =>
      new Promise((resolve, reject) => {
        readline.createInterface({ input: child.stdout }).once('line', resolve)
        child.once('exit', () => reject(new Error('exited before its JSON line')))
      }),
  )

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b)
  const mid = s.length / 2
  const median = s.length % 2 ? s[Math.floor(mid)] : (s[mid - 1] + s[mid]) / 2
  const r = (x) => Math.round(x * 10) / 10
  return { medianMs: r(median), minMs: r(s[0]), maxMs: r(s.at(-1)), runs: s.length }
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-cold-start-'))
try {
  await serveRun(path.join(work, 'warm-up')) // page the binary in once, as any start after a boot would
  const result = { command: path.relative(root, target), sizeBytes: fs.statSync(target).size }
  if (values.ephemeral) {
    const ms = []
    for (let i = 0; i < runs; i++) ms.push(await ephemeralRun())
    result.ephemeralToJsonLine = stats(ms)
  } else {
    const fresh = []
    for (let i = 0; i < runs; i++) fresh.push(await serveRun(path.join(work, `fresh-${i}`)))
    const reused = []
    for (let i = 0; i < runs; i++) reused.push(await serveRun(path.join(work, 'reused')))
    result.freshDataDir = stats(fresh)
    result.reusedDataDir = stats(reused)
  }
  console.log(JSON.stringify(result, null, 2))
} finally {
  fs.rmSync(work, { recursive: true, force: true })
}
