import readline from 'node:readline'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import type { Test } from 'tap'
import { BUNDLE } from './process-helper'

// `coffer serve` as a person at a terminal runs it, for the tests of the first start (its banner
// is shown on a terminal only).

/** A server started under a pseudo-terminal (util-linux `script`): what a person at a terminal sees. */
export interface OnTerminal {
  script: ChildProcess
  /** The coffer process (script's child: `exec` replaces the shell). */
  pid: number
  /** Every line the terminal showed so far, without the carriage returns. */
  lines: string[]
  exited: Promise<number | string>
}

/** Waits until `pred` holds on the terminal's lines (polled), or fails after `ms`. */
export async function until(term: OnTerminal, pred: (lines: string[]) => boolean, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (!pred(term.lines)) {
    if (Date.now() > end) throw new Error(`${what} did not show within ${ms} ms:\n${term.lines.join('\n')}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** Runs `coffer serve ARGS` in `cwd` on a pseudo-terminal; stopped (SIGTERM) at the test's end. */
export async function serveOnTerminal(t: Test, cwd: string, args: string[], env: Record<string, string> = {}): Promise<OnTerminal> {
  const words = [process.execPath, BUNDLE, 'serve', ...args].map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ')
  // NODE_OPTIONS unset: tap's hooks in the child would write to the terminal too.
  const script = spawn('script', ['-qfec', `unset NODE_OPTIONS; exec ${words}`, '/dev/null'], {
    cwd,
    env: { PATH: process.env.PATH ?? '', TERM: 'dumb', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const lines: string[] = []
  readline.createInterface({ input: script.stdout! }).on('line', (l) => lines.push(l.replace(/\r/g, '')))
  const exited = new Promise<number | string>((resolve) => script.once('exit', (code, signal) => resolve(code ?? signal ?? -1)))
  let pid = 0
  for (const end = Date.now() + 10_000; pid === 0 && Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
    pid = Number(
      spawnSync('pgrep', ['-P', String(script.pid)], { encoding: 'utf8' })
        .stdout.trim()
        .split('\n')[0] || 0,
    )
  }
  if (pid === 0) throw new Error('script started no process')
  const term = { script, pid, lines, exited }
  t.teardown(async () => {
    try {
      process.kill(pid, 'SIGTERM')
    } catch {
      // gone already
    }
    await exited
    script.stdin!.end()
  })
  return term
}

/** The value after `label` on the banner's line that starts with it. */
export function bannerValue(lines: string[], label: string): string {
  const line = lines.find((l) => l.startsWith(`  ${label} `))
  if (!line) throw new Error(`no "${label}" in the banner:\n${lines.join('\n')}`)
  return line
    .slice(label.length + 2)
    .trim()
    .split(/\s+/)[0]!
}

/** A pretty log line: `12:00:01.123 INFO  …`. */
export const PRETTY = /^\d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) /
