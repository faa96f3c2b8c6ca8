/**
 * Named moments at which a crash test has the server die (COFFER_TEST_CRASH_AT=<name>, armed by
 * main.ts, the only file that reads the environment and signals): the window between two
 * transactions that recovery must cover is then hit every time, not by chance (#24). Unarmed, a
 * crash point is one comparison.
 */
let armed: { name: string; crash: () => void } | undefined

/** Makes `crashPoint(name)` call `crash` (main.ts: SIGKILL to the process itself). */
export function armCrashPoint(name: string, crash: () => void): void {
  armed = { name, crash }
}

export function crashPoint(name: string): void {
  if (armed?.name === name) armed.crash()
}
