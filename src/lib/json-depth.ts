/**
 * True when the JSON text nests arrays and objects deeper than `max`. A linear scan of the text
 * (brackets inside string literals skipped), run before parsing: a deep document never reaches
 * code that recurses over it (JSON.stringify, a serializer, a validator), which would exhaust the
 * stack and answer 500, possibly after a commit (#12 item 5). Malformed text is left to the parser.
 */
export function jsonDeeperThan(text: string, max: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c /* \ */) i++
      else if (c === 0x22 /* " */) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > max) return true
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--
  }
  return false
}

/** Nesting depth of a parsed JSON value, walked without recursion; stops counting past `max`. */
export function valueDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]]
  while (stack.length > 0) {
    const [v, d] = stack.pop()!
    if (v === null || typeof v !== 'object') continue
    if (d + 1 > max) return true
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1])
  }
  return false
}
