/**
 * The loop of head-client.ts (a HEAD load generator: wrk waits for the body a HEAD's
 * Content-Length announces, and autocannon too): each connection sends one request at a time on a
 * keep-alive socket and reads the answer's head up to its blank line, with no HTTP parser, so a
 * request costs the generator a write and a read, as in wrk's C loop.
 */
import net from 'node:net'

export interface HeadCounts {
  requests: number
  good: number
  bad: number
  seconds: number
}

const END = Buffer.from('\r\n\r\n')

/** The request for one line of s3-sign.ts's prepareSigned file (path, x-amz-date, authorization). */
export function headRequest(host: string, port: number, line: string): Buffer {
  const [p, date, authorization] = line.split('\t') as [string, string, string]
  return Buffer.from(
    `HEAD ${p} HTTP/1.1\r\nHost: ${host}:${port}\r\nx-amz-date: ${date}\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\nAuthorization: ${authorization}\r\n\r\n`,
  )
}

/** `connections` sockets sending random `requests` for `seconds`; a 200 is good, any other status bad. */
export async function headRequests(o: { host: string; port: number; seconds: number; connections: number; requests: Buffer[] }): Promise<HeadCounts> {
  let good = 0
  let bad = 0
  let requests = 0
  let stopping = false
  const started = performance.now()
  const connection = () =>
    new Promise<void>((resolve, reject) => {
      const socket = net.connect(o.port, o.host)
      socket.setNoDelay(true)
      let pending: Buffer = Buffer.alloc(0)
      const send = () => {
        if (stopping) {
          socket.end()
          return resolve()
        }
        socket.write(o.requests[Math.floor(Math.random() * o.requests.length)]!)
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
  const timer = setTimeout(() => (stopping = true), o.seconds * 1000)
  try {
    await Promise.all(Array.from({ length: o.connections }, connection))
  } finally {
    clearTimeout(timer)
  }
  return { requests, good, bad, seconds: (performance.now() - started) / 1000 }
}
