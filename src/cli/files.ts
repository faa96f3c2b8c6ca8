import fs from 'node:fs'
import path from 'node:path'
import { Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createHash, randomBytes } from 'node:crypto'
import { detectType } from '../lib/sniff'
import { FILE_TYPES, MAX_FILE_SIZE } from '../lib/file-types'
import { contentTypeOf } from './content-types'
import { escapeUnsafe, terminalJson, toFileName } from '../lib/text'
import { ApiError, call, failure, json, remoteFrom, request, type Remote } from './client'
import { OperatorError, parse, println, UsageError, type CliIO } from './io'
import { progress } from './progress'

/** The File resource as the API returns it (spec part 2); only what the CLI reads is typed. */
interface RemoteFile {
  id: string
  originalName: string
  fileType: string
  sizeBytes: number
  processingStatus: string
  createdAt: string
  [key: string]: unknown
}

const REMOTE_OPTIONS = { url: { type: 'string' }, key: { type: 'string' } } as const
const REMOTE_HELP = `--url URL and --key KEY default to COFFER_URL and COFFER_API_KEY.`

export const UPLOAD_HELP = `Usage: coffer upload FILE... [--workspace ID] [--context C] [--tag KEY=VALUE]... [--json] [--url URL] [--key KEY]

Uploads each FILE (handshake, then the bytes streamed to the presigned URL) and prints its file id,
one per line (--json: a JSON array of the file objects). The type comes from the content (magic
bytes) for ${FILE_TYPES.join(', ')}, else from the name's extension (.txt text/plain, .json
application/json, …), else application/octet-stream; the server refuses a type it or the tenant
does not allow (INVALID_FILE_TYPE: by default only the six above; COFFER_FILE_TYPES on the server
widens them). Large files show progress on a terminal.
Exit code 1 when any file failed (each failure is one line on stderr), 2 for a usage error or an
unreachable server. ${REMOTE_HELP}`

export const DOWNLOAD_HELP = `Usage: coffer download FILE_ID [-o PATH] [--url URL] [--key KEY]

Streams the file's content to PATH (default: its original name in the current directory, never
overwriting; -o - writes to stdout). The content is checked against its SHA-256 (the ETag) and
written under a temporary name until complete. ${REMOTE_HELP}`

export const LS_HELP = `Usage: coffer ls [--workspace ID] [--context C] [--type MIME] [--limit N] [--json] [--url URL] [--key KEY]

Lists the tenant's files, newest first (all of them, or the first N). ${REMOTE_HELP}`

export const RM_HELP = `Usage: coffer rm FILE_ID... [--url URL] [--key KEY]

Deletes each file (its quota is released at once). Exit code 1 when any could not be deleted. ${REMOTE_HELP}`

/** Positionals are unbounded for upload and rm: parse() needs a number. */
const MANY = 100_000

/**
 * One failure line. Every string shown by these commands goes through escapeUnsafe (or
 * terminalJson): names, types and messages come from the server or from the local file system, and
 * either may hold control or bidi characters that would drive the terminal (#24).
 */
function say(io: CliIO, subject: string, err: unknown): void {
  if (err instanceof ApiError) println(io.stderr, `coffer: ${escapeUnsafe(subject)}: ${escapeUnsafe(err.message)} (${escapeUnsafe(err.code)})`)
  else if (err instanceof UsageError) println(io.stderr, `coffer: ${escapeUnsafe(subject)}: ${escapeUnsafe(err.message)}`)
  else throw err
}

export async function uploadCommand(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(
    args,
    { ...REMOTE_OPTIONS, workspace: { type: 'string' }, context: { type: 'string' }, tag: { type: 'string', multiple: true }, json: { type: 'boolean' } },
    MANY,
  )
  if (values.help) return (println(io.stdout, UPLOAD_HELP), 0)
  if (positionals.length === 0) throw new UsageError('upload needs at least one FILE')
  const tags: Record<string, string> = {}
  for (const t of values.tag ?? []) {
    const eq = t.indexOf('=')
    if (eq < 1) throw new UsageError(`--tag ${terminalJson(t)} must be KEY=VALUE`)
    tags[t.slice(0, eq)] = t.slice(eq + 1)
  }
  const remote = remoteFrom(values, io.env)
  const uploaded: RemoteFile[] = []
  let failed = 0
  for (const file of positionals) {
    try {
      const f = await uploadOne(remote, io, file, { workspaceId: values.workspace, context: values.context, tags })
      uploaded.push(f)
      if (!values.json) println(io.stdout, escapeUnsafe(f.id))
    } catch (err) {
      say(io, file, err)
      failed++
    }
  }
  if (values.json) println(io.stdout, terminalJson(uploaded))
  return failed === 0 ? 0 : 1
}

