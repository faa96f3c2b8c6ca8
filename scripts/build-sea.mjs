// Builds dist/coffer: a Node single executable application (Node 24 inside) that needs nothing
// beside it, not even node_modules (https://nodejs.org/api/single-executable-applications.html).
//   1. the esbuild bundle dist/coffer.cjs is the SEA main script: in a SEA, require() only
//      reaches built-in modules, and the bundle has every other module inlined;
//   2. better-sqlite3's addon is a SEA asset, unpacked at run time (src/db/sqlite-addon.ts), and so
//      is the PostgreSQL bridge's worker thread, a bundle of its own read at the first connection;
//   3. a copy of this Node binary is stripped of its symbols (~18 MB smaller), checked to still run,
//      and the preparation blob is injected into it with postject;
//   4. the result must answer `coffer version` from an empty directory before it replaces dist/coffer.
// `--if-stale` skips the work when dist/coffer is newer than the bundle, the addon, this script
// and the Node binary.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import postject from 'postject'
import { addonOut, build, docsSeaAssets, isFresh as bundleIsFresh, outFile as bundleFile, PG_WORKER_ASSET, root } from './build.mjs'

/** The fuse postject flips so Node looks for an injected blob (Node's documented sentinel). */
const SENTINEL_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'
export const seaFile = path.join(root, 'dist', 'coffer')
const thisFile = fileURLToPath(import.meta.url)

function seaIsFresh() {
  if (!fs.existsSync(seaFile) || !bundleIsFresh()) return false
  const inputs = [bundleFile, addonOut, thisFile, process.execPath].map((f) => fs.statSync(f).mtimeMs)
  return fs.statSync(seaFile).mtimeMs >= Math.max(...inputs)
}

function run(command, args, opts = {}) {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts })
}

/**
 * Runs `fn` without LIEF's "Can't find string offset for section name '.note…'" warnings (#13).
 * LIEF, the ELF library inside postject, prints one for each note segment of the Node binary
 * whose section name it cannot find once strip has rewritten the section names: the notes are
 * copied unchanged and the executable is unaffected (it is run below before it is kept). Every
 * other line still reaches stderr.
 */
async function quietLief(fn) {
  const write = process.stderr.write
  process.stderr.write = function (chunk, ...rest) {
    const text = String(chunk)
    if (/^warning: Can't find string offset for section name '\.note[^']*'\n?$/.test(text)) return true
    return write.call(process.stderr, chunk, ...rest)
  }
  try {
    return await fn()
  } finally {
    process.stderr.write = write
  }
}

export async function buildSea() {
  const major = Number(process.versions.node.split('.')[0])
  if (major !== 24) throw new Error(`the executable embeds the Node running this script, which is ${process.version}: run it with Node 24 (npm run build:sea)`)
  await build()
  // The executable's main script is the same bundle but for Swagger UI, which it carries as assets.
  const main = path.join(path.dirname(seaFile), `.sea-main-${process.pid}.cjs`)
  const pgWorker = path.join(path.dirname(seaFile), `.sea-pg-worker-${process.pid}.cjs`)
  try {
    await build({ out: main, docs: 'sea', pgWorkerAsset: pgWorker })
    await makeExecutable({ node: process.execPath, bundle: main, addon: addonOut, pgWorker, out: seaFile })
  } finally {
    fs.rmSync(main, { force: true })
    fs.rmSync(pgWorker, { force: true })
  }
  const size = fs.statSync(seaFile).size
  console.error(`built ${path.relative(root, seaFile)} (${(size / 1024 / 1024).toFixed(1)} MiB, Node ${process.version})`)
}

/**
 * Makes the single executable `out` from a bundle built with `docs: 'sea'` and `pgWorkerAsset: pgWorker`, its SQLite addon,
 * the PostgreSQL bridge's worker that build wrote to `pgWorker`, and a Node binary. For another
 * CPU than this one (the release's linux-arm64 executable, #28), `emulator` is the command that runs
 * that CPU's programs here (qemu-user) and `strip` that CPU's strip: the preparation blob is made by
 * the target Node itself, so V8's code cache in it is the target's own (Node's documentation: a
 * code cache made by another platform's Node is not usable), and every check below runs the result.
 */
export async function makeExecutable({ node, bundle, addon, pgWorker, out, strip = 'strip', emulator = [] }) {
  if (!pgWorker || !fs.existsSync(pgWorker)) throw new Error(`makeExecutable: no PostgreSQL worker bundle at ${pgWorker} (build it with pgWorkerAsset)`)
  // Beside the output, so that the final rename stays on one filesystem.
  const work = fs.mkdtempSync(path.join(path.dirname(out), '.sea-'))
  const runTarget = (exe, args, opts) => (emulator.length ? run(emulator[0], [...emulator.slice(1), exe, ...args], opts) : run(exe, args, opts))
  try {
    const blob = path.join(work, 'sea-prep.blob')
    const config = path.join(work, 'sea-config.json')
    fs.writeFileSync(
      config,
      JSON.stringify({
        main: bundle,
        output: blob,
        disableExperimentalSEAWarning: true,
        // V8's compiled code for the bundle rides along: 80 ms less CPU per start (user+sys of
        // `coffer version` 0.22 → 0.14 s, until listening 0.48 → 0.41 s; medians of 7-9 starts).
        useCodeCache: true,
        // Swagger UI beside the script, not in it: read at the first GET /docs (scripts/build.mjs);
        // the PostgreSQL bridge's worker, read when the bridge starts its thread (#30).
        assets: { 'better_sqlite3.node': addon, [PG_WORKER_ASSET]: pgWorker, ...docsSeaAssets() },
      }),
    )
    runTarget(node, ['--experimental-sea-config', config])

    const exe = path.join(work, 'coffer')
    fs.copyFileSync(node, exe)
    fs.chmodSync(exe, 0o755)
    try {
      run(strip, ['--strip-all', exe])
    } catch (err) {
      throw new Error(`${strip} failed (it comes with binutils): ${err.stderr || err.message}`, { cause: err })
    }
    // Addons resolve N-API from the dynamic symbol table, which strip keeps; make sure it runs.
    const expectedNode = runTarget(node, ['-p', 'process.versions.node']).trim()
    const probe = runTarget(exe, ['-p', 'process.versions.node'])
    if (probe.trim() !== expectedNode) throw new Error(`the stripped node does not run: ${probe}`)
    await quietLief(() => postject.inject(exe, 'NODE_SEA_BLOB', fs.readFileSync(blob), { sentinelFuse: SENTINEL_FUSE }))

    const version = runTarget(exe, ['version'], { cwd: os.tmpdir(), env: { PATH: '/usr/bin:/bin' } }).trim()
    const expected = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version
    if (version !== expected) throw new Error(`${path.basename(out)} answered ${JSON.stringify(version)} to version, expected ${expected}`)
    // Renamed into place: a running executable keeps its inode, and no reader sees half a file.
    fs.renameSync(exe, out)
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
}

if (process.argv[1] === thisFile) {
  if (process.argv.includes('--if-stale') && seaIsFresh()) process.exit(0)
  await buildSea()
}
