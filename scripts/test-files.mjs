#!/usr/bin/env node
// The test files of a suite, read from the files themselves: each test file's first line names the
// runs it belongs to beyond `npm test` (SQLite, content on disk), as `// @suites: TAG …`:
//   s3      also runs with content on the S3-compatible store (npm run test:s3)
//   pg      also runs on PostgreSQL in CI (npm run test:pg)
//   pg-all  passes on PostgreSQL too, run by npm run test:pg:all only (CI's time)
//   sqlite  npm test alone: it tests SQLite, the disk store or a thing of one process
// A file without the line fails test/suites.test.ts, so a new test cannot miss a run unnoticed.
//
//   node scripts/test-files.mjs TAG [TAG …]   prints the files carrying any of the tags
//   node scripts/test-files.mjs --check       names each file without the line or with an unknown tag; exit 1 if any
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const TAGS = ['s3', 'pg', 'pg-all', 'sqlite']
const testDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'test')

/** Every test file (relative to the repository) with the tags of its first line (undefined without one). */
export function suites() {
  return fs
    .readdirSync(testDir)
    .filter((f) => f.endsWith('.test.ts'))
    .sort()
    .map((f) => {
      const first = fs.readFileSync(path.join(testDir, f), 'utf8').split('\n', 1)[0]
      const m = /^\/\/ @suites: (.+)$/.exec(first)
      return { file: `test/${f}`, tags: m ? m[1].trim().split(/\s+/) : undefined }
    })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const wanted = process.argv.slice(2)
  if (wanted[0] === '--check') {
    const bad = suites().filter((s) => s.tags === undefined || s.tags.length === 0 || s.tags.some((t) => !TAGS.includes(t)))
    for (const s of bad) console.error(`${s.file}: its first line must be \`// @suites: TAG …\` with TAG one of ${TAGS.join(', ')}`)
    process.exit(bad.length > 0 ? 1 : 0)
  }
  const unknown = wanted.filter((t) => !TAGS.includes(t))
  if (wanted.length === 0 || unknown.length > 0) {
    console.error(`usage: node scripts/test-files.mjs TAG [TAG …], TAG one of ${TAGS.join(', ')}`)
    process.exit(2)
  }
  const files = suites().filter((s) => s.tags?.some((t) => wanted.includes(t)))
  console.log(files.map((s) => s.file).join(' '))
}
