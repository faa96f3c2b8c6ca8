/** HTTP client helpers for the bench: timed single requests (load runs are wrk's, wrk.ts). */
import http from 'node:http'

export interface Answer {
  status: number
  body: Buffer
  /** Wall time from sending the request to the last byte of the response. */
  ms: number
}

/**
 * One request. The body is sent from memory and the response kept (or, with `discard`, only
 * counted: a 100 MiB download must not be buffered by the client either).
 */
export function request(
  url: string,
  opts: { method?: string; headers?: http.OutgoingHttpHeaders; body?: Buffer; agent?: http.Agent | false; discard?: boolean } = {},
): Promise<Answer & { bytes: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const headers = { ...opts.headers }
    if (opts.body) headers['content-length'] = opts.body.length
    const req = http.request(url, { method: opts.method ?? 'GET', headers, agent: opts.agent ?? false }, (res) => {
      const chunks: Buffer[] = []
      let bytes = 0
      res.on('data', (c: Buffer) => {
        bytes += c.length
        if (!opts.discard) chunks.push(c)
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), bytes, ms: performance.now() - t0 }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(opts.body)
  })
}

export async function json<T>(url: string, opts: Parameters<typeof request>[1] = {}, expect = 200): Promise<T> {
  const res = await request(url, opts)
  if (res.status !== expect) throw new Error(`${opts.method ?? 'GET'} ${url}: ${res.status} ${res.body.toString().slice(0, 300)}`)
  return JSON.parse(res.body.toString()) as T
}
