import { createHmac, timingSafeEqual } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'

export interface Received {
  headers: http.IncomingHttpHeaders
  body: string
  at: number
}

/**
 * A webhook receiver on 127.0.0.1. `statuses` are answered in order (the last one repeats);
 * 0 means "never answer" (to test timeouts and shutdown).
 */
export async function startReceiver(
  t: Test,
  statuses: number[] = [200],
): Promise<{ url: string; received: Received[]; statuses: number[]; waitFor: (n: number, timeoutMs?: number) => Promise<void> }> {
  const received: Received[] = []
  const hanging = new Set<http.ServerResponse>()
  const server = http.createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (d: string) => (body += d))
    req.on('end', () => {
      received.push({ headers: req.headers, body, at: Date.now() })
      const status = statuses[Math.min(received.length - 1, statuses.length - 1)] ?? 200
      if (status === 0) return void hanging.add(res)
      res.writeHead(status, status >= 300 && status < 400 ? { location: 'http://127.0.0.1:1/elsewhere' } : {}).end('ok')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const res of hanging) res.destroy()
    server.closeAllConnections()
    server.close()
  })
  const { port } = server.address() as AddressInfo
  const waitFor = async (n: number, timeoutMs = 5000) => {
    const deadline = Date.now() + timeoutMs
    while (received.length < n) {
      if (Date.now() > deadline) throw new Error(`receiver got ${received.length} of ${n} requests within ${timeoutMs} ms`)
      await new Promise((r) => setTimeout(r, 10))
    }
  }
  return { url: `http://127.0.0.1:${port}/hooks/coffer`, received, statuses, waitFor }
}

/** What a receiver does (Standard Webhooks): recompute the signature with the secret and compare in constant time. */
export function verifySignature(secret: string, headers: Record<string, unknown>, body: string): boolean {
  const id = String(headers['webhook-id'])
  const ts = String(headers['webhook-timestamp'])
  const expected = createHmac('sha256', Buffer.from(secret.replace(/^whsec_/, ''), 'base64'))
    .update(`${id}.${ts}.${body}`)
    .digest()
  return String(headers['webhook-signature'])
    .split(' ')
    .some((part) => {
      const [v, sig] = part.split(',')
      const given = Buffer.from(sig ?? '', 'base64')
      return v === 'v1' && given.length === expected.length && timingSafeEqual(given, expected)
    })
}
