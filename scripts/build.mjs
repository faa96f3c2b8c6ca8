// Bundles src/main.ts into dist/coffer.cjs: one CommonJS file, no dynamic requires, with
// better-sqlite3's prebuilt addon copied beside it (loaded through the `nativeBinding` option).
// `--if-stale` skips the work when dist/ is newer than every source file and the lock file.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import { createHash } from 'node:crypto'
import * as esbuild from 'esbuild'
import { buildConsole } from './build-console.mjs'

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const outFile = path.join(root, 'dist', 'coffer.cjs')
export const addonOut = path.join(root, 'dist', 'better_sqlite3.node')
const require = createRequire(import.meta.url)

function newestInput() {
  let newest = 0
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name)
      if (e.isDirectory()) walk(p)
      else newest = Math.max(newest, fs.statSync(p).mtimeMs)
    }
  }
  walk(path.join(root, 'src'))
  for (const f of ['package.json', 'package-lock.json', 'scripts/build.mjs', 'scripts/build-console.mjs', 'README.md']) {
    if (fs.existsSync(path.join(root, f))) newest = Math.max(newest, fs.statSync(path.join(root, f)).mtimeMs)
  }
  return newest
}

export function isFresh() {
  if (!fs.existsSync(outFile) || !fs.existsSync(addonOut)) return false
  return fs.statSync(outFile).mtimeMs >= newestInput()
}

/** better-sqlite3's lib/binding.js finds its addon with computed require() paths; we always pass
 * the loaded addon through `nativeBinding`, so the bundle gets a loader that only accepts that. */
const sqliteBindingPlugin = {
  name: 'better-sqlite3-binding',
  setup(build) {
    build.onResolve({ filter: /^\.\/binding$/ }, (args) =>
      args.importer.includes(`${path.sep}better-sqlite3${path.sep}`) ? { path: 'better-sqlite3-binding', namespace: 'coffer' } : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'coffer' }, () => ({
      contents: `exports.getBinding = function (nativeBinding) {
        if (typeof nativeBinding === 'object' && nativeBinding !== null) return nativeBinding;
        throw new Error('coffer: the bundled better-sqlite3 needs its addon passed as nativeBinding');
      };`,
      loader: 'js',
    }))
  },
}

const DOCS_FILES = JSON.parse(fs.readFileSync(path.join(root, 'src', 'lib', 'docs-files.json'), 'utf8'))
const docsDir = () => path.dirname(require.resolve('swagger-ui-dist/package.json'))

const REFERENCE_PAGES = JSON.parse(fs.readFileSync(path.join(root, 'src', 'lib', 'reference-files.json'), 'utf8'))

/**
 * Swagger UI's files (`docs/<name>`) and the reference pages' Markdown (`reference/<page>`) as
 * assets of a single executable (→ the file), for its SEA config.
 */
export function docsSeaAssets() {
  return {
    ...Object.fromEntries(Object.keys(DOCS_FILES).map((name) => [`docs/${name}`, path.join(docsDir(), name)])),
    ...Object.fromEntries(Object.entries(REFERENCE_PAGES).map(([name, file]) => [`reference/${name}`, path.join(root, file)])),
  }
}

/**
 * src/lib/reference-pages.ts reads the README and src/docs/*.md from the checkout, which neither
 * the bundle nor the single executable has beside it: as for Swagger UI (below), the bundle gets
 * them inlined and the executable reads them from its SEA assets at the first GET /docs/reference.
 */
const referencePagesPlugin = (docs) => ({
  name: 'coffer-reference-pages',
  setup(build) {
    build.onResolve({ filter: /\/reference-pages$/ }, (args) =>
      args.importer.includes(`${path.sep}src${path.sep}`) ? { path: 'reference-pages', namespace: 'coffer-reference' } : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'coffer-reference' }, async () => {
      const entries = Object.entries(REFERENCE_PAGES).map(([name, file]) =>
        docs === 'sea'
          ? `${JSON.stringify(name)}: Buffer.from(require('node:sea').getAsset(${JSON.stringify(`reference/${name}`)})).toString('utf8')`
          : `${JSON.stringify(name)}: ${JSON.stringify(fs.readFileSync(path.join(root, file), 'utf8'))}`,
      )
      return {
        contents: `exports.REFERENCE_PAGES = ${JSON.stringify(REFERENCE_PAGES)};\nexports.loadReferencePages = function () { return { ${entries.join(',\n')} }; };`,
        loader: 'js',
      }
    })
  },
})

/**
 * src/lib/docs-assets.ts reads Swagger UI's files from node_modules, which neither the bundle nor the
 * single executable has. The bundle (`docs: 'inline'`) gets them inlined: text as string literals,
 * binary files as base64. The executable's main script (`docs: 'sea'`) reads them from its SEA
 * assets (docsSeaAssets) at the first GET /docs instead: inlined, they were 1.9 MB of the 5 MB
 * script that every start reads and keeps resident, /docs or not (#28).
 */
