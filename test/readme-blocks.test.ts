// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { s3ClientsMissing, tempDir } from './helper'
import { ROOT, buildBundle } from './process-helper'
import { TEST_LOG_DIR } from './log-scan/secrets'
import { anchors } from './markdown'

// README's commands run as written (#31): every ```sh block marked `<!-- runnable -->` on the line
// before its fence runs, in order: README's first, then those of the pages its sections continue
// into (DOCUMENTS), in one `bash` with `set -euo pipefail`, from a fresh directory that stands for
// the checkout (its scripts/ is the checkout's, so `coffer` is scripts/bin/coffer: the bundle built
// here under the toolchain's Node 24). Each block must exit 0, and a block's `# → text` comments
// are its expected output (`…` matches anything), in order. README's ports 8080 and 9000 become
// free ones, so the run never meets another server; HOME is the temp dir, so no tool reads or
// writes the user's configuration, and its .curlrc makes an HTTP error fail curl. The blocks share
// one server and their variables, as a reader going down the pages would: each section does not
// get a fresh server of its own. Links to `#anchors` must name a heading; that the reference pages
// list every setting, command, route and S3 operation is test/reference-pages.test.ts's.

// Two servers, the AWS CLI, rclone and restic on a shared 2-core machine: past tap's 120 s there.
t.setTimeout(300_000)

const README_PATH = path.join(ROOT, 'README.md')
/** The documents whose runnable blocks run, in this order: README, then the pages whose examples continue from it. */
const DOCUMENTS = ['README.md', 'src/docs/api-guide.md', 'src/docs/s3-behaviour.md']
const MARKER = '<!-- runnable -->'
const DEADLINE_MS = 240_000

interface Block {
  /** `file:line` of the fence (1-based). */
  line: string
  body: string
}

/** A block's `# → text` comments, as whole-line regular expressions (`…` matches anything). */
function expectedOutput(body: string): RegExp[] {
  return body
    .split('\n')
    .map((b) => /^\s*# → (.*)$/.exec(b)?.[1])
    .filter((e): e is string => e !== undefined)
    .map((e) => new RegExp(`^${e.split('…').map(escape).join('.*?')}$`))
}

/** The runnable blocks of `file` (relative to the checkout), in order. */
function runnableBlocks(file: string): Block[] {
  const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n')
  const blocks: Block[] = []
  lines.forEach((l, i) => {
    if (l.trim() !== MARKER) return
    if (lines[i + 1] !== '```sh') throw new Error(`${file}:${i + 1}: ${MARKER} must be followed by a \`\`\`sh fence`)
    const end = lines.findIndex((x, j) => j > i + 1 && x === '```')
    if (end < 0) throw new Error(`${file}:${i + 2}: unclosed fence`)
    blocks.push({ line: `${file}:${i + 2}`, body: lines.slice(i + 2, end).join('\n') })
  })
  return blocks
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })
}

const README = fs.readFileSync(README_PATH, 'utf8')