/**
 * The type an upload declares: what the first bytes say (the spec's six, whose signature the server
 * checks), else what the name's extension usually means, else application/octet-stream.
 */
export function fileTypeOf(file: string, head: Buffer): string {
  return detectType(head) ?? contentTypeOf(path.basename(file)).split(';')[0]!.trim()
}

async function uploadOne(
  remote: Remote,
  io: CliIO,
  file: string,
  opts: { workspaceId: string | undefined; context: string | undefined; tags: Record<string, string> },
): Promise<RemoteFile> {
  let fd: number
  try {
    fd = fs.openSync(file, 'r')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    throw new UsageError(code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : `cannot open (${code})`)
  }
  let size: number
  let head: Buffer
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) throw new UsageError('not a regular file')
    size = st.size
    head = Buffer.alloc(64)
    head = head.subarray(0, fs.readSync(fd, head, 0, 64, 0))
  } finally {
    fs.closeSync(fd)
  }
  if (size === 0) throw new UsageError('the file is empty')
  if (size > MAX_FILE_SIZE) throw new UsageError(`${size} bytes is over the ${MAX_FILE_SIZE}-byte limit`)
  const fileType = fileTypeOf(file, head)
  const body: Record<string, unknown> = { fileType, fileName: path.basename(file), fileSizeBytes: size }
  if (opts.context !== undefined) body.context = opts.context
  if (Object.keys(opts.tags).length > 0) body.tags = opts.tags
  if (opts.workspaceId !== undefined) body.workspaceId = opts.workspaceId
  const h = await call<{ fileId: string; presignedUrl: string }>(remote, 'POST', '/api/v1/upload/request', body)
  const bar = progress(io.stderr, escapeUnsafe(path.basename(file)), size)
  const counted = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bar.add(chunk.length)
      cb(null, chunk)
    },
  })
  const source = fs.createReadStream(file, { highWaterMark: 256 * 1024 })
  source.on('error', (err) => counted.destroy(err))
  const answer = await request(remote, 'PUT', h.presignedUrl, { headers: { 'content-type': fileType, 'content-length': size }, body: source.pipe(counted) })
  const done = await json<RemoteFile>(answer)
  bar.end()
  return done
}

export async function downloadCommand(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, { ...REMOTE_OPTIONS, output: { type: 'string', short: 'o' } }, 1)
  if (values.help) return (println(io.stdout, DOWNLOAD_HELP), 0)
  const id = positionals[0]
  if (id === undefined) throw new UsageError('download needs a FILE_ID (coffer ls shows them)')
  const remote = remoteFrom(values, io.env)
  const answer = await request(remote, 'GET', `/api/v1/files/${encodeURIComponent(id)}/download`)
  if (answer.status !== 200) {
    say(io, id, await failure(answer))
    return 1
  }
  const size = Number(answer.headers['content-length'] ?? 0)
  const expected = /^"([0-9a-f]{64})"$/.exec(String(answer.headers.etag ?? ''))?.[1]
  const hash = createHash('sha256')
  const bar = progress(io.stderr, escapeUnsafe(id), size)
  const check = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk)
      bar.add(chunk.length)
      cb(null, chunk)
    },
    flush(cb) {
      const actual = hash.digest('hex')
      cb(expected !== undefined && actual !== expected ? new Error(`the content's SHA-256 ${actual} is not the server's ${expected}`) : null)
    },
  })
  if (values.output === '-') {
    // stdout is not ended: it belongs to the process.
    for await (const chunk of answer.body.pipe(check)) {
      if (!io.stdout.write(chunk as Buffer)) await new Promise((resolve) => io.stdout.once('drain', resolve))
    }
    return 0
  }
  const target = values.output ?? safeName(answer.headers['content-disposition'], id)
  if (values.output === undefined && fs.existsSync(target)) {
    answer.body.destroy()
    throw new OperatorError(`${escapeUnsafe(target)} already exists: choose another name with -o PATH`)
  }
  const partial = `${target}.${randomBytes(4).toString('hex')}.part`
  try {
    await pipeline(answer.body, check, fs.createWriteStream(partial, { flags: 'wx' }))
    fs.renameSync(partial, target)
  } catch (err) {
    fs.rmSync(partial, { force: true })
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EACCES' || code === 'EROFS' || code === 'ENOENT' || code === 'ENOSPC')
      throw new OperatorError(`cannot write ${escapeUnsafe(target)} (${code}): choose another place with -o PATH`)
    throw err
  }
  bar.end()
  println(io.stderr, `${escapeUnsafe(target)} (${size} bytes)`)
  return 0
}

