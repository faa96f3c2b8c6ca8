import http from 'node:http'
import { loadConfig } from '../config'
import { parse, println, UsageError, type CliIO } from './io'

export const HEALTH_HELP = `Usage: coffer health [--port PORT] [--host HOST] [--timeout SECONDS]

Asks the coffer serve of this machine for GET /health: exit 0 when it answers 200, 1 otherwise
(refused, another status, or no answer within the timeout, default 5 s), with one line on stderr.
Made for a container's health check, which has no shell or curl to run: the port and host are
the ones coffer serve reads (--port / COFFER_PORT, default 8080; --host / COFFER_HOST), and a
server bound to every address (0.0.0.0 or ::) is asked on 127.0.0.1.`

/** The address to ask for a server bound to `host`: a wildcard is reached on the loopback. */
function reachable(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '[::]') return '127.0.0.1'
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host
}

/** `coffer health`: one GET /health on the configured port, its status as the exit code. */
export async function healthCommand(args: string[], io: CliIO): Promise<number> {
  const { values } = parse(args, { port: { type: 'string' }, host: { type: 'string' }, timeout: { type: 'string' } })
  if (values.help) {
    println(io.stdout, HEALTH_HELP)
    return 0
  }
  const timeout = values.timeout === undefined ? 5 : Number(values.timeout)
  if (!Number.isFinite(timeout) || timeout <= 0 || timeout > 300)
    throw new UsageError(`--timeout must be a number of seconds above 0 and up to 300, not ${JSON.stringify(values.timeout)}`)
  // The same reading of the port and host as coffer serve's, so a container's COFFER_PORT applies to both.
  const config = loadConfig(io.env, { port: values.port, host: values.host })
  if (config.port === 0) {
    println(io.stderr, 'coffer: health: the port is 0 (a free one chosen at start): set --port or COFFER_PORT to the port coffer serve listens on')
    return 1
  }
  const url = `http://${reachable(config.host)}:${config.port}/health`
  const failure = await get(url, timeout * 1000)
  if (failure === undefined) {
    println(io.stdout, `${url}: 200`)
    return 0
  }
  println(io.stderr, `coffer: health: ${url}: ${failure}`)
  return 1
}

/** undefined when `url` answers 200 within `timeoutMs`, else what went wrong. */
function get(url: string, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = http.get(url, { signal: AbortSignal.timeout(timeoutMs), headers: { connection: 'close' } }, (res) => {
      res.resume()
      res.once('end', () => resolve(res.statusCode === 200 ? undefined : `answered ${res.statusCode}`))
      res.once('error', (err) => resolve(err.message))
    })
    req.once('error', (err: NodeJS.ErrnoException) => {
      resolve(err.name === 'AbortError' || err.name === 'TimeoutError' ? `no answer within ${timeoutMs / 1000} s` : (err.code ?? err.message))
    })
  })
}
