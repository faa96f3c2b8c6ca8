// @suites: sqlite
// No import cycles under src/ (#11). ESLint's import plugins either do not support ESLint 10 or
// pull platform binaries the registry here does not serve (npm ci then fails), so the check is
// this test: TypeScript's own parser reads every import and export-from, type-only ones included.
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import ts from 'typescript'

const SRC = path.resolve(__dirname, '..', 'src')

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name)
    if (e.isDirectory()) return sourceFiles(full)
    return e.name.endsWith('.ts') ? [full] : []
  })
}

/** The project files a module imports (relative specifiers resolved as the bundler does). */
function importsOf(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
  const found: string[] = []
  source.forEachChild((node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const spec = node.moduleSpecifier.text
      if (!spec.startsWith('.')) return
      const base = path.resolve(path.dirname(file), spec)
      const target = [base, `${base}.ts`, path.join(base, 'index.ts')].find((c) => c.endsWith('.ts') && fs.existsSync(c))
      if (target) found.push(target)
    }
  })
  return found
}

/** One cycle in the graph as a path that starts and ends at the same module, or undefined. */
function findCycle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>()
  const stack: string[] = []
  const visit = (node: string): string[] | undefined => {
    state.set(node, 'open')
    stack.push(node)
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'open') return [...stack.slice(stack.indexOf(next)), next]
      if (!state.has(next)) {
        const cycle = visit(next)
        if (cycle) return cycle
      }
    }
    stack.pop()
    state.set(node, 'done')
    return undefined
  }
  for (const node of graph.keys()) {
    if (state.has(node)) continue
    const cycle = visit(node)
    if (cycle) return cycle
  }
  return undefined
}

t.test('the checker finds a cycle when there is one', async (t) => {
  const a = new Map([
    ['a', ['b']],
    ['b', ['c']],
    ['c', ['a']],
  ])
  t.same(findCycle(a), ['a', 'b', 'c', 'a'])
  t.equal(
    findCycle(
      new Map([
        ['a', ['b']],
        ['b', []],
      ]),
    ),
    undefined,
  )
})

t.test('no module under src/ imports itself through others', async (t) => {
  const files = sourceFiles(SRC)
  t.ok(files.length > 50, `read ${files.length} modules`)
  const graph = new Map(files.map((f) => [f, importsOf(f)]))
  t.ok(
    [...graph.values()].some((deps) => deps.length > 0),
    'imports were resolved',
  )
  const cycle = findCycle(graph)
  t.equal(cycle?.map((f) => path.relative(SRC, f)).join(' -> '), undefined, 'no import cycle')
})