/**
 * The original name from Content-Disposition (RFC 6266 filename*), made a name the API itself would
 * accept (lib/text.ts toFileName): its last segment, with no control, bidi or invisible character
 * and no separator, so the file lands in the current directory under a name a terminal shows as it
 * is, whatever the server sent (#24). An undecodable name is the file's id.
 */
function safeName(disposition: string | undefined, fallback: string): string {
  const star = /filename\*=UTF-8''([^;]+)/i.exec(disposition ?? '')?.[1]
  let name = fallback
  try {
    if (star) name = decodeURIComponent(star)
  } catch {
    // Malformed percent-encoding: keep the id.
  }
  return toFileName(name, fallback)
}

export async function lsCommand(args: string[], io: CliIO): Promise<number> {
  const { values } = parse(args, {
    ...REMOTE_OPTIONS,
    workspace: { type: 'string' },
    context: { type: 'string' },
    type: { type: 'string' },
    limit: { type: 'string' },
    json: { type: 'boolean' },
  })
  if (values.help) return (println(io.stdout, LS_HELP), 0)
  const max = values.limit === undefined ? Infinity : Number(values.limit)
  if (values.limit !== undefined && !(Number.isInteger(max) && max >= 1)) throw new UsageError('--limit must be a positive integer')
  const remote = remoteFrom(values, io.env)
  const files: RemoteFile[] = []
  let total = 0
  for (let cursor: string | null = null; files.length < max;) {
    const q = new URLSearchParams({ limit: String(Math.min(100, max - files.length)) })
    if (cursor) q.set('cursor', cursor)
    if (values.workspace !== undefined) q.set('workspaceId', values.workspace)
    if (values.context !== undefined) q.set('context', values.context)
    if (values.type !== undefined) q.set('fileType', values.type)
    let page: { files: RemoteFile[]; nextCursor: string | null; total: number }
    try {
      page = await call(remote, 'GET', `/api/v1/files?${q}`)
    } catch (err) {
      say(io, 'ls', err)
      return 1
    }
    files.push(...page.files)
    total = page.total
    cursor = page.nextCursor
    if (cursor === null) break
  }
  if (values.json) return (println(io.stdout, terminalJson(files)), 0)
  if (files.length === 0) return (println(io.stdout, 'No files.'), 0)
  println(io.stdout, ['ID'.padEnd(36), 'SIZE'.padStart(11), 'STATUS'.padEnd(9), 'TYPE'.padEnd(15), 'CREATED'.padEnd(24), 'NAME'].join('  '))
  for (const f of files) {
    println(
      io.stdout,
      [
        escapeUnsafe(f.id),
        String(f.sizeBytes).padStart(11),
        escapeUnsafe(f.processingStatus).padEnd(9),
        escapeUnsafe(f.fileType).padEnd(15),
        escapeUnsafe(f.createdAt).padEnd(24),
        escapeUnsafe(f.originalName),
      ].join('  '),
    )
  }
  if (files.length < total) println(io.stdout, `(${files.length} of ${total})`)
  return 0
}

export async function rmCommand(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, REMOTE_OPTIONS, MANY)
  if (values.help) return (println(io.stdout, RM_HELP), 0)
  if (positionals.length === 0) throw new UsageError('rm needs at least one FILE_ID')
  const remote = remoteFrom(values, io.env)
  let failed = 0
  for (const id of positionals) {
    try {
      await call(remote, 'DELETE', `/api/v1/files/${encodeURIComponent(id)}`)
      println(io.stdout, `deleted ${escapeUnsafe(id)}`)
    } catch (err) {
      say(io, id, err)
      failed++
    }
  }
  return failed === 0 ? 0 : 1
}
