import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'

/** The paths inside a data dir (contract: Operations). */
export interface DataDir {
  root: string
  db: string
  blobs: string
  tmp: string
  secret: string
}

export function dataDirPaths(root: string): DataDir {
  return {
    root,
    db: path.join(root, 'coffer.db'),
    blobs: path.join(root, 'blobs', 'sha256'),
    tmp: path.join(root, 'tmp'),
    secret: path.join(root, 'secret'),
  }
}

/** Creates the layout if missing. */
export function ensureDataDir(root: string): DataDir {
  const d = dataDirPaths(root)
  fs.mkdirSync(d.blobs, { recursive: true, mode: 0o700 })
  fs.mkdirSync(d.tmp, { recursive: true, mode: 0o700 })
  return d
}

/** Removes everything in tmp/: partial uploads of a process that died. Only `serve` may call this. */
export function emptyTmp(d: DataDir): number {
  let removed = 0
  for (const name of fs.readdirSync(d.tmp)) {
    fs.rmSync(path.join(d.tmp, name), { recursive: true, force: true })
    removed++
  }
  return removed
}

/**
 * The server secret: `COFFER_SECRET` when configured, else 32 random bytes generated once into
 * `<data-dir>/secret` (mode 0600). The secret is written and synced under a temporary name, then
 * published with link(2), which fails with EEXIST when another process got there first: the name
 * `secret` only ever points at a complete file, so a racing process never reads it half-written
 * and a crash mid-write never leaves a damaged secret behind (only a stray temporary file).
 */
export function loadSecret(d: DataDir, configured: string | undefined): Buffer {
  if (configured !== undefined) return Buffer.from(configured, 'utf8')
  if (!fs.existsSync(d.secret)) {
    const tmp = `${d.secret}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
    const fd = fs.openSync(tmp, 'wx', 0o600)
    try {
      try {
        fs.writeSync(fd, randomBytes(32).toString('hex'))
        fs.fsyncSync(fd)
      } finally {
        fs.closeSync(fd)
      }
      try {
        fs.linkSync(tmp, d.secret)
        fsyncDir(d.root)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      }
    } finally {
      fs.rmSync(tmp, { force: true })
    }
  }
  const text = fs.readFileSync(d.secret, 'utf8').trim()
  if (!/^[0-9a-f]{64}$/.test(text)) throw new Error(`${d.secret} is damaged: expected 64 hex characters`)
  return Buffer.from(text, 'hex')
}

/** fsync a directory so that a rename or create inside it survives a crash. */
export function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r')
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}