t.test('every #anchor link of README names one of its headings, the contents list first', async (t) => {
  const known = anchors(README)
  const contents = /^## Contents\n([\s\S]*?)\n## /m.exec(README)
  t.ok(contents, 'README has a contents list')
  const listed = [...(contents?.[1] ?? '').matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]!)
  t.ok(listed.length >= 12, `the contents list links every section (${listed.length})`)
  for (const h of README.matchAll(/^## (.*)$/gm)) {
    const name = h[1]!
    if (name === 'Contents') continue
    t.ok(contents?.[1]?.includes(`[${name}]`), `the contents list names "${name}"`)
  }
  for (const m of README.matchAll(/\]\(#([^)]+)\)/g)) t.ok(known.has(m[1]!), `#${m[1]} is a heading`)
  // Links into the repository's other Markdown files, with or without an anchor (the pages' own
  // links: test/reference-pages.test.ts).
  for (const m of README.matchAll(/\]\(([\w./-]+\.md)(?:#([^)]+))?\)/g)) {
    const file = path.join(ROOT, m[1]!)
    t.ok(fs.existsSync(file), `${m[1]} exists`)
    if (m[2] && fs.existsSync(file)) t.ok(anchors(fs.readFileSync(file, 'utf8')).has(m[2]), `${m[1]}#${m[2]} is a heading`)
  }
  t.ok(README.split('\n').length <= 600, `README is a guide of at most 600 lines (${README.split('\n').length})`)
})

// The issue (#31): "no section reads as a work log"; measurement history goes to scripts/bench/README.md,
// whose links back to README must then still name its headings.
t.test('README reads as a reference, not a work log; the bench README links back to its headings', async (t) => {
  const log = [/\bthis session\b/i, /\bthis round\b/i, /\bthe round before\b/i, /\b[0-9a-f]{7} → [0-9a-f]{7}\b/]
  const history = README.split('\n').flatMap((line, i) => (log.some((re) => re.test(line)) ? [`README.md:${i + 1}: ${line}`] : []))
  t.same(history, [], 'no line of README tells what a session or round changed')
  const bench = fs.readFileSync(path.join(ROOT, 'scripts', 'bench', 'README.md'), 'utf8')
  const back = [...bench.matchAll(/\]\(\.\.\/\.\.\/((?:README|src\/docs\/[\w-]+)\.md)#([^)]+)\)/g)].map((m) => [m[1]!, m[2]!] as const)
  t.ok(back.length >= 3, `scripts/bench/README.md links to README's and the pages' sections (${back.length})`)
  for (const [file, a] of back) {
    t.ok(anchors(fs.readFileSync(path.join(ROOT, file), 'utf8')).has(a), `scripts/bench/README.md's link to ${file}#${a} names a heading`)
  }
})

t.test('every image README shows is in the repository, with a text saying what it shows', async (t) => {
  // <img src="…"> (the console's screenshots, #31) and Markdown's ![alt](path): GitHub shows a
  // broken picture for a path that is not committed, e.g. after a screenshot is renamed.
  const images = [
    ...[...README.matchAll(/<img\s[^>]*>/g)].map((m) => ({ src: /\ssrc="([^"]*)"/.exec(m[0])?.[1] ?? '', alt: /\salt="([^"]*)"/.exec(m[0])?.[1] ?? '' })),
    ...[...README.matchAll(/!\[([^\]]*)\]\(([^)\s]+)\)/g)].map((m) => ({ src: m[2]!, alt: m[1]! })),
  ]
  t.ok(images.length >= 4, `README shows images (${images.length})`)
  for (const { src, alt } of images) {
    t.ok(src !== '' && !/^[a-z]+:/i.test(src) && fs.existsSync(path.join(ROOT, src)), `${src || '(no src)'} exists`)
    t.ok(alt.length >= 10, `${src} has an alt text (${JSON.stringify(alt)})`)
  }
})

t.test(
  "README's runnable shell blocks, then its pages', run as written, in order, against a fresh server",
  { skip: s3ClientsMissing("README's runnable blocks") ?? false },
  async (t) => {
    const blocks = DOCUMENTS.flatMap(runnableBlocks)
    t.ok(blocks.length >= 8, `${blocks.length} runnable blocks`)
    for (const b of blocks) {
      for (const url of b.body.matchAll(/\bhttps?:\/\/([^/\s"'`:]+)/g)) t.equal(url[1], '127.0.0.1', `${b.line}: ${url[0]} stays on this machine`)
    }

    buildBundle()
    const dir = tempDir(t, 'coffer-readme-')
    fs.symlinkSync(path.join(ROOT, 'scripts'), path.join(dir, 'scripts'))
    // curl reads ~/.curlrc: an HTTP error then fails the command (exit 22), so an example answered
    // 401 or 404 fails its block instead of printing an error envelope and going on.
    fs.writeFileSync(path.join(dir, '.curlrc'), '--fail\n')
    const [api, s3] = [await freePort(), await freePort()]
    // README's ports 8080 and 9000 move to free ones: in URLs, and for each `coffer serve` that
    // takes the defaults (an --ephemeral one picks free ports itself).
    const ports = (s: string) =>
      s
        .replace(/127\.0\.0\.1:8080\b/g, `127.0.0.1:${api}`)
        .replace(/127\.0\.0\.1:9000\b/g, `127.0.0.1:${s3}`)
        .replace(/^(\s*)coffer serve(?![^\n]*--(?:ephemeral|port|s3-port))/gm, `$1coffer serve --port ${api} --s3-port ${s3}`)
    const script = [
      'set -euo pipefail',
      ...blocks.map((b, i) => `printf '\\n@@block ${i} start@@\\n'\n${ports(b.body)}\nprintf '\\n@@block ${i} end@@\\n'`),
    ].join('\n')

    const env: Record<string, string> = { HOME: dir, TMPDIR: process.env.TMPDIR ?? '/tmp', LANG: 'C.UTF-8', AWS_EC2_METADATA_DISABLED: 'true' }
    for (const k of ['PATH', 'TERM']) if (process.env[k]) env[k] = process.env[k]
    // One worker, as the other tests' servers.
    env.COFFER_WORKERS = '1'

    const child = spawn('bash', ['-c', script], { cwd: dir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    // The blocks leave a server running: the whole process group goes when the run ends.
    const killAll = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    t.teardown(killAll)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const began = Date.now()
    const timer = setTimeout(killAll, DEADLINE_MS)
    const code = await new Promise<number | string>((resolve) => child.once('exit', (c, s) => resolve(c ?? s ?? -1)))
    clearTimeout(timer)
    t.ok(Date.now() - began < DEADLINE_MS, `ended within ${DEADLINE_MS / 1000} s (${Date.now() - began} ms)`)

    // The servers' logs join the scan for credentials after the run (test/log-scan/after.ts).
    const logs = ['coffer.log', 'fixture.log'].map((f) => path.join(dir, f)).filter((f) => fs.existsSync(f))
    fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
    for (const f of logs) {
      const pino = fs
        .readFileSync(f, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('{"level":'))
      fs.writeFileSync(path.join(TEST_LOG_DIR, `readme-${child.pid}-${path.basename(f)}`), pino.map((l) => `${l}\n`).join(''))
    }
    const log = logs.length > 0 ? fs.readFileSync(logs[0]!, 'utf8').split('\n').slice(-20).join('\n') : ''
    blocks.forEach((b, i) => {
      const start = stdout.indexOf(`\n@@block ${i} start@@\n`)
      const end = stdout.indexOf(`\n@@block ${i} end@@\n`)
      const ran = start >= 0 && end > start
      if (!ran) {
        if (start >= 0) t.fail(`${b.line}: the block failed (exit ${code})`, { block: b.body, stdout: stdout.slice(start), stderr, log })
        else t.fail(`${b.line}: the block did not run (an earlier one failed)`)
        return
      }
      t.pass(`${b.line}: the block exits 0`)
      const out = stdout.slice(start + `\n@@block ${i} start@@\n`.length, end).split('\n')
      let at = 0
      for (const re of expectedOutput(ports(b.body))) {
        const found = out.findIndex((l, j) => j >= at && re.test(l))
        t.ok(found >= 0, `${b.line}: its output has a line ${re}`, found < 0 ? { output: out } : {})
        if (found >= 0) at = found + 1
      }
    })
    t.equal(code, 0, 'the whole run exits 0')
  },
)
