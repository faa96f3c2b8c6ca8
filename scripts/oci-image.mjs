// The release's container image: an OCI image layout in one tar archive per CPU, which `docker load`
// and `podman load` take, built from the release's single executable without pulling anything from
// a registry. Its one layer holds, as a FROM scratch image would:
//   /coffer                     the single executable (ENTRYPOINT; CMD serve)
//   its C runtime               the dynamic loader at the path the executable names, and every library
//                               its NEEDED entries and the SQLite addon's reach (glibc, libstdc++,
//                               libgcc_s), in /lib, which the loader searches
//   /etc/passwd, /etc/group     the user coffer (10001), which the image runs as
//   /etc/nsswitch.conf          host names from /etc/hosts first, then DNS
//   /etc/ssl/certs/…            Debian's CA bundle, for NODE_USE_SYSTEM_CA=1 or a replaced bundle
//                               (Node carries its own roots, used by default)
//   /data                       the data dir, a volume owned by coffer
//   /tmp                        1777, where serve --ephemeral makes its data dir
// The archive carries index.json and oci-layout (the OCI image layout, with the name in
// org.opencontainers.image.ref.name and io.containerd.image.name), and a Docker manifest.json
// naming the same blobs, as `docker save` writes, for a Docker that reads only that. Entries are
// sorted, owned by root (but /data), stamped with the commit's time, and gzip has no name or time
// in its header: the same inputs make the same bytes.
//
// `node scripts/oci-image.mjs unpack ARCHIVE DIR` reads such an archive back: it checks every
// descriptor's media type, size and digest and the layer's diff_id, extracts the layer into
// DIR/rootfs (owners kept, so run it as root) and writes the image config to DIR/config.json.
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { createHash } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export const USER_ID = 10001
const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
}
/** Docker's and OCI's names of the release's CPUs, where the release's loader and libraries come from. */
const PLATFORMS = {
  x64: { architecture: 'amd64', libDirs: ['/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu', '/lib64'], sysroot: '/' },
  arm64: { architecture: 'arm64', variant: 'v8', libDirs: ['/usr/aarch64-linux-gnu/lib'], sysroot: '/usr/aarch64-linux-gnu' },
}
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex')
const run = (command, args) => execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })

/** The ELF file's program interpreter (PT_INTERP) and NEEDED sonames, as readelf shows them. */
function elfDeps(file) {
  const interp = /Requesting program interpreter: ([^\]]+)\]/.exec(run('readelf', ['-lW', file]))?.[1]
  const needed = [...run('readelf', ['-dW', file]).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1])
  return { interp, needed }
}

/**
 * The files of the C runtime `elfs` need on `arch`: [path in the image, file here]. The loader goes
 * where the executable asks for it; every library it loads, found through the NEEDED entries of
 * the executable, of the addon and of the libraries themselves, goes into /lib.
 */
export function runtimeFiles(elfs, arch) {
  const p = PLATFORMS[arch]
  const { interp } = elfDeps(elfs[0])
  if (!interp) throw new Error(`${elfs[0]} names no program interpreter: not a dynamically linked executable`)
  const loader = fs.realpathSync(path.join(p.sysroot, interp))
  const files = new Map([[interp, loader]])
  const queue = [...elfs]
  const seen = new Set([path.basename(interp)])
  while (queue.length > 0) {
    for (const soname of elfDeps(queue.shift()).needed) {
      if (seen.has(soname)) continue
      seen.add(soname)
      const dir = p.libDirs.find((d) => fs.existsSync(path.join(d, soname)))
      if (!dir) throw new Error(`${soname}, which the executable needs, is in none of ${p.libDirs.join(', ')}`)
      const file = fs.realpathSync(path.join(dir, soname))
      files.set(`/lib/${soname}`, file)
      queue.push(file)
    }
  }
  return [...files]
}

/** One ustar header: numbers in octal, the checksum over the header with its own field as spaces. */
function tarHeader({ name, mode, uid = 0, gid = 0, size = 0, mtime, type }) {
  if (Buffer.byteLength(name) > 100) throw new Error(`tar: ${name} is longer than 100 bytes`)
  const h = Buffer.alloc(512)
  const octal = (value, offset, width) => h.write(value.toString(8).padStart(width - 1, '0') + '\0', offset, width, 'ascii')
  h.write(name, 0, 100, 'utf8')
  octal(mode, 100, 8)
  octal(uid, 108, 8)
  octal(gid, 116, 8)
  octal(size, 124, 12)
  octal(mtime, 136, 12)
  h.write('        ', 148, 8, 'ascii')
  h.write(type, 156, 1, 'ascii')
  h.write('ustar\0' + '00', 257, 8, 'ascii')
  let sum = 0
  for (const byte of h) sum += byte
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'ascii')
  return h
}