const docsAssetsPlugin = (docs) => ({
  name: 'coffer-docs-assets',
  setup(build) {
    build.onResolve({ filter: /\/docs-assets$/ }, (args) =>
      args.importer.includes(`${path.sep}src${path.sep}`) ? { path: 'docs-assets', namespace: 'coffer-docs' } : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'coffer-docs' }, async () => {
      const entries = Object.entries(DOCS_FILES).map(([name, type]) => {
        if (docs === 'sea')
          return `${JSON.stringify(name)}: { type: ${JSON.stringify(type)}, body: Buffer.from(require('node:sea').getAsset(${JSON.stringify(`docs/${name}`)})) }`
        const bytes = fs.readFileSync(path.join(docsDir(), name))
        const text = type.startsWith('text/')
        const literal = JSON.stringify(bytes.toString(text ? 'utf8' : 'base64'))
        return `${JSON.stringify(name)}: { type: ${JSON.stringify(type)}, body: Buffer.from(${literal}, ${text ? "'utf8'" : "'base64'"}) }`
      })
      return { contents: `exports.loadDocsAssets = function () { return { ${entries.join(',\n')} }; };`, loader: 'js' }
    })
  },
})

/**
 * Modules a dependency requires at load time but uses only in a feature Coffer leaves off, loaded
 * on first use instead. prom-client requires @opentelemetry/api to read the active span for
 * exemplars, which Coffer does not enable: evaluating it was the largest single module evaluation
 * at start-up (20 ms in a bundle instrumented per module, on a machine at load 4; #15).
 * The importer gets a proxy that requires the real module the first time it reads a property.
 */
const LAZY = [
  { module: '@opentelemetry/api', importer: `${path.sep}prom-client${path.sep}` },
  // An idle CI fixture (#28) never generates the OpenAPI document: its YAML form, and the $ref
  // resolver (with debug, supports-color and tty) wait for the first GET /openapi.json.
  { module: 'yaml', importer: `${path.sep}@fastify${path.sep}swagger${path.sep}` },
  { module: 'json-schema-resolver', importer: `${path.sep}@fastify${path.sep}swagger${path.sep}`, callable: true },
  // Fastify requires the HTTP/2 and HTTPS modules (with TLS) for servers Coffer never makes.
  { module: 'node:http2', importer: `${path.sep}fastify${path.sep}lib${path.sep}server.js` },
  { module: 'node:https', importer: `${path.sep}fastify${path.sep}lib${path.sep}server.js` },
  // prom-client's push gateway client (HTTPS, zlib), which Coffer never uses.
  { module: './lib/pushgateway', importer: `${path.sep}prom-client${path.sep}index.js` },
]
const lazyRequirePlugin = {
  name: 'coffer-lazy-require',
  setup(build) {
    for (const { module, importer, callable } of LAZY) {
      const filter = new RegExp(`^${module.replace(/[/.]/g, '\\$&')}$`)
      build.onResolve({ filter }, (args) =>
        args.namespace === 'file' && args.importer.includes(importer)
          ? { path: `${module}${callable ? '#callable' : ''}`, namespace: 'coffer-lazy', pluginData: args.resolveDir }
          : undefined,
      )
    }
    build.onLoad({ filter: /.*/, namespace: 'coffer-lazy' }, (args) => {
      const [module, callable] = args.path.split('#')
      // A module that is itself a function (called, or constructed) gets a function as the target.
      const target = callable ? 'function () {}' : '{}'
      const calls = callable ? ', apply: (_, self, args) => Reflect.apply(load(), self, args), construct: (_, args) => Reflect.construct(load(), args)' : ''
      return {
        contents: `let real;
          const load = () => (real ??= require(${JSON.stringify(module)}));
          module.exports = new Proxy(${target}, { get: (_, key) => load()[key], has: (_, key) => key in load()${calls} });`,
        // The real module resolves from where its importer would have found it.
        resolveDir: args.pluginData,
        loader: 'js',
      }
    })
  },
}

/**
 * pino's factory asks util.getCallSites() for its callers on every pino() call, only to resolve
 * the relative paths of transport targets. Coffer uses no transports (they cannot be bundled), and
 * resolving those call sites made V8 compute the line ends of the whole bundle at every start
 * (~36M instructions, 4% of the executable's start-up under callgrind). The bundle's pino gets
 * a caller list that is always empty, which pino reads as "no caller known".
 */
const pinoNoCallersPlugin = {
  name: 'coffer-pino-no-callers',
  setup(build) {
    build.onResolve({ filter: /^\.\/(lib\/)?caller$/ }, (args) =>
      args.importer.includes(`${path.sep}pino${path.sep}`) ? { path: 'pino-caller', namespace: 'coffer-pino' } : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'coffer-pino' }, () => ({ contents: 'module.exports = function getCallers() { return []; };', loader: 'js' }))
  },
}

