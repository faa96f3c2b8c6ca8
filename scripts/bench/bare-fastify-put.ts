/**
 * Baselines for the 4 KiB PutObject (#29), on the same Fastify 5 as Coffer: what any server on
 * this stack can do per S3-style PUT, taken with the same wrk script and requests as Coffer.
 * Each answers 200 with the body's MD5 as its ETag (what S3 answers for a single-part PUT) and
 * does nothing else a server would: no SigV4 check, no access log, no metadata.
 *
 *   bare-fastify-put.cjs <port> none          the body read and hashed, never written
 *   bare-fastify-put.cjs <port> fsync <dir>   each body written to a file of its own in <dir>,
 *                                             fdatasync'ed, closed, then answered
 *   bare-fastify-put.cjs <port> group <dir>   each body appended to one log file in <dir> on the
 *                                             event loop; the answer waits for an fdatasync that
 *                                             started after its write. One flush runs at a time
 *                                             and covers everything written before it started:
 *                                             the group flush of Coffer's group commit
 *                                             (src/db/group-commit.ts), without SQLite
 */
import fs from 'node:fs'
import path from 'node:path'
import { createHash } from 'node:crypto'
import Fastify from 'fastify'

const [port, mode, dir] = process.argv.slice(2)
if (mode !== 'none' && mode !== 'fsync' && mode !== 'group') throw new Error(`mode ${mode}: none, fsync or group`)
if (mode !== 'none' && dir === undefined) throw new Error(`mode ${mode} needs a directory`)

const app = Fastify()
// Any content type, read whole: the bodies are 4 KiB (one read of the socket).
app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 1024 * 1024 }, (_req, body, done) => done(null, body))
app.get('/health', async () => ({ status: 'ok' }))

const etag = (body: Buffer) => `"${createHash('md5').update(body).digest('hex')}"`

/** One file per body: open, write, fdatasync, close, each on the thread pool. */
let files = 0
async function perRequest(body: Buffer): Promise<void> {
  const file = await fs.promises.open(path.join(dir!, `put-${++files}`), 'wx')
  try {
    await file.write(body)
    await file.datasync()
  } finally {
    await file.close()
  }
}

/** One log, appended to synchronously; flushes shared by whatever was written while one ran. */
const log = mode === 'group' ? fs.openSync(path.join(dir!, 'put.log'), 'a') : -1
let waiting: ((err: Error | null) => void)[] = []
let flushing = false
function flush(): void {
  if (flushing || waiting.length === 0) return
  flushing = true
  const batch = waiting
  waiting = []
  fs.fdatasync(log, (err) => {
    flushing = false
    for (const done of batch) done(err)
    flush()
  })
}
function grouped(body: Buffer): Promise<void> {
  fs.writeSync(log, body)
  return new Promise((resolve, reject) => {
    waiting.push((err) => (err ? reject(err) : resolve()))
    flush()
  })
}

app.put('/*', async (request, reply) => {
  const body = (request.body as Buffer | undefined) ?? Buffer.alloc(0)
  if (mode === 'fsync') await perRequest(body)
  else if (mode === 'group') await grouped(body)
  reply.header('etag', etag(body))
  return ''
})

app.listen({ port: Number(port), host: '127.0.0.1' }).catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)))
