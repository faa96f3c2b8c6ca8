/**
 * Reference points for the transfer figures: a bare node:http server (no framework, database or
 * checks) doing only the essential work of each transfer the way Node can do it. Where Coffer is
 * close to this and far from nginx, the gap is the work itself or the runtime, not Coffer's code.
 *
 * - PUT /hash: SHA-256 of the body, bytes thrown away;
 * - PUT /durable: SHA-256 while writing the body to a file in <dir>, then fsync (Coffer's staging);
 * - GET /file/<name>: a file of <dir> streamed with fs.createReadStream (Node has no sendfile).
 *
 * Usage: node-reference.cjs <port> <dir>
 */
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { createHash, randomUUID } from 'node:crypto'
import { Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'

const dir = process.argv[3]!

async function durable(req: http.IncomingMessage): Promise<string> {
  const hash = createHash('sha256')
  const file = path.join(dir, `put-${randomUUID()}`)
  const hashing = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk)
      cb(null, chunk)
    },
  })
  await pipeline(req, hashing, fs.createWriteStream(file, { flags: 'wx', flush: true, highWaterMark: 1024 * 1024 }))
  await fs.promises.rm(file)
  return hash.digest('hex')
}

const server = http.createServer((req, res) => {
  const fail = (err: unknown) => {
    res.statusCode = 500
    res.end(String(err))
  }
  if (req.method === 'PUT' && req.url === '/hash') {
    const hash = createHash('sha256')
    req.on('data', (chunk: Buffer) => hash.update(chunk))
    req.on('end', () => res.end(hash.digest('hex')))
  } else if (req.method === 'PUT' && req.url === '/durable') {
    durable(req).then((digest) => res.end(digest), fail)
  } else if (req.method === 'GET' && req.url?.startsWith('/file/')) {
    const file = path.join(dir, path.basename(req.url))
    res.setHeader('content-length', fs.statSync(file).size)
    pipeline(fs.createReadStream(file, { highWaterMark: 256 * 1024 }), res).catch(fail)
  } else {
    res.end('ok')
  }
})
server.listen(Number(process.argv[2]), '127.0.0.1')
process.once('SIGTERM', () => server.close(() => process.exit(0)))
