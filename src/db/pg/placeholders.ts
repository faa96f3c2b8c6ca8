/**
 * Statements are written once with SQLite's parameters (`?` positional, `@name` named, as
 * better-sqlite3 binds them); PostgreSQL numbers its own (`$1`, `$2`, …). This rewrites the
 * first into the second outside string literals, quoted identifiers and comments, and says which
 * named parameter each number takes (the same name twice is the same number). A statement mixing
 * both kinds is refused, as better-sqlite3 refuses one. PostgreSQL's jsonb operators `?`, `?|`
 * and `?&` cannot be written in a shared statement: use jsonb_exists() and its siblings.
 */
export function toPgParams(sql: string): { text: string; names: string[] | undefined; count: number } {
  let out = ''
  let positional = 0
  const names: string[] = []
  let i = 0
  while (i < sql.length) {
    const c = sql[i]!
    const next = sql[i + 1]
    if (c === "'" || c === '"') {
      const end = closing(sql, i, c)
      out += sql.slice(i, end)
      i = end
    } else if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i)
      const stop = end === -1 ? sql.length : end
      out += sql.slice(i, stop)
      i = stop
    } else if (c === '/' && next === '*') {
      const end = sql.indexOf('*/', i + 2)
      const stop = end === -1 ? sql.length : end + 2
      out += sql.slice(i, stop)
      i = stop
    } else if (c === '?') {
      out += `$${++positional}`
      i++
    } else if (c === '@' && next !== undefined && /[A-Za-z_]/.test(next)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1))!
      let n = names.indexOf(m[0])
      if (n === -1) n = names.push(m[0]) - 1
      out += `$${n + 1}`
      i += 1 + m[0].length
    } else {
      out += c
      i++
    }
  }
  if (positional > 0 && names.length > 0) throw new Error('a statement cannot mix ? and @name parameters')
  return { text: out, names: names.length > 0 ? names : undefined, count: positional || names.length }
}

/** The index just past the quote that closes the one at `start` (a doubled quote is an escaped one). */
function closing(sql: string, start: number, quote: string): number {
  let i = start + 1
  for (;;) {
    const j = sql.indexOf(quote, i)
    if (j === -1) return sql.length
    if (sql[j + 1] === quote) i = j + 2
    else return j + 1
  }
}
