/**
 * A HEAD load generator (bundled by run.mjs as dist/bench/head-client.cjs, run in its own process
 * by head-load.ts): wrk cannot measure HEAD, whose answer announces a Content-Length and sends no
 * body (its parser waits for the body), nor can autocannon. Each connection sends one request at a
 * time on a keep-alive socket and reads the answer's head up to its blank line, with no HTTP
 * parser: a request's cost to the generator is a write and a read, as in wrk's C loop.
 *
 * Usage: head-client.cjs HOST PORT SECONDS CONNECTIONS SIGNED_FILE (s3-sign.ts prepareSigned lines).
 * Prints one JSON line: {requests, good, bad, seconds}.
 */
import fs from 'node:fs'
import net from 'node:net'

const [host, port, seconds, connections, file] = process.argv.slice(2) as [string, string, string, string, string]
const lines = fs
  .readFileSync(file, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => {
    const [p, date, authorization] = l.split('\t') as [string, string, string]
    return Buffer.from(
      `HEAD ${p} HTTP/1.1\r\nHost: ${host}:${port}\r\nx-amz-date: ${date}\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\nAuthorization: ${authorization}\r\n\r\n`,
    )
  })
const END = Buffer.from('\r\n\r\n')
let good = 0
let bad = 0
let requests = 0
let stopping = false
const started = performance.now()

function connection(): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), host)
    socket.setNoDelay(true)
    let pending: Buffer = Buffer.alloc(0)
    const send = () => {
      if (stopping) {
        socket.end()
        return resolve()
      }
      socket.write(lines[Math.floor(Math.random() * lines.length)]!)
    }
    socket.on('connect', send)
    socket.on('data', (chunk: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk
      // One answer at a time on the socket: a head ends at its blank line, and a HEAD has no body.
      const end = pending.indexOf(END)
      if (end === -1) return
      requests++
      if (pending.subarray(0, 12).toString() === 'HTTP/1.1 200') good++
      else bad++
      pending = pending.subarray(end + END.length)
      send()
    })
    socket.on('error', reject)
  })
}

setTimeout(() => (stopping = true), Number(seconds) * 1000)
Promise.all(Array.from({ length: Number(connections) }, connection)).then(
  () => process.stdout.write(`${JSON.stringify({ requests, good, bad, seconds: (performance.now() - started) / 1000 })}\n`),
  (err: unknown) => {
    process.stderr.write(`head-client: ${(err as Error).message}\n`)
    process.exitCode = 1
  },
)
