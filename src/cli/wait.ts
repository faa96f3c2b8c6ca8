import fs from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { parse, println, UsageError, type CliIO } from './io'

export const WAIT_HELP = `Usage: coffer wait URL|ENV_FILE [--pid PID] [--timeout SECONDS]

Waits until a coffer answers GET /health with 200 (exit 0), or the timeout passes (default 30 s;
exit 1 with one line on stderr). Replaces the polling loop of a CI script.

URL        the server's base URL, e.g. http://127.0.0.1:8080
ENV_FILE   the file of coffer serve --ephemeral --write-env: waits for it to appear, then for
           its COFFER_URL to answer
--pid PID  the coffer serve process: stop waiting (exit 1) as soon as it has exited, and with
           ENV_FILE accept only the file that process wrote (its COFFER_PID), not an earlier run's`

/** One NAME=value line of an env file written by --write-env. */
const varOf = (text: string, name: string) =>
  text
    .split('\n')
    .find((l) => l.startsWith(name + '='))
    ?.slice(name.length + 1)

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** `coffer wait`: polls until the server is up, its process is gone, or the time is over. */
export async function waitCommand(args: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parse(args, { pid: { type: 'string' }, timeout: { type: 'string' } }, 1)
  if (values.help) {
    println(io.stdout, WAIT_HELP)
    return 0
  }
  const target = positionals[0]
  if (target === undefined) throw new UsageError('wait needs a URL or the file of --write-env')
  const timeout = values.timeout === undefined ? 30 : Number(values.timeout)
  if (!Number.isFinite(timeout) || timeout <= 0 || timeout > 3600)
    throw new UsageError(`--timeout must be a number of seconds from 0 to 3600, not ${JSON.stringify(values.timeout)}`)
  const pid = values.pid === undefined ? undefined : Number(values.pid)
  if (pid !== undefined && !(Number.isSafeInteger(pid) && pid > 0)) throw new UsageError(`--pid must be a process id, not ${JSON.stringify(values.pid)}`)
  const isUrl = /^https?:\/\//.test(target)
  if (isUrl && !URL.canParse(target)) throw new UsageError(`not a URL: ${target}`)

  const deadline = performance.now() + timeout * 1000
  let waitingFor = isUrl ? `${target} to answer` : `${target} to be written`
  for (;;) {
    const url = isUrl ? target : urlIn(target, pid)
    if (url !== undefined) {
      waitingFor = `${url}/health to answer 200`
      if (await healthy(url, Math.max(100, Math.min(2000, deadline - performance.now())))) return 0
    }
    const failure =
      pid !== undefined && !alive(pid)
        ? `coffer (pid ${pid}) exited before it was ready`
        : performance.now() >= deadline
          ? `gave up after ${timeout} s waiting for ${waitingFor}`
          : undefined
    if (failure !== undefined) {
      println(io.stderr, `coffer: ${failure}`)
      return 1
    }
    await sleep(50)
  }
}

/** The COFFER_URL of the env file once it is there (and written by `pid`, when given). */
function urlIn(file: string, pid: number | undefined): string | undefined {
  let text: string
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch {
    return undefined
  }
  if (pid !== undefined && varOf(text, 'COFFER_PID') !== String(pid)) return undefined
  return varOf(text, 'COFFER_URL')?.replace(/\/+$/, '')
}

async function healthy(base: string, timeoutMs: number): Promise<boolean> {
  try {
    const res = await fetch(`${base.replace(/\/+$/, '')}/health`, { signal: AbortSignal.timeout(timeoutMs) })
    await res.body?.cancel()
    return res.status === 200
  } catch {
    return false
  }
}
