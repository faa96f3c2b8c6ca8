// @suites: sqlite
import t, { type Test } from 'tap'
import { configHelp } from '../src/config'
import { settingsTable } from '../src/cli/settings-table'
import { buildBundle, runCoffer } from './process-helper'
import { tempDir } from './helper'

buildBundle()

// `coffer --help`'s settings table: every row's columns apart, every description in one column (#24).

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** The row of `lines` for a setting, and where its description starts; fails unless each column is followed by at least one space. */
function checkRows(t: Test, lines: string[], rows: ReturnType<typeof configHelp>): void {
  const starts = new Set<number>()
  for (const row of rows) {
    const line = lines.find((l) => l.startsWith(`  ${row.env} `))
    if (!line) {
      t.fail(`${row.env} has a row`)
      continue
    }
    const cells = [row.env, row.flag, row.def].filter((c): c is string => c !== undefined)
    const m = new RegExp(`^  ${cells.map((c) => `${esc(c)} +`).join('')}(${esc(row.help)})$`).exec(line)
    t.ok(m, `${row.env}: at least one space after each column: ${line}`)
    if (m) starts.add(line.length - row.help.length)
  }
  t.equal(starts.size, 1, 'every description starts in the same column')
}

t.test('coffer --help: every setting row has its columns apart, descriptions aligned', async (t) => {
  const help = runCoffer(['--help'], { cwd: tempDir(t) })
  t.equal(help.status, 0)
  const lines = help.stdout.split('\n')
  checkRows(t, lines, configHelp())
  t.ok(
    lines.some((l) => /^ {2}COFFER_S3_MAX_OBJECT_BYTES +5368709120 +Largest/.test(l)),
    'the longest default is apart from its description',
  )
  t.ok(
    lines.some((l) => /^ {2}COFFER_BLOB_S3_REGION +--blob-s3-region +us-east-1 +Region/.test(l)),
    'the longest flag with a default',
  )
})

t.test('settingsTable: columns as wide as their widest cell, whatever the rows', async (t) => {
  const rows = [
    { env: 'A', help: 'no flag, no default' },
    { env: 'COFFER_A_RATHER_LONG_SETTING_NAME_INDEED', flag: '--a-very-long-flag-name-for-it', def: '123456789012345678', help: 'all three, long' },
    { env: 'B', flag: '--b', help: 'a flag' },
    { env: 'C', def: 'x', help: 'a default' },
  ]
  checkRows(t, settingsTable(rows).split('\n'), rows)
})