/** A tar archive of `entries` ({name, mode, uid, gid, data} files and {name/, mode, uid, gid} directories), sorted by name. */
export function tar(entries, mtime) {
  const parts = []
  for (const e of [...entries].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const dir = e.name.endsWith('/')
    parts.push(tarHeader({ ...e, mtime, size: dir ? 0 : e.data.length, type: dir ? '5' : '0' }))
    if (!dir) parts.push(e.data, Buffer.alloc((512 - (e.data.length % 512)) % 512))
  }
  parts.push(Buffer.alloc(1024))
  return Buffer.concat(parts)
}

/** The layer's entries: the executable, its C runtime, the user, the data dir and /tmp. */
function layerEntries({ exe, addon, arch }) {
  const entries = new Map()
  const dirsOf = (name) => {
    const parts = name.split('/').slice(0, -1)
    for (let i = 1; i <= parts.length; i++) {
      const dir = `${parts.slice(0, i).join('/')}/`
      if (!entries.has(dir)) entries.set(dir, { name: dir, mode: 0o755 })
    }
  }
  const file = (name, data, mode = 0o644) => {
    dirsOf(name)
    entries.set(name, { name, mode, data: Buffer.from(data) })
  }
  file('coffer', fs.readFileSync(exe), 0o755)
  for (const [inImage, here] of runtimeFiles([exe, addon], arch)) file(inImage.slice(1), fs.readFileSync(here), 0o755)
  file('etc/passwd', `root:x:0:0:root:/root:/sbin/nologin\ncoffer:x:${USER_ID}:${USER_ID}:Coffer:/data:/sbin/nologin\n`)
  file('etc/group', `root:x:0:\ncoffer:x:${USER_ID}:\n`)
  file('etc/nsswitch.conf', 'passwd: files\ngroup: files\nhosts: files dns\n')
  if (!fs.existsSync(CA_BUNDLE)) throw new Error(`no CA bundle at ${CA_BUNDLE}: install Debian's ca-certificates`)
  file(CA_BUNDLE.slice(1), fs.readFileSync(CA_BUNDLE))
  entries.set('data/', { name: 'data/', mode: 0o755, uid: USER_ID, gid: USER_ID })
  entries.set('tmp/', { name: 'tmp/', mode: 0o1777 })
  return [...entries.values()]
}

/** The image's run settings: what `docker run IMAGE` runs, as whom, with which ports, volume and health check. */
export function imageConfig({ version, revision, source }) {
  const labels = {
    'org.opencontainers.image.title': 'Coffer',
    'org.opencontainers.image.description': 'Self-hosted, multi-tenant file storage with an S3-compatible API, in one executable',
    'org.opencontainers.image.version': version,
    'org.opencontainers.image.revision': revision,
    'org.opencontainers.image.licenses': 'MIT',
    ...(source ? { 'org.opencontainers.image.source': source } : {}),
  }
  const seconds = (s) => s * 1e9
  return {
    User: `${USER_ID}:${USER_ID}`,
    ExposedPorts: { '8080/tcp': {}, '9000/tcp': {} },
    // The settings every command reads, so `serve --ephemeral` and `health` agree with `serve`.
    Env: ['PATH=/', 'COFFER_HOST=0.0.0.0', 'COFFER_PORT=8080', 'COFFER_S3_PORT=9000', 'COFFER_DATA_DIR=/data'],
    Entrypoint: ['/coffer'],
    Cmd: ['serve'],
    Volumes: { '/data': {} },
    WorkingDir: '/data',
    Labels: labels,
    StopSignal: 'SIGTERM',
    // Docker's health check, in nanoseconds; no shell in the image, so the executable asks itself.
    Healthcheck: { Test: ['CMD', '/coffer', 'health'], Interval: seconds(30), Timeout: seconds(10), StartPeriod: seconds(30), Retries: 3 },
  }
}

/**
 * Writes the image of `exe` (the release's executable for `arch`, with `addon` its SQLite addon) to
 * `out`, one OCI image layout archive tagged coffer:<version>. Returns the layer's compressed size.
 */
