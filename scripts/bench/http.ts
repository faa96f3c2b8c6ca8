/** HTTP client helpers for the bench: timed single requests, and autocannon load runs for the S3 figure (its per-request SigV4 needs JS; every other req/s figure runs wrk, wrk.ts). */
import http from 'node:http'
import autocannon from 'autocannon'

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

export interface LoadResult {
  /** Completed requests per second (all of them answered as expected). */
  rps: number
  p50Ms: number
  p99Ms: number
  requests: number
  seconds: number
}

/**
 * An autocannon run. Any connection error, timeout or unexpected status fails the run: a load
 * figure made of error responses would be a fake number.
 */
export async function load(opts: autocannon.Options): Promise<LoadResult> {
  const r = await autocannon({ ...opts, url: opts.url })
  const bad = r.errors + r.non2xx + r.mismatches // errors include timeouts
  if (bad > 0) {
    throw new Error(
      `load run against ${opts.url} had ${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx answers ` +
        `(${JSON.stringify(r.statusCodeStats)}), ${r.mismatches} mismatches`,
    )
  }
  return { rps: r['2xx'] / r.duration, p50Ms: r.latency.p50, p99Ms: r.latency.p99, requests: r['2xx'], seconds: r.duration }
}
