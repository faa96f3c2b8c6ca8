/** RFC 8187 attr-char: what may stand unencoded in `filename*`. */
const ATTR_CHAR = /[A-Za-z0-9!#$&+\-.^_`|~]/

/** Percent-encodes UTF-8 for an RFC 8187 ext-value. */
function encodeExtValue(value: string): string {
  let out = ''
  for (const ch of value) {
    if (ATTR_CHAR.test(ch)) out += ch
    else for (const byte of Buffer.from(ch, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

/**
 * `Content-Disposition` with an ASCII `filename` fallback for old clients and the exact name in
 * `filename*` (RFC 6266 §4.3, RFC 8187). The fallback keeps printable ASCII only and replaces
 * quotes, backslashes, `%` and anything else with `_`, so no header injection or quoting escape
 * is possible whatever the stored name holds.
 *
 * Not the `content-disposition` package (#11 asked for it): contract.md fixes the header as both
 * parameters, always, and the package omits `filename*` for plain-ASCII names (and, without a
 * fallback, puts raw Latin-1 bytes in `filename`); test/security.test.ts and downloads.test.ts
 * assert the exact header.
 */
export function contentDisposition(fileName: string, type: 'attachment' | 'inline' = 'attachment'): string {
  const fallback = [...fileName].map((ch) => (/^[\x20-\x7e]$/.test(ch) && !/["\\%]/.test(ch) ? ch : '_')).join('') || 'download'
  return `${type}; filename="${fallback}"; filename*=UTF-8''${encodeExtValue(fileName)}`
}
