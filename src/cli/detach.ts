import { spawn } from 'node:child_process'
import { println } from './io'

/**
 * `coffer serve --detach` (#28): the server runs in a detached child of this same program, and
 * this process returns once the child is ready, like `pg_ctl start` or `mongod --fork`, so a CI
 * script needs neither `&` nor a polling loop.
 *
 * The child gets DETACHED_CHILD_ENV, which makes it print one JSON line on stdout once it is ready
 * (the same moment as ephemeral mode's line: listening, tenant and buckets made, files written),
 * with its pid in it, and send its logs to stderr. Its stdout is a pipe to this process, read for
 * that one line and then closed; its stderr is this process's own (`2> coffer.log` keeps the logs
 * of both, and a start-up error reaches the person as one line from the child itself). It runs in
 * its own session (setsid), so a Ctrl-C or a SIGHUP meant for the script that started it does not
 * stop it: `kill PID` does.
 */
export const DETACHED_CHILD_ENV = 'COFFER_DETACHED_CHILD'

/** How long the child may take to be ready before it is stopped and the start reported failed. */
export const DETACH_READY_TIMEOUT_MS = 60_000

export interface DetachOptions {
  /** This program and the arguments that run it again (node and its flags and script, or the executable). */
  command: string
  args: string[]
  env: Record<string, string | undefined>
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
  /** Resolves when this process is asked to stop while it waits (the child is stopped too). */
  stopped: Promise<string>
  timeoutMs?: number
}

/** Starts the child and returns the exit code of `coffer serve --detach`. */
export async function detach(opts: DetachOptions): Promise<number> {
  const child = spawn(opts.command, opts.args, {
    detached: true,
    env: { ...opts.env, [DETACHED_CHILD_ENV]: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
    // A command that cannot be run at all (ENOENT, EACCES): no 'exit' follows.
    child.once('error', (err) => {
      println(opts.stderr, `coffer: cannot start the server in the background: ${err.message}`)
      resolve({ code: 1, signal: null })
    })
  })
  // Loaded by --detach alone, not by every start of the server (#28).
  const lines = process.getBuiltinModule('node:readline').createInterface({ input: child.stdout })
  const ready = new Promise<string>((resolve) => lines.once('line', resolve))
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), opts.timeoutMs ?? DETACH_READY_TIMEOUT_MS)))
  const first = await Promise.race([
    ready.then((line) => ({ line })),
    exited.then((exit) => ({ exit })),
    timedOut.then(() => ({ timeout: true as const })),
    opts.stopped.then((signal) => ({ signal })),
  ])
  clearTimeout(timer)
  lines.close()
  if ('line' in first) {
    // Closed: the child writes nothing more there (its logs go to stderr), and a write it makes
    // anyway meets EPIPE, which main.ts ignores.
    child.stdout.destroy()
    child.unref()
    println(opts.stdout, first.line)
    return 0
  }
  if ('exit' in first) {
    // The child has said why on the shared stderr (one line, as any start-up error); its exit code
    // is passed on (2 for a setting to change), nothing is left running.
    const { code, signal } = first.exit
    if (signal !== null) println(opts.stderr, `coffer: the server stopped by ${signal} before it was ready`)
    return code ?? 1
  }
  // Not ready in time, or this process was stopped: the child goes too (SIGTERM removes an
  // ephemeral data dir; SIGKILL only if it does not stop within 10 s).
  println(
    opts.stderr,
    'timeout' in first
      ? `coffer: the server was not ready within ${(opts.timeoutMs ?? DETACH_READY_TIMEOUT_MS) / 1000} s; stopped it`
      : `coffer: ${first.signal} received; stopped the server that was starting`,
  )
  child.kill('SIGTERM')
  const forced = setTimeout(() => child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(forced)
  return 1
}
