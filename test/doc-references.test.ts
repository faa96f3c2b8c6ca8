// @suites: sqlite
// The repository stands alone: every Markdown file a comment, script or doc names is in it, and
// nothing points outside the checkout (a design note kept elsewhere is brought in, in our words).
import t from 'tap'
import path from 'node:path'
import fs from 'node:fs'
import { execFileSync } from 'node:child_process'

const root = path.join(__dirname, '..')
const tracked = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean)
const texts = tracked.filter((f) => /\.(ts|tsx|mjs|js|sh|md|css|html|ya?ml)$/.test(f) || f.startsWith('.ci/'))
const mds = new Set(tracked.filter((f) => f.endsWith('.md')))

t.test('every named .md file is in the repository', async (t) => {
  const missing: string[] = []
  for (const f of texts) {
    const text = fs.readFileSync(path.join(root, f), 'utf8')
    for (const m of text.matchAll(/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b/g)) {
      const name = m[0]
      const resolved = path.normalize(path.join(path.dirname(f), name))
      const known = mds.has(name) || mds.has(resolved) || [...mds].some((md) => md.endsWith('/' + name) || path.basename(md) === name)
      if (!known) missing.push(`${f}: ${name}`)
    }
  }
  t.same(missing, [], 'names of files the repository does not have')
})

t.test('nothing points outside the checkout', async (t) => {
  const outside = texts.filter((f) => /\.\.\/shared\b|\/work\/shared\b/.test(fs.readFileSync(path.join(root, f), 'utf8')))
  t.same(outside, [])
})
