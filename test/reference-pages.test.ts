// @suites: sqlite
// The reference pages under src/docs/ are generated from the code's tables (src/docs/reference.ts):
// the committed pages are what the generator makes of the code as it is, each lists everything
// its table has, and every link between the pages, the README and the repository resolves.
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { referencePages } from '../src/docs/reference'
import { openApiDocument } from '../src/docs/openapi-document'
import { configHelp } from '../src/config'
import { CLI_COMMANDS } from '../src/cli/commands'
import { OPERATIONS, S3_FAMILIES } from '../src/s3/operations'
import { brokenLinks } from './markdown'

const ROOT = path.join(__dirname, '..')
const DOCS = path.join(ROOT, 'src', 'docs')

t.test('the committed reference pages are what `npm run docs` makes of the code', async (t) => {
  const pages = referencePages(await openApiDocument())
  t.same(Object.keys(pages).sort(), ['api.md', 'cli.md', 'configuration.md', 's3-api.md'])
  for (const [name, text] of Object.entries(pages)) {
    const file = path.join(DOCS, name)
    const committed = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''
    t.ok(committed === text, `src/docs/${name} is up to date (if not: run \`npm run docs\` and commit the result)`)
  }
})

t.test('each generated page lists everything its table has', async (t) => {
  const doc = await openApiDocument()
  const pages = referencePages(doc)

  for (const row of configHelp()) t.match(pages['configuration.md'], `| \`${row.env}\` |`, `Configuration has a row for ${row.env}`)

  // The commands main.ts dispatches (but the hidden ones), each in the command table and the page.
  const main = fs.readFileSync(path.join(ROOT, 'src', 'main.ts'), 'utf8')
  const table = /const COMMANDS: .*? = \{\n([\s\S]*?)\n\}/.exec(main)?.[1] ?? ''
  const dispatched = [...table.matchAll(/^ {2}'?([a-z][a-z0-9-]*)'?:/gm)].map((m) => m[1]!)
  t.ok(dispatched.length >= 15, `main.ts dispatches ${dispatched.length} commands`)
  t.same(
    CLI_COMMANDS.map((c) => c.name)
      .filter((n) => n !== 'version')
      .sort(),
    dispatched.sort(),
    'src/cli/commands.ts names every command main.ts runs, and no other',
  )
  for (const c of CLI_COMMANDS) t.match(pages['cli.md'], `### coffer ${c.name}\n`, `Command line has coffer ${c.name}`)

  for (const [p, methods] of Object.entries(doc.paths)) {
    for (const m of Object.keys(methods)) {
      const route = `${m.toUpperCase()} ${p.replace(/\{([^}]+)\}/g, ':$1')}`
      t.match(pages['api.md'], `| \`${route}\` |`, `the API reference lists ${route}`)
    }
  }

  for (const op of new Set(OPERATIONS.map((o) => o.name))) {
    const families = S3_FAMILIES.filter((f) => f.operations.includes(`\`${op}\``)).map((f) => f.family)
    t.equal(families.length, 1, `${op} is in one family (${families.join(', ') || 'none'})`)
    t.match(pages['s3-api.md'], `| \`${op}\` |`, `S3 operations has a row for ${op}`)
  }
})

t.test('every link of the README and of the pages resolves, headings included', async (t) => {
  const pages = fs.readdirSync(DOCS).filter((f) => f.endsWith('.md'))
  t.ok(pages.length >= 15, `${pages.length} pages`)
  const broken = ['README.md', 'scripts/bench/README.md', ...pages.map((p) => `src/docs/${p}`)].flatMap((f) => brokenLinks(ROOT, f))
  t.same(broken, [], 'links that do not resolve')
})

t.test('what users read carries no issue numbers and no test file names', async (t) => {
  const pages = fs.readdirSync(DOCS).filter((f) => f.endsWith('.md') && f !== 'development.md')
  const found: string[] = []
  for (const f of ['README.md', ...pages.map((p) => `src/docs/${p}`)]) {
    fs.readFileSync(path.join(ROOT, f), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        // An issue of this project (#31); another project's (nodejs/node#54232) is a reference.
        const issue = /(?<![\w/-])#\d+\b/.test(line.replace(/\]\([^)]*\)/g, ''))
        const testFile = /\btest\/[\w/.-]+\.ts\b/.test(line)
        if (issue || testFile) found.push(`${f}:${i + 1}: ${line.trim().slice(0, 120)}`)
      })
  }
  t.same(found, [])
})
