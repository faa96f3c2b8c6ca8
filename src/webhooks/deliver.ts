import http from 'node:http'
import net from 'node:net'
import type { LookupFunction } from 'node:net'
import { isLocalhostName, isPrivateAddress, type Resolver } from './ssrf'
import { sign } from './sign'
import { version } from '../../package.json'

export const DELIVERY_TIMEOUT_MS = 10_000

export interface Delivery {
  /** `webhook-id`: the same on every attempt, so receivers can deduplicate. */
  id: string
  url: string
  body: string
  secret: string
  timestampSeconds: number
}

export type DeliveryResult = { ok: true; status: number } | { ok: false; status?: number; error: string }

export interface DeliverOptions {
  allowPrivate: boolean
  resolve: Resolver
  timeoutMs?: number
  signal?: AbortSignal
}

/**
 * One signed POST. Only a 2xx counts as delivered; redirects are not followed (a 3xx is a
 * failure), so a receiver cannot bounce the request to an address the guard refused. The host is
 * resolved here and every address checked; the connection then goes to the checked address, so a
 * second DNS answer cannot differ from the one that was checked (DNS rebinding).
 */
export async function deliver(d: Delivery, opts: DeliverOptions): Promise<DeliveryResult> {
  const signal = AbortSignal.any([AbortSignal.timeout(opts.timeoutMs ?? DELIVERY_TIMEOUT_MS), ...(opts.signal ? [opts.signal] : [])])
  let url: URL
  try {
    url = new URL(d.url)
  } catch {
    return { ok: false, error: 'invalid URL' }
  }
  const host = url.hostname.replace(/^\[|\]$/g, '')
  let address: string
  try {
    // DNS takes no signal: race it, so a hanging resolver still ends within the timeout.
    address = await Promise.race([
      pickAddress(host, opts),
      new Promise<never>((_, reject) => {
        if (signal.aborted) reject(new Error(describeAbort(signal)))
        signal.addEventListener('abort', () => reject(new Error(describeAbort(signal))), { once: true })
      }),
    ])
  } catch (err) {
    return { ok: false, error: (err as Error).message }
  }
  const family = net.isIP(address)
  const lookup: LookupFunction = (_hostname, options, cb) => {
    if ((options as { all?: boolean }).all) (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }])
    else cb(null, address, family)
  }
  const headers = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(d.body),
    'user-agent': `coffer/${version}`,
    'webhook-id': d.id,
    'webhook-timestamp': String(d.timestampSeconds),
    'webhook-signature': sign(d.secret, d.id, d.timestampSeconds, d.body),
  }
  // HTTPS (and TLS) loaded on the first delivery to an https URL, not at every start (#28).
  const client = url.protocol === 'https:' ? process.getBuiltinModule('node:https') : http
  return new Promise<DeliveryResult>((resolve) => {
    const req = client.request(url, { method: 'POST', headers, lookup, signal, agent: false }, (res) => {
      const status = res.statusCode ?? 0
      res.resume() // the body is not needed; reading it frees the socket
      res.on('end', () => resolve(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, error: `HTTP ${status}` }))
      res.on('error', (err) => resolve({ ok: false, status, error: err.message }))
    })
    req.on('error', (err) => resolve({ ok: false, error: signal.aborted && err.name === 'AbortError' ? describeAbort(signal) : err.message }))
    req.end(d.body)
  })
}

function describeAbort(signal: AbortSignal): string {
  const reason = signal.reason as Error | undefined
  return reason?.name === 'TimeoutError' ? 'timed out' : 'aborted'
}

async function pickAddress(host: string, opts: DeliverOptions): Promise<string> {
  if (net.isIP(host)) {
    if (!opts.allowPrivate && isPrivateAddress(host)) throw new Error(`refused: ${host} is a private address`)
    return host
  }
  if (!opts.allowPrivate && isLocalhostName(host)) throw new Error(`refused: ${host} is this machine`)
  const addresses = await opts.resolve(host)
  if (addresses.length === 0) throw new Error(`cannot resolve ${host}`)
  if (!opts.allowPrivate) {
    const bad = addresses.find(isPrivateAddress)
    if (bad) throw new Error(`refused: ${host} resolves to private address ${bad}`)
  }
  return addresses[0]!
}