export function writeImage({ exe, addon, arch, version, revision, source, mtime, out }) {
  const p = PLATFORMS[arch]
  if (!p) throw new Error(`no image for ${arch}`)
  const layerTar = tar(layerEntries({ exe, addon, arch }), mtime)
  const layer = zlib.gzipSync(layerTar)
  const created = new Date(mtime * 1000).toISOString()
  const platform = { architecture: p.architecture, os: 'linux', ...(p.variant ? { variant: p.variant } : {}) }
  const config = Buffer.from(
    JSON.stringify({
      created,
      ...platform,
      config: imageConfig({ version, revision, source }),
      rootfs: { type: 'layers', diff_ids: [`sha256:${sha256(layerTar)}`] },
      history: [{ created, created_by: 'npm run release (scripts/release.mjs)' }],
    }),
  )
  const descriptor = (mediaType, buf) => ({ mediaType, digest: `sha256:${sha256(buf)}`, size: buf.length })
  const labels = imageConfig({ version, revision, source }).Labels
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA.manifest,
      config: descriptor(MEDIA.config, config),
      layers: [descriptor(MEDIA.layer, layer)],
      annotations: labels,
    }),
  )
  const name = `coffer:${version}`
  const index = {
    schemaVersion: 2,
    mediaType: MEDIA.index,
    manifests: [
      {
        ...descriptor(MEDIA.manifest, manifest),
        platform,
        annotations: { 'io.containerd.image.name': `docker.io/library/${name}`, 'org.opencontainers.image.ref.name': name },
      },
    ],
  }
  const blob = (buf) => ({ name: `blobs/sha256/${sha256(buf)}`, mode: 0o644, data: buf })
  const docker = [{ Config: `blobs/sha256/${sha256(config)}`, RepoTags: [name], Layers: [`blobs/sha256/${sha256(layer)}`] }]
  const archive = tar(
    [
      { name: 'blobs/', mode: 0o755 },
      { name: 'blobs/sha256/', mode: 0o755 },
      blob(layer),
      blob(config),
      blob(manifest),
      { name: 'index.json', mode: 0o644, data: Buffer.from(JSON.stringify(index)) },
      { name: 'manifest.json', mode: 0o644, data: Buffer.from(JSON.stringify(docker)) },
      { name: 'oci-layout', mode: 0o644, data: Buffer.from(JSON.stringify({ imageLayoutVersion: '1.0.0' })) },
    ],
    mtime,
  )
  const tmp = `${out}.tmp-${process.pid}`
  fs.writeFileSync(tmp, archive)
  fs.renameSync(tmp, out)
  return { layerBytes: layer.length, archiveBytes: archive.length }
}

/** Reads a blob of the unpacked layout, checked against its descriptor. */
function readBlob(dir, desc, mediaType) {
  if (desc.mediaType !== mediaType) throw new Error(`${desc.digest}: media type ${desc.mediaType}, expected ${mediaType}`)
  const [algo, hex] = desc.digest.split(':')
  if (algo !== 'sha256' || !/^[0-9a-f]{64}$/.test(hex)) throw new Error(`not a sha256 digest: ${desc.digest}`)
  const buf = fs.readFileSync(path.join(dir, 'blobs', 'sha256', hex))
  if (buf.length !== desc.size) throw new Error(`${desc.digest}: ${buf.length} bytes, its descriptor says ${desc.size}`)
  if (sha256(buf) !== hex) throw new Error(`${desc.digest}: the blob's digest is sha256:${sha256(buf)}`)
  return buf
}

/** Unpacks an image archive as a runtime would: DIR/layout, DIR/rootfs, DIR/config.json; returns the parsed index, manifest and config. */
export function unpackImage(archive, dir) {
  const layout = path.join(dir, 'layout')
  const rootfs = path.join(dir, 'rootfs')
  fs.mkdirSync(layout, { recursive: true })
  fs.mkdirSync(rootfs, { recursive: true })
  run('tar', ['-xf', archive, '-C', layout])
  const ociLayout = JSON.parse(fs.readFileSync(path.join(layout, 'oci-layout'), 'utf8'))
  if (ociLayout.imageLayoutVersion !== '1.0.0') throw new Error(`oci-layout: ${JSON.stringify(ociLayout)}`)
  const index = JSON.parse(fs.readFileSync(path.join(layout, 'index.json'), 'utf8'))
  if (index.schemaVersion !== 2 || index.mediaType !== MEDIA.index || index.manifests.length !== 1)
    throw new Error('index.json: not an OCI index of one manifest')
  const manifest = JSON.parse(readBlob(layout, index.manifests[0], MEDIA.manifest))
  const config = JSON.parse(readBlob(layout, manifest.config, MEDIA.config))
  manifest.layers.forEach((desc, i) => {
    const layerTar = zlib.gunzipSync(readBlob(layout, desc, MEDIA.layer))
    if (`sha256:${sha256(layerTar)}` !== config.rootfs.diff_ids[i]) throw new Error(`layer ${i}: its diff_id is not the config's`)
    const file = path.join(dir, `layer-${i}.tar`)
    fs.writeFileSync(file, layerTar)
    run('tar', ['-xpf', file, '--numeric-owner', '--same-owner', '-C', rootfs])
    fs.rmSync(file)
  })
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2))
  return { index, manifest, config, rootfs }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [command, archive, dir] = process.argv.slice(2)
  if (command !== 'unpack' || !archive || !dir) {
    console.error('usage: node scripts/oci-image.mjs unpack ARCHIVE DIR')
    process.exit(2)
  }
  const { index } = unpackImage(archive, dir)
  console.log(`${index.manifests[0].annotations['org.opencontainers.image.ref.name']} ${index.manifests[0].platform.architecture}: ${dir}/rootfs`)
}
