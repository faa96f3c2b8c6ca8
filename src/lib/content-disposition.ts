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
 * Not the `content-disposition` package (#11 asked for it): the API promises the header with both
 * parameters, always (`filename` in ASCII and `filename*` in UTF-8), and the package omits `filename*` for plain-ASCII names (and, without a
 * fallback, puts raw Latin-1 bytes in `filename`); test/security.test.ts and downloads.test.ts
 * assert the exact header.
 */
export function contentDisposition(fileName: string, type: 'attachment' | 'inline' = 'attachment'): string {
  const fallback = [...fileName].map((ch) => (/^[\x20-\x7e]$/.test(ch) && !/["\\%]/.test(ch) ? ch : '_')).join('') || 'download'
  return `${type}; filename="${fallback}"; filename*=UTF-8''${encodeExtValue(fileName)}`
}

/** RFC 9110 media type essence (`type/subtype`, tokens); anything else is not a type we can judge. */
const ESSENCE = /^([!#$%&'*+.^_`|~0-9a-z-]+)\/([!#$%&'*+.^_`|~0-9a-z-]+)$/

/**
 * Whether a stored Content-Type may be shown inline on the API's origin (#24): only types a browser
 * displays without running anything of the content's (raster images, audio, video, PDF, plain
 * text). Everything else is an attachment even when `?disposition=inline` asks: HTML, XHTML, SVG
 * and every XML type (an XML document may carry XHTML and script), JavaScript, CSS, XSLT,
 * multipart and message types, and types a browser does not know. An allow-list, not a deny-list:
 * S3 writes store any Content-Type, and a type missing from a deny-list would be rendered.
 *
 * The whole header value must be one media type: a browser reading `image/png, text/html` takes
 * the last of the comma-separated types (WHATWG Fetch, "extract a MIME type"), so any comma, even
 * inside a quoted parameter, makes it an attachment.
 */
export function showsInline(contentType: string): boolean {
  if (contentType.includes(',')) return false
  const essence = contentType.split(';', 1)[0]!.trim().toLowerCase()
  const parts = essence.match(ESSENCE)
  if (!parts) return false
  const [type, subtype] = [parts[1]!, parts[2]!]
  if (type === 'image' || type === 'audio' || type === 'video') return !subtype.includes('xml') && !subtype.includes('svg')
  return essence === 'application/pdf' || essence === 'text/plain'
}

/** The disposition the API answers: what was asked, but never inline for a type that is not showsInline. */
export function dispositionFor(fileName: string, contentType: string, requested: 'attachment' | 'inline' = 'attachment'): string {
  return contentDisposition(fileName, requested === 'inline' && showsInline(contentType) ? 'inline' : 'attachment')
}
