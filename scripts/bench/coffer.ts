/** Coffer under test: the real server as shipped, on a temp data dir, and a client for its API. */
import fs from 'node:fs'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { freePort, startProc, type Proc } from './processes'
import { json, request } from './http'

export const ROOT = path.resolve(__dirname, '..', '..')
export const BUNDLE = path.join(ROOT, 'dist', 'coffer.cjs')
export const EXECUTABLE = path.join(ROOT, 'dist', 'coffer')

export interface CofferCommand {
  /** What is measured, as printed: `dist/coffer` or `node dist/coffer.cjs`. */
  label: string
  command: string
  args: string[]
}

/** `node dist/coffer.cjs`, built by `npm run build`. */
export const bundleCommand = (): CofferCommand => ({ label: 'node dist/coffer.cjs', command: process.execPath, args: [BUNDLE] })

/**
 * The single executable when it exists and is at least as new as the bundle (a stale one would
 * measure old code); otherwise the bundle, with the reason.
 */
export function shippedCommand(): CofferCommand & { note: string } {
  if (!fs.existsSync(EXECUTABLE)) return { ...bundleCommand(), note: 'dist/coffer does not exist (npm run build:sea makes it): measured the bundle' }
  if (fs.statSync(EXECUTABLE).mtimeMs < fs.statSync(BUNDLE).mtimeMs) {
    return { ...bundleCommand(), note: 'dist/coffer is older than dist/coffer.cjs (rebuild it with npm run build:sea): measured the bundle' }
  }
  return { label: 'dist/coffer', command: EXECUTABLE, args: [], note: 'measured the single executable dist/coffer' }
}

export interface Coffer extends Proc {
  startMs: number
  logFile: string
  /** The S3 listener (on a free port: never the default 9000, which another process may hold). */
  s3Url: string
}

let profileDir: string | undefined

/** From now on every Coffer process writes a V8 CPU profile (`--cpu-prof`) into `dir` when it exits. */
export function profileInto(dir: string): void {
  fs.mkdirSync(dir, { recursive: true })
  profileDir = dir
}

/** `coffer serve` on `dataDir` with the default configuration (log level info, to a file). */
export async function startCoffer(dataDir: string, cmd: CofferCommand = bundleCommand(), extraEnv: Record<string, string> = {}): Promise<Coffer> {
  const port = await freePort()
  const s3Port = await freePort()
  // One process unless a figure asks for more (#29: the workers figure): the other figures compare
  // one Coffer process with one nginx worker, and the default (one worker per core) would not.
  const base = { COFFER_WORKERS: '1', ...extraEnv }
  const env = profileDir ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profileDir}`, ...base } : base
  const logFile = path.join(path.dirname(dataDir), `${path.basename(dataDir)}.log`)
  const proc = await startProc(cmd.command, [...cmd.args, 'serve', '--port', String(port), '--s3-port', String(s3Port), '--data-dir', dataDir], {
    port,
    healthPath: '/health',
    logFile,
    env,
  })
  return { ...proc, logFile, s3Url: `http://127.0.0.1:${s3Port}` }
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

/** `size` random bytes that start like a PNG, so Coffer's content sniffing accepts them. */
export function pngBytes(size: number): Buffer {
  const b = randomBytes(size)
  PNG_SIGNATURE.copy(b, 0)
  return b
}

let copies = 0

/** A copy of `template` made unique after the signature: Coffer stores identical content once. */
export function uniqueCopy(template: Buffer): Buffer {
  const b = Buffer.from(template)
  b.writeDoubleBE(++copies, 8)
  b.writeDoubleBE(Date.now(), 16)
  return b
}

export interface HandshakeAnswer {
  fileId: string
  presignedUrl: string
}

export const auth = (apiKey: string) => ({ authorization: `Bearer ${apiKey}` })

export function handshakeBody(size: number, name = 'bench.png'): Buffer {
  return Buffer.from(JSON.stringify({ fileType: 'image/png', fileName: name, fileSizeBytes: size }))
}

export async function handshake(base: string, apiKey: string, size: number): Promise<HandshakeAnswer> {
  return json<HandshakeAnswer>(`${base}/api/v1/upload/request`, {
    method: 'POST',
    headers: { ...auth(apiKey), 'content-type': 'application/json' },
    body: handshakeBody(size),
  })
}

/** Handshake, then the PUT; returns the file id and the PUT's wall time. */
export async function upload(base: string, apiKey: string, bytes: Buffer): Promise<{ fileId: string; putMs: number }> {
  const hs = await handshake(base, apiKey, bytes.length)
  const put = await request(base + hs.presignedUrl, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: bytes })
  if (put.status !== 200) throw new Error(`PUT ${hs.presignedUrl}: ${put.status} ${put.body.toString().slice(0, 300)}`)
  return { fileId: hs.fileId, putMs: put.ms }
}