/** The SEA asset that holds the PostgreSQL bridge's worker in a single executable (src/db/pg/worker-source.ts). */
export const PG_WORKER_ASSET = 'pg-worker.cjs'

/**
 * pg's optional native client (libpq through pg-native), which Coffer never selects: its require
 * sits in a try/catch, so esbuild leaves it to run time, where the bundle would look for pg-native
 * in node_modules on disk. It is a module that is not there instead, as when pg-native is not installed.
 */
const pgNativePlugin = {
  name: 'coffer-pg-native',
  setup(build) {
    build.onResolve({ filter: /^pg-native$/ }, () => ({ path: 'pg-native', namespace: 'coffer-pg-native' }))
    build.onLoad({ filter: /.*/, namespace: 'coffer-pg-native' }, () => ({
      contents: "throw Object.assign(new Error('coffer: pg-native is not bundled'), { code: 'MODULE_NOT_FOUND' });",
      loader: 'js',
    }))
  },
}

/**
 * What the main script and the PostgreSQL worker are both bundled as: one CommonJS file for Node 24.
 * No comments or indentation: comments carried non-ASCII characters (→, —, §), which made V8 hold
 * the whole 6 MB source as a two-byte string, decode it and compute its line ends at every start.
 * Stack traces name functions as before; their line numbers were bundle lines already (there is no
 * source map).
 */
const NODE_BUNDLE = {
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'cjs',
  minifySyntax: true,
  minifyWhitespace: true,
  legalComments: 'none',
  sourcemap: false,
}

/**
 * The PostgreSQL bridge's worker thread (src/db/pg/worker.ts, #30) as a bundle of its own, pg and
 * its dependencies inlined (about 120 KiB): the thread runs it, the main script never evaluates it.
 */
async function buildPgWorker() {
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'src', 'db', 'pg', 'worker.ts')],
    outfile: PG_WORKER_ASSET,
    write: false,
    ...NODE_BUNDLE,
    plugins: [pgNativePlugin],
    logLevel: 'warning',
    metafile: true,
  })
  return { code: result.outputFiles[0].text, metafile: result.metafile }
}

/**
 * src/db/pg/worker-source.ts starts the worker from its module file, which neither the bundle nor
 * the single executable has (a SEA's main script cannot load files from disk, and `pg` is in
 * node_modules). The bundle gets the worker's code as one string literal, started with
 * `new Worker(code, { eval: true })`; a SEA's main script (`asset: true`) reads it from its
 * `pg-worker.cjs` asset, as Swagger UI, so that the script every start parses does not grow. V8
 * only scans a string literal, and nothing of it runs until the first PostgreSQL connection.
 */
const pgWorkerPlugin = ({ code, asset }) => ({
  name: 'coffer-pg-worker',
  setup(build) {
    build.onResolve({ filter: /\/worker-source$/ }, (args) =>
      args.importer.includes(`${path.sep}src${path.sep}db${path.sep}pg${path.sep}`) ? { path: 'pg-worker-source', namespace: 'coffer-pg-worker' } : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'coffer-pg-worker' }, () => ({
      contents: asset
        ? `exports.pgWorkerSource = function () { return { code: require('node:sea').getAsset(${JSON.stringify(PG_WORKER_ASSET)}, 'utf8') }; };`
        : `exports.pgWorkerSource = function () { return { code: ${JSON.stringify(code)} }; };`,
      loader: 'js',
    }))
  },
})

/**
 * The checkpointer's thread (src/db/checkpoint-worker.ts, #29) as a bundle of its own: better-sqlite3's
 * JavaScript inlined, its addon loaded by path (the one the main thread loaded, passed in workerData).
 * A few KiB, so both the bundle and the single executable carry it as a string literal, started with
 * `new Worker(code, { eval: true })`: no SEA asset, and nothing of it runs before the server listens.
 */
async function buildCheckpointWorker() {
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'src', 'db', 'checkpoint-worker.ts')],
    outfile: 'checkpoint-worker.cjs',
    write: false,
    ...NODE_BUNDLE,
    plugins: [sqliteBindingPlugin],
    logLevel: 'warning',
    metafile: true,
  })
  return { code: result.outputFiles[0].text, metafile: result.metafile }
}

const checkpointWorkerPlugin = ({ code }) => ({
  name: 'coffer-checkpoint-worker',
  setup(build) {
    build.onResolve({ filter: /\/checkpoint-worker-source$/ }, (args) =>
      args.importer.includes(`${path.sep}src${path.sep}db${path.sep}`)
        ? { path: 'checkpoint-worker-source', namespace: 'coffer-checkpoint-worker' }
        : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'coffer-checkpoint-worker' }, () => ({
      contents: `exports.checkpointWorkerSource = function () { return { code: ${JSON.stringify(code)} }; };`,
      loader: 'js',
    }))
  },
})

