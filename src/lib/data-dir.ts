import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { copyDurable, fsyncDir, publishFileSync } from './durable'

/** The paths inside a data dir (contract: Operations). */
export interface DataDir {
  root: string
  db: string
  blobs: string
  tmp: string
  secret: string
  /** Disk space held for deletes on a full disk (lib/disk-reserve.ts); never backed up. */
  reserve: string
}

export function dataDirPaths(root: string): DataDir {
  return {
    root,
    db: path.join(root, 'coffer.db'),
    blobs: path.join(root, 'blobs', 'sha256'),
    tmp: path.join(root, 'tmp'),
    secret: path.join(root, 'secret'),
    reserve: path.join(root, 'reserve'),
  }
}

/** Creates the layout if missing. */
export function ensureDataDir(root: string): DataDir {
  const d = dataDirPaths(root)
  fs.mkdirSync(d.blobs, { recursive: true, mode: 0o700 })
  fs.mkdirSync(d.tmp, { recursive: true, mode: 0o700 })
  return d
}

/**
 * A server's temp files in tmp/ are named `<node id>.<name>` (#30): several servers share a data
 * dir path (nodes on PostgreSQL, `--workers N` on SQLite), and each removes only what a server
 * that is gone left there (services/node-tmp.ts). A node id is 12 hex digits.
 */
const NODE_ENTRY = /^([0-9a-f]{12})\./

/** A new node id, for the names of a server's temp files (`<id>.upload-…`). */
export function newNodeId(): string {
  return randomBytes(6).toString('hex')
}

/** One entry of tmp/ as sweepTmp shows it: the node that made it (none: a CLI command's, or an older Coffer's), and its age. */
export interface TmpEntry {
  node: string | undefined
  mtimeMs: number
}

/**
 * Removes the entries of tmp/ that `gone` says nobody will finish: partial uploads and unlinks
 * of a process that died. Returns how many it removed.
 */
export function sweepTmp(d: DataDir, gone: (entry: TmpEntry) => boolean): number {
  let removed = 0
  for (const name of fs.readdirSync(d.tmp)) {
    const file = path.join(d.tmp, name)
    const st = fs.statSync(file, { throwIfNoEntry: false })
    if (!st || !gone({ node: name.match(NODE_ENTRY)?.[1], mtimeMs: st.mtimeMs })) continue
    fs.rmSync(file, { recursive: true, force: true })
    removed++
  }
  return removed
}

/**
 * The server secret: `COFFER_SECRET` when configured, else 32 random bytes generated once into
 * `<data-dir>/secret` (mode 0600), published exclusively (lib/durable.ts): the name `secret` only
 * ever points at a complete file, a racing process never reads it half-written, and a crash
 * mid-write never leaves a damaged secret behind.
 */
export function loadSecret(d: DataDir, configured: string | undefined): Buffer {
  if (configured !== undefined) return Buffer.from(configured, 'utf8')
  if (!fs.existsSync(d.secret)) publishFileSync(d.secret, randomBytes(32).toString('hex'), { mode: 0o600, exclusive: true })
  const text = fs.readFileSync(d.secret, 'utf8').trim()
  if (!/^[0-9a-f]{64}$/.test(text)) throw new Error(`${d.secret} is damaged: expected 64 hex characters`)
  return Buffer.from(text, 'hex')
}

/** True when the data dir accepts a write (readiness): a probe file in tmp/, written and removed. */
export function probeWritable(d: DataDir): void {
  const probe = path.join(d.tmp, `ready-${process.pid}-${randomBytes(4).toString('hex')}`)
  fs.writeFileSync(probe, 'ok')
  fs.unlinkSync(probe)
}

/** A new private directory (parents included) for work in progress. */
export function makeWorkDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
}

/** Removes a directory tree, if it exists. */
export function discardDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true })
}

/** Copies the server secret (when the data dir has one) into another data dir, durably. */
export function copySecret(from: DataDir, to: DataDir): void {
  if (fs.existsSync(from.secret)) copyDurable(from.secret, to.secret, 0o600)
}

/** Publishes a finished directory under its final name: fsync it, rename it, fsync the parent. */
export function publishWorkDir(work: string, dest: string): void {
  fsyncDir(work)
  fs.renameSync(work, dest)
  fsyncDir(path.dirname(dest))
}

/** The size of the file system holding `dir` and what an unprivileged process may still write there (statfs f_bavail). */
export function diskSpace(dir: string): { totalBytes: number; freeBytes: number } {
  const s = fs.statfsSync(dir)
  return { totalBytes: s.blocks * s.bsize, freeBytes: s.bavail * s.bsize }
}
