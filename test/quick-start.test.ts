// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { tempDir } from './helper'

// The README starts `coffer serve` in the background and waits for /health. When the server dies
// at start (a port in use, a bad setting) the wait must end and show its log, not loop forever (#24).

const README = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')

/** Every shell snippet of the README from `coffer serve … &` to the end of the wait loop that follows it. */
function startAndWait(): string[] {
  const snippets: string[] = []
  for (const block of README.matchAll(/```sh\n([\s\S]*?)\n```/g)) {
    const lines = block[1]!.split('\n')
    lines.forEach((line, i) => {
      if (!/^coffer serve .*&\s*(#.*)?$/.test(line)) return
      const end = lines.findIndex((l, j) => j > i && /^\s*(until|while) .*;\s*done\s*$|^done\s*$/.test(l))
      if (end > i) snippets.push(lines.slice(i, end + 1).join('\n'))
    })
  }
  return snippets
}

t.test("the README's wait for /health ends, with the log, when coffer serve has exited", async (t) => {
  const snippets = startAndWait()
  t.ok(snippets.length >= 1, `the quick start's (${snippets.length} found)`)
  for (const snippet of snippets) {
    t.match(snippet, /until curl .*\/health/, 'it waits for /health')
    const dir = tempDir(t)
    const bin = path.join(dir, 'bin')
    fs.mkdirSync(bin)
    // A coffer that cannot start, and a curl that finds nothing listening (port 8080 of this
    // machine may be anyone's).
    fs.writeFileSync(path.join(bin, 'coffer'), '#!/bin/sh\necho "coffer: the API port 8080 on 127.0.0.1 is already in use" >&2\nexit 2\n', { mode: 0o755 })
    fs.writeFileSync(path.join(bin, 'curl'), '#!/bin/sh\nexit 7\n', { mode: 0o755 })
    const began = Date.now()
    const r = spawnSync('bash', ['-c', snippet], { cwd: dir, encoding: 'utf8', timeout: 10_000, env: { PATH: `${bin}:${process.env.PATH ?? ''}` } })
    t.equal(r.signal, null, `the wait ended by itself (after ${Date.now() - began} ms):\n${snippet}`)
    t.match(r.stdout, /coffer: the API port 8080 .* already in use/, "and showed coffer's log")
  }
})