/**
 * The schema image (src/db/schema-image.ts, #28), packed and in base64: every migration run once
 * here into an in-memory database, whose file a new data dir then starts from instead of running
 * them all at each start. src/db/schema-image.ts is bundled on its own and run by this Node with
 * node_modules' better-sqlite3 (the file format is the same on every CPU, so the arm64 release's
 * image is made here too).
 */
async function buildSchemaImage() {
  const tmp = path.join(root, 'dist', `.schema-image-${process.pid}.cjs`)
  await esbuild.build({
    entryPoints: [path.join(root, 'src', 'db', 'schema-image.ts')],
    outfile: tmp,
    ...NODE_BUNDLE,
    external: ['better-sqlite3'],
    logLevel: 'warning',
  })
  try {
    const { buildSchemaImage, packImage } = require(tmp)
    return packImage(buildSchemaImage()).toString('base64')
  } finally {
    fs.rmSync(tmp, { force: true })
  }
}

/** Temp file + rename: a reader sees the old file or the new one, never a mix. */
function replaceAtomically(file, bytes, mode = 0o644) {
  const tmp = `${file}.${process.pid}.tmp`
  fs.writeFileSync(tmp, bytes, { mode })
  fs.chmodSync(tmp, mode)
  fs.renameSync(tmp, file)
}

/**
 * Writes the bundle `out` and the SQLite addon `addonDest` for Linux on `arch` (another CPU than this
 * one for the release's linux-arm64 executable, #28: better-sqlite3 ships each platform's prebuilt
 * addon in its npm package, and the bundle names the one it embeds by its digest). `docs: 'sea'`
 * makes the main script of a single executable, which carries Swagger UI as assets (docsSeaAssets);
 * `pgWorkerAsset`, a path, makes it read the PostgreSQL bridge's worker from its `pg-worker.cjs`
 * asset (written there) instead of holding it inline.
 */
export async function build({ arch = process.arch, out = outFile, addonDest = addonOut, docs = 'inline', pgWorkerAsset } = {}) {
  const prebuild = path.join(path.dirname(require.resolve('better-sqlite3/package.json')), 'prebuilds', `${process.platform}-${arch}.node`)
  const addon = fs.readFileSync(prebuild)
  // The name the single executable unpacks its SQLite addon under, known at build time so that a
  // start need not hash the 2.2 MB asset (src/db/sqlite-addon.ts).
  const addonDigest = createHash('sha256').update(addon).digest('hex').slice(0, 16)
  fs.mkdirSync(path.dirname(out), { recursive: true })
  const pgWorker = await buildPgWorker()
  const checkpointWorker = await buildCheckpointWorker()
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'src', 'main.ts')],
    outfile: out,
    // Written by hand below: test files build concurrently, and none may read half a bundle.
    write: false,
    ...NODE_BUNDLE,
    // The web console rides inside the bundle as one constant (src/http/routes/console.ts).
    define: {
      __COFFER_BUNDLE__: 'true',
      __COFFER_ADDON_DIGEST__: JSON.stringify(addonDigest),
      __COFFER_CONSOLE__: JSON.stringify(await buildConsole()),
      __COFFER_SCHEMA_IMAGE__: JSON.stringify(await buildSchemaImage()),
    },
    // package.json's bin points here: executable, run by the node on the PATH (#13).
    banner: { js: '#!/usr/bin/env node' },
    plugins: [
      sqliteBindingPlugin,
      docsAssetsPlugin(docs),
      referencePagesPlugin(docs),
      lazyRequirePlugin,
      pinoNoCallersPlugin,
      pgWorkerPlugin({ code: pgWorker.code, asset: pgWorkerAsset !== undefined }),
      checkpointWorkerPlugin({ code: checkpointWorker.code }),
    ],
    logLevel: 'warning',
    metafile: true,
  })
  // The worker's packages are shipped too (the release's third-party notices read these inputs).
  Object.assign(result.metafile.inputs, pgWorker.metafile.inputs, checkpointWorker.metafile.inputs)
  if (pgWorkerAsset !== undefined) replaceAtomically(pgWorkerAsset, pgWorker.code)
  replaceAtomically(addonDest, addon)
  replaceAtomically(out, result.outputFiles.find((f) => f.path === out).contents, 0o755)
  const size = fs.statSync(out).size
  console.error(`built ${path.relative(root, out)} (${(size / 1024).toFixed(0)} KiB) and ${path.relative(root, addonDest)}`)
  return result
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--if-stale') && isFresh()) process.exit(0)
  await build()
}
