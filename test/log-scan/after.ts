// tap `after` script: no key, token or secret may appear in any log line of the whole run.
// A non-zero exit fails `npm test`.
import fs from 'node:fs'
import path from 'node:path'
import { TEST_LOG_DIR, findSecrets } from './secrets'
import { stopFixtureAfterRun } from '../s3/fixture'

stopFixtureAfterRun()

let lines = 0
const leaks: string[] = []
const files = fs.existsSync(TEST_LOG_DIR) ? fs.readdirSync(TEST_LOG_DIR) : []
for (const file of files) {
  for (const line of fs.readFileSync(path.join(TEST_LOG_DIR, file), 'utf8').split('\n')) {
    if (!line) continue
    lines++
    const found = findSecrets(line)
    if (found.length > 0) leaks.push(`${file}: ${found.join(', ')}: ${line.slice(0, 300)}`)
  }
}
if (lines === 0) {
  // The whole suite always logs; a run of a few test files that start no server (the PostgreSQL
  // engine's, say) has nothing to scan. Under CI, where the whole suite runs, nothing captured
  // means the mirror is broken, and fails the run.
  if (process.env.CI === 'true' || files.length > 0) {
    console.error(`log scan: no log lines were captured from ${files.length} process(es); the mirror is broken`)
    process.exit(1)
  }
  console.log('# log scan: no process logged in this run (none started a server?): nothing to scan')
  process.exit(0)
}
if (leaks.length > 0) {
  console.error(`log scan: ${leaks.length} log line(s) leak credentials:\n${leaks.slice(0, 20).join('\n')}`)
  process.exit(1)
}
console.log(`# log scan: ${lines} log lines from ${files.length} process(es), no key, token or secret`)
