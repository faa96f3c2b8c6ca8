// `npm run bench`: builds what is measured (dist/coffer.cjs, and dist/coffer when the project has
// a build:sea script), bundles the TypeScript bench into dist/bench/ with esbuild, and runs it.
// Arguments are passed on: `npm run bench -- --quick`, `npm run bench -- --only listing`.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import * as esbuild from 'esbuild'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const outdir = path.join(root, 'dist', 'bench')

if (Number(process.versions.node.split('.')[0]) < 24) {
  console.error(`the bench needs Node 24; run it as npm run bench (this is ${process.version})`)
  process.exit(1)
}

const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' })
  return r.status === 0
}

if (!run(process.execPath, [path.join(root, 'scripts', 'build.mjs'), '--if-stale'])) process.exit(1)

// The single executable is the shipped artefact: rebuild it when the project can and it is stale.
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const sea = path.join(root, 'dist', 'coffer')
const bundle = path.join(root, 'dist', 'coffer.cjs')
if (pkg.scripts?.['build:sea'] && (!fs.existsSync(sea) || fs.statSync(sea).mtimeMs < fs.statSync(bundle).mtimeMs)) {
  console.error('building dist/coffer (npm run build:sea)…')
  if (!run('npm', ['run', '--silent', 'build:sea'])) console.error('npm run build:sea failed: the cold-start row measures the bundle')
}

await esbuild.build({
  entryPoints: ['main', 'seed', 'bare-fastify', 'bare-fastify-put', 'node-reference', 'put-cpu', 'browse', 'head-client'].map((n) =>
    path.join(root, 'scripts', 'bench', `${n}.ts`),
  ),
  outdir,
  outExtension: { '.js': '.cjs' },
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'cjs',
  // Dependencies load from node_modules as they are: better-sqlite3 finds its own addon.
  packages: 'external',
  logLevel: 'warning',
})

// `npm run bench -- put-cpu BUNDLE…` runs the small-PutObject CPU harness (put-cpu.ts) instead,
// `npm run bench -- browse [KEYS]` the bucket browser's pages in a bucket of a million keys (browse.ts).
const tool = ['put-cpu', 'browse'].includes(process.argv[2]) ? process.argv.splice(2, 1)[0] : 'main'
await import(pathToFileURL(path.join(outdir, `${tool}.cjs`)).href)
