// The coffer-s3 action's post step (see action.yml), run by the runner when the job ends, also
// after a failed step: stops the Coffer that main.mjs started (SIGTERM: its graceful shutdown, which
// removes its ephemeral data dir), shows its log and removes the downloaded executable.
import fs from 'node:fs'
import path from 'node:path'

const pid = Number(process.env.STATE_pid)
const dir = process.env.STATE_dir ?? ''
const alive = (p) => {
  try {
    process.kill(p, 0)
    return true
  } catch {
    return false
  }
}
/**
 * Whether `p` is still the coffer main.mjs started, not another process that got its pid since: by
 * the executable it runs (/proc/<pid>/exe), not by its command line, which Coffer rewrites into its
 * process title (`coffer`).
 */
const isOurs = (p) => {
  try {
    return fs.readlinkSync(`/proc/${p}/exe`) === fs.realpathSync(path.join(dir, 'coffer'))
  } catch {
    return false
  }
}

if (pid > 0 && dir && isOurs(pid)) {
  process.kill(pid, 'SIGTERM')
  // Coffer gives in-flight requests 10 s by default (COFFER_SHUTDOWN_TIMEOUT_SECONDS).
  const deadline = Date.now() + 15_000
  while (alive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  if (alive(pid)) {
    console.log('::warning::Coffer did not stop within 15 s of SIGTERM: killed')
    process.kill(pid, 'SIGKILL')
  } else console.log(`Coffer (pid ${pid}) stopped`)
} else if (pid > 0) console.log(`::warning::Coffer (pid ${pid}) had already exited before the end of the job`)

const log = path.join(dir, 'coffer.log')
if (dir && fs.existsSync(log)) console.log(`::group::Coffer's log\n${fs.readFileSync(log, 'utf8').trimEnd()}\n::endgroup::`)
if (dir.includes('coffer-s3-')) fs.rmSync(dir, { recursive: true, force: true })
