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

export type Entry<R = ObjectRow> = { kind: 'object'; row: R } | { kind: 'prefix'; prefix: string }

export interface ListResult<R = ObjectRow> {
  entries: Entry<R>[]
  truncated: boolean
  /** The last row or common prefix returned: where the next page starts (exclusive). */
  last: Entry<R> | undefined
}

/** Rows read per query; a common prefix ends a query early (the next one seeks past it). */
const BATCH = 256

/**
 * A listing in key order, one range scan at a time: rows from `from` (inclusive) or after the
 * cursor `after` (exclusive), below `below`. Objects are ordered by key, multipart uploads by
 * (key, upload id): the cursor is whatever the order needs past a key.
 */
export interface KeyRange<C> {
  after?: C
  from?: string
  below?: string
}
export interface KeysetSource<R, C> {
  /** Rows are consumed lazily: the listing stops reading at a common prefix. */
  fetch(range: KeyRange<C>, limit: number): Iterable<R>
  key(row: R): string
  cursor(row: R): C
}

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
  const source: KeysetSource<ObjectRow, string> = {
    fetch: (range, limit) => repo.page(workspaceId, range, limit),
    key: (row) => row.key,
    cursor: (row) => row.key,
  }
  return rollupPage(source, { ...q, after: q.after === undefined ? undefined : { key: q.after, cursor: q.after } })
}

/**
 * The listing algorithm of ListObjects and ListMultipartUploads: `after` resumes past a row (its
 * key and cursor); resuming inside a common prefix (its key rolls up) skips the rest of it, as a
 * marker naming a common prefix of the previous page means.
 */
export function rollupPage<R, C>(
  source: KeysetSource<R, C>,
  q: { prefix: string; delimiter: string; after: { key: string; cursor: C } | undefined; maxKeys: number },
): ListResult<R> {
  const { prefix, delimiter, maxKeys } = q
  const entries: Entry<R>[] = []
  if (maxKeys === 0) return { entries, truncated: false, last: undefined }
  const below = prefix === '' ? undefined : prefixEnd(prefix)
  let after = q.after !== undefined && utf8Compare(q.after.key, prefix) >= 0 ? q.after.cursor : undefined
  let from: string | undefined = prefix === '' ? undefined : prefix
  // Resuming after a common prefix (or a key inside one) skips the rest of it.
  if (after !== undefined && delimiter !== '') {
    const cp = commonPrefix(q.after!.key, prefix, delimiter)
    if (cp !== undefined) {
      from = prefixEnd(cp)
      after = undefined
      if (from === undefined) return { entries, truncated: false, last: undefined }
    }
  }
  for (;;) {
    const want = Math.min(BATCH, maxKeys + 1 - entries.length)
    const rows = source.fetch(
      { ...(after !== undefined ? { after } : {}), ...(from !== undefined ? { from } : {}), ...(below !== undefined ? { below } : {}) },
      want,
    )
    let read = 0
    let sought = false
    for (const row of rows) {
      read++
      if (entries.length > maxKeys) break
      const cp = delimiter === '' ? undefined : commonPrefix(source.key(row), prefix, delimiter)
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
      after = source.cursor(row)
    }
    if (entries.length > maxKeys) break
    if (!sought && read < want) break
  }
  return finish(entries, maxKeys)
}

function finish<R>(entries: Entry<R>[], maxKeys: number): ListResult<R> {
  const truncated = entries.length > maxKeys
  const page = entries.slice(0, maxKeys)
  return { entries: page, truncated, last: page.at(-1) }
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
