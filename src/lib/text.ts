/**
 * What a stored string may contain (#12 item 13). Refused everywhere (names, file names, tags,
 * context, webhook URLs, metadata strings): characters that are invisible or that change how the
 * text around them is shown, so a stored string cannot forge rows in a terminal, reorder what a
 * reader sees, or hide a difference between two names:
 * - control characters: C0 U+0000–U+001F, DEL U+007F, C1 U+0080–U+009F;
 * - bidirectional controls: U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069;
 * - invisible format characters: U+180E, U+200B, U+2060–U+2064, U+206A–U+206F, U+FEFF (BOM),
 *   U+FFF9–U+FFFB; line and paragraph separators U+2028, U+2029; non-characters U+FFFE, U+FFFF;
 * - lone surrogates (not text at all).
 * Kept: U+200C and U+200D (zero-width non-joiner and joiner), which Persian, Indic scripts and
 * emoji sequences need.
 */
const UNSAFE_CLASS =
  '\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u180e\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ufeff\\ufff9-\\ufffb\\ufffe\\uffff\\ud800-\\udfff'

/**
 * One allowed character of a pattern whose class refuses `excluded` (and every surrogate), or a
 * surrogate pair: the same in ajv (`u` flag, where a pair is one code point) and in TypeBox's
 * Value checks (no flag, where it is two code units), so astral characters (emoji) pass both.
 */
const allowedChar = (excluded: string) => `(?:[^${excluded}]|[\\ud800-\\udbff][\\udc00-\\udfff])`

/**
 * Look-alikes of the path and drive separators, refused in file names besides `/ \ : ` and the
 * other ASCII characters the contract names: U+2044 FRACTION SLASH, U+2215 DIVISION SLASH,
 * U+2216 SET MINUS, U+2236 RATIO, U+29F5 REVERSE SOLIDUS OPERATOR, U+29F8 BIG SOLIDUS,
 * U+29F9 BIG REVERSE SOLIDUS, U+FE68 SMALL REVERSE SOLIDUS, U+FF0F FULLWIDTH SOLIDUS,
 * U+FF1A FULLWIDTH COLON, U+FF3C FULLWIDTH REVERSE SOLIDUS.
 */
const SEPARATOR_LOOKALIKES = '\\u2044\\u2215\\u2216\\u2236\\u29f5\\u29f8\\u29f9\\ufe68\\uff0f\\uff1a\\uff3c'

/** JSON Schema `pattern` (ajv compiles it with the `u` flag): a string with no unsafe character. */
export const SAFE_TEXT_PATTERN = `^${allowedChar(UNSAFE_CLASS)}*$`

/**
 * fileName (contract): no control characters, none of / \ < > : " | ? *, not `.` or `..`; and,
 * like every stored string, nothing from UNSAFE_CLASS; and no look-alike separator.
 */
export const FILE_NAME_PATTERN = `^(?!\\.{1,2}$)${allowedChar(`${UNSAFE_CLASS}/\\\\<>:"|?*${SEPARATOR_LOOKALIKES}`)}+$`

const SAFE_TEXT = new RegExp(SAFE_TEXT_PATTERN, 'u')

/** The contract's fileName length limit (contract/files.ts). */
export const FILE_NAME_MAX = 255

const FILE_NAME = new RegExp(FILE_NAME_PATTERN, 'u')

/** Every character FILE_NAME_PATTERN refuses, one at a time (a lone surrogate is one match). */
const NOT_IN_FILE_NAME = new RegExp(`[${UNSAFE_CLASS}<>:"|?*${SEPARATOR_LOOKALIKES}]`, 'gu')

/** Code points in `s`: what ajv's maxLength counts (an emoji is one character, not two). */
const codePoints = (s: string): number => {
  let n = 0
  for (const _ of s) n++
  return n
}

/** True when `s` is a fileName the upload handshake accepts: FILE_NAME_PATTERN, 1–255 characters. */
export function isFileName(s: string): boolean {
  return s.length >= 1 && FILE_NAME.test(s) && codePoints(s) <= FILE_NAME_MAX
}

/**
 * A file name the handshake would accept, made from a path that may hold anything (#24): an S3 key,
 * or the name a server put in Content-Disposition. The name is the last segment, `/` and `\` both
 * separating (a key written on Windows, `..\..\win.ini`, is named `win.ini`) and `.` and `..`
 * segments skipped (`a/.` is `a`); every character a fileName refuses becomes `_` (so
 * `invoice\u202Efdp.exe` is `invoice_fdp.exe`: the hidden reordering shows); the result is cut to
 * 255 characters (code points, as the handshake counts them). A path with no segment left (`/`, `..`)
 * takes `fallback` through the same steps, and `object` when that has none either.
 */
export function toFileName(path: string, fallback: string): string {
  for (const candidate of [path, fallback]) {
    const segment = candidate.split(/[/\\]/).findLast((s) => s !== '' && s !== '.' && s !== '..')
    if (segment === undefined) continue
    const name = segment.replace(NOT_IN_FILE_NAME, '_')
    // Lone surrogates are gone, so the name is whole code points: cut after the 255th.
    return name.length <= FILE_NAME_MAX ? name : [...name].slice(0, FILE_NAME_MAX).join('')
  }
  return 'object'
}

/** True when `s` contains no character refused in stored strings. */
export function isSafeText(s: string): boolean {
  return SAFE_TEXT.test(s)
}

/** Every string (object keys included) inside a JSON value is safe text; walked without recursion. */
export function isSafeJson(value: unknown): boolean {
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (typeof v === 'string') {
      if (!isSafeText(v)) return false
    } else if (Array.isArray(v)) for (const item of v as unknown[]) stack.push(item)
    else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (!isSafeText(k)) return false
        stack.push(child)
      }
    }
  }
  return true
}

/** The string with every unsafe character shown as a `\u{…}` escape: for terminal output. */
export function escapeUnsafe(s: string): string {
  return s.replace(new RegExp(`[${UNSAFE_CLASS}]`, 'gu'), (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`)
}

/**
 * JSON.stringify for a terminal: the same JSON value, with every unsafe character that JSON leaves
 * raw (DEL, C1 controls, bidi and invisible formatting characters; C0 and lone surrogates it
 * already escapes) written as a `\uXXXX` escape, so `--json` output cannot drive a terminal either.
 */
export function terminalJson(value: unknown): string {
  return JSON.stringify(value).replace(new RegExp(`[${UNSAFE_CLASS}]`, 'gu'), (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/**
 * The key two tenant names are compared by (#12 item 12): NFC-normalised and case-folded, so
 * `Äpfel`, `äPFEL` and the NFD spelling of either are one name, and so are `ΟΔΟΣ`, `οδος`
 * and `οδοσ` (final sigma). Folding is upper-casing then lower-casing with the full Unicode
 * mappings (`ß` and `SS` meet as `ss`), which also merges a few pairs that Unicode case folding
 * keeps apart (Turkish dotless `ı` with `i`): for names that must not be confused, erring on the
 * side of "the same" is the safe side.
 */
export function nameKey(name: string): string {
  return name
    .normalize('NFC')
    .toUpperCase()
    .toLowerCase()
    .normalize('NFC')
    .replace(/\u03c2/g, '\u03c3')
}
