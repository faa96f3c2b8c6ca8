import type { ObjectRow, ObjectsRepo } from '../db/repos/objects'

/**
 * The smallest string greater, in UTF-8 binary order, than every string starting with `prefix`:
 * the prefix with its last code point incremented (UTF-8 preserves code point order). Undefined
 * when no such string exists (the prefix is empty or all U+10FFFF).
 */
export function prefixEnd(prefix: string): string | undefined {
  const cps = [...prefix]
  while (cps.length > 0) {
    const last = cps.pop()!.codePointAt(0)!
    if (last < 0x10ffff) {
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1
      return cps.join('') + String.fromCodePoint(next)
    }
  }
  return undefined
}

export type Entry = { kind: 'object'; row: ObjectRow } | { kind: 'prefix'; prefix: string }

export interface ListResult {
  entries: Entry[]
  truncated: boolean
  /** The last key or common prefix returned: where the next page starts (exclusive). */
  last: string | undefined
}

/** Rows read per query; a common prefix ends a query early (the next one seeks past it). */
const BATCH = 256

/**
 * One page of a bucket listing in UTF-8 binary key order, with S3's prefix/delimiter semantics:
 * keys containing the delimiter after the prefix roll up into one common prefix each. Keyset all
 * the way: each query is a range scan of the (workspace, key) index that starts where the page
 * (or the common prefix just emitted) ends, so a page costs the same at any depth and the keys
 * under a common prefix are skipped with one seek, not read.
 */
export function listPage(
  repo: ObjectsRepo,
  workspaceId: string,
  q: { prefix: string; delimiter: string; after: string | undefined; maxKeys: number },
): ListResult {
  const { prefix, delimiter, maxKeys } = q
  const entries: Entry[] = []
  if (maxKeys === 0) return { entries, truncated: false, last: undefined }
  const below = prefix === '' ? undefined : prefixEnd(prefix)
  let after = q.after !== undefined && utf8Compare(q.after, prefix) >= 0 ? q.after : undefined
  let from: string | undefined = prefix === '' ? undefined : prefix
  // Resuming after a common prefix (or a key inside one) skips the rest of it.
  if (after !== undefined && delimiter !== '') {
    const cp = commonPrefix(after, prefix, delimiter)
    if (cp !== undefined) {
      from = prefixEnd(cp)
      after = undefined
      if (from === undefined) return { entries, truncated: false, last: undefined }
    }
  }
  for (;;) {
    const want = Math.min(BATCH, maxKeys + 1 - entries.length)
    const rows = repo.page(
      workspaceId,
      { ...(after !== undefined ? { after } : {}), ...(from !== undefined ? { from } : {}), ...(below !== undefined ? { below } : {}) },
      want,
    )
    if (rows.length === 0) break
    let sought = false
    for (const row of rows) {
      if (entries.length > maxKeys) break
      const cp = delimiter === '' ? undefined : commonPrefix(row.key, prefix, delimiter)
      if (cp !== undefined) {
        entries.push({ kind: 'prefix', prefix: cp })
        const next = prefixEnd(cp)
        if (next === undefined) return finish(entries, maxKeys)
        from = next
        after = undefined
        sought = true
        break
      }
      entries.push({ kind: 'object', row })
      after = row.key
    }
    if (entries.length > maxKeys) break
    if (!sought && rows.length < want) break
  }
  return finish(entries, maxKeys)
}

function finish(entries: Entry[], maxKeys: number): ListResult {
  const truncated = entries.length > maxKeys
  const page = entries.slice(0, maxKeys)
  const lastEntry = page.at(-1)
  return { entries: page, truncated, last: lastEntry === undefined ? undefined : lastEntry.kind === 'object' ? lastEntry.row.key : lastEntry.prefix }
}

/** The common prefix `key` rolls up into, or undefined when it has no delimiter after the prefix. */
function commonPrefix(key: string, prefix: string, delimiter: string): string | undefined {
  if (!key.startsWith(prefix)) return undefined
  const i = key.indexOf(delimiter, prefix.length)
  return i < 0 ? undefined : key.slice(0, i + delimiter.length)
}

/** S3's key order: UTF-8 bytes, which JavaScript's UTF-16 comparison does not follow above U+FFFF. */
export function utf8Compare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b))
}
