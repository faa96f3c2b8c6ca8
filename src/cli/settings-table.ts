/** One row of `coffer --help`'s settings table (config.ts: configHelp). */
export interface SettingRow {
  env: string
  flag?: string
  def?: string
  help: string
}

/**
 * The settings table of `coffer --help`: each column as wide as its widest cell plus two spaces,
 * so that no cell runs into the next (fixed widths ran `5368709120Largest…` and
 * `--blob-s3-regionus-east-1` together, #24) and every description starts in the same column.
 */
export function settingsTable(rows: readonly SettingRow[], indent = '  '): string {
  const width = (cells: (string | undefined)[]) => Math.max(0, ...cells.map((c) => (c ?? '').length)) + 2
  const env = width(rows.map((r) => r.env))
  const flag = width(rows.map((r) => r.flag))
  const def = width(rows.map((r) => r.def))
  return rows.map((r) => `${indent}${r.env.padEnd(env)}${(r.flag ?? '').padEnd(flag)}${(r.def ?? '').padEnd(def)}${r.help}`).join('\n')
}
