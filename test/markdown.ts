import fs from 'node:fs'
import path from 'node:path'

/** GitHub's anchor of each heading of a Markdown text: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2… */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  let fenced = false
  for (const line of text.split('\n')) {
    if (/^```/.test(line)) fenced = !fenced
    const m = !fenced && /^#{1,6} (.*)$/.exec(line)
    if (!m) continue
    const base = m[1]!
      .replace(/<[^>]+>/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/** The text outside fenced code blocks (links in code are not links). */
function prose(text: string): string {
  let fenced = false
  return text
    .split('\n')
    .filter((l) => {
      if (/^```/.test(l)) fenced = !fenced
      return !fenced && !/^```/.test(l)
    })
    .join('\n')
}

/**
 * The links of the Markdown file `file` (a path inside `root`) that do not resolve: a relative
 * link to a file that does not exist, or to a heading its target does not have; `#anchor` links
 * within the file too. Absolute URLs are not followed.
 */
export function brokenLinks(root: string, file: string): string[] {
  const text = prose(fs.readFileSync(path.join(root, file), 'utf8'))
  const broken: string[] = []
  const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g), ...text.matchAll(/\ssrc="([^"]+)"/g)].map((m) => m[1]!)
  for (const target of targets) {
    if (/^[a-z]+:/i.test(target)) continue
    const [rel, anchor] = target.split('#') as [string, string | undefined]
    const resolved = rel === '' ? path.join(root, file) : path.join(root, path.dirname(file), rel)
    if (!fs.existsSync(resolved)) {
      broken.push(`${file}: ${target} (no such file)`)
      continue
    }
    if (anchor !== undefined && resolved.endsWith('.md') && !anchors(fs.readFileSync(resolved, 'utf8')).has(anchor)) {
      broken.push(`${file}: ${target} (no such heading)`)
    }
  }
  return broken
}
