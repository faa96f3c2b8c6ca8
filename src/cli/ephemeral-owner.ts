import fs from 'node:fs'
import path from 'node:path'

/**
 * Which process owns an ephemeral data dir, so that the next ephemeral start can remove the dirs
 * of instances killed with SIGKILL (which run no exit handler) and never a live instance's (#13).
 *
 * The owner is `<pid> <start time> <pid namespace>`: a pid alone could be reused by an unrelated
 * process (then the dir would only be kept, which is safe), and the start time tells a reused pid
 * from the owner; the namespace keeps an instance from judging a pid of another container that
 * shares the same TMPDIR (it then keeps the dir).
 */
export const OWNER_FILE = '.ephemeral-owner'
export const EPHEMERAL_PREFIX = 'coffer-ephemeral-'

/** The start time of `pid` in clock ticks since boot (field 22 of /proc/<pid>/stat), where /proc exists. */
function startTime(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
  } catch {
    return undefined
  }
}

function pidNamespace(): string {
  try {
    return fs.readlinkSync('/proc/self/ns/pid')
  } catch {
    return '-'
  }
}

/** This process as an owner line. */
export function ownerLine(pid = process.pid): string {
  return `${pid} ${startTime(pid) ?? '-'} ${pidNamespace()}`
}

/** False only when the owner is certainly gone: its pid is free, or now names a process started later. */
export function ownerAlive(line: string): boolean {
  const [pidText, start, ns] = line.trim().split(' ')
  const pid = Number(pidText)
  if (!Number.isSafeInteger(pid) || pid <= 0) return true
  if (ns !== undefined && ns !== pidNamespace()) return true
  try {
    process.kill(pid, 0)
  } catch (err) {
    // EPERM: the pid exists, run by another user.
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false
  }
  const now = start === undefined || start === '-' ? undefined : startTime(pid)
  return now === undefined || now === start
}

/**
 * Removes the ephemeral data dirs in `tmpdir` whose owner is gone; returns their paths. A dir
 * without an owner file (an instance that is just starting, or of an older coffer) is kept.
 * Best effort: a dir that cannot be read or removed is left alone.
 */
export function removeStaleEphemeralDirs(tmpdir: string): string[] {
  const removed: string[] = []
  let names: string[]
  try {
    names = fs.readdirSync(tmpdir).filter((n) => n.startsWith(EPHEMERAL_PREFIX))
  } catch {
    return removed
  }
  const uid = process.getuid?.()
  for (const name of names) {
    const dir = path.join(tmpdir, name)
    try {
      const st = fs.lstatSync(dir)
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue
      const owner = fs.readFileSync(path.join(dir, OWNER_FILE), 'utf8')
      if (ownerAlive(owner)) continue
      fs.rmSync(dir, { recursive: true, force: true })
      removed.push(dir)
    } catch {
      // No owner file yet, or not ours to read: keep it.
    }
  }
  return removed
}
