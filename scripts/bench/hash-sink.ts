/**
 * A reference point for the large PUT: a bare Node HTTP server that only computes the SHA-256 of
 * a PUT body and throws the bytes away (no disk, no framework). It shows how fast one JavaScript
 * thread can receive and hash on this machine, a ceiling for any server that hashes while it
 * receives, as Coffer does. Usage: hash-sink.cjs <port>
 */
import http from 'node:http'
import { createHash } from 'node:crypto'

const server = http.createServer((req, res) => {
  if (req.method !== 'PUT') return void res.end('ok')
  const hash = createHash('sha256')
  req.on('data', (chunk: Buffer) => hash.update(chunk))
  req.on('end', () => res.end(hash.digest('hex')))
})
server.listen(Number(process.argv[2]), '127.0.0.1')
process.once('SIGTERM', () => server.close(() => process.exit(0)))
