import { XMLParser, XMLValidator } from 'fast-xml-parser'
import { S3Error } from './errors'

export const S3_NS = 'http://s3.amazonaws.com/doc/2006-03-01/'

/** Largest XML request body accepted (DeleteObjects of 1000 keys of 1024 bytes fits with room). */
export const MAX_XML_BODY_BYTES = 2 * 1024 * 1024

// eslint-disable-next-line no-control-regex -- the characters XML 1.0 cannot carry literally, and CR
const AS_REFERENCE = /[\u0000-\u0008\u000B\u000C\u000D\u000E-\u001F\uFFFE\uFFFF]/g
const MARKUP = /[&<>"']/g
const ENTITY: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' }

/**
 * Escapes text for an XML element body. A key may hold characters XML 1.0 cannot carry (`\x01`,
 * `\x1b`): AWS writes them as numeric character references (`&#x1;`), which the AWS SDKs' parsers
 * read back as the character, so a listing names the real key (#24; dropping them named another).
 * CR is written `&#xD;` too, or XML's end-of-line handling would read `\r\n` back as `\n`.
 */
export function esc(text: string): string {
  return text.replace(MARKUP, (c) => ENTITY[c]!).replace(AS_REFERENCE, (c) => `&#x${c.charCodeAt(0).toString(16).toUpperCase()};`)
}

export type XmlValue = string | number | boolean | null | undefined | XmlNode | XmlNode[]
/** An element tree for rendering: keys are element names, arrays repeat the element. */
export interface XmlNode {
  [name: string]: XmlValue | XmlValue[]
}

function renderValue(name: string, value: XmlValue | XmlValue[]): string {
  if (value === undefined) return ''
  if (Array.isArray(value)) return value.map((v) => renderValue(name, v)).join('')
  if (value === null) return `<${name}/>`
  if (typeof value === 'object') return `<${name}>${renderChildren(value)}</${name}>`
  return `<${name}>${esc(String(value))}</${name}>`
}

function renderChildren(node: XmlNode): string {
  return Object.entries(node)
    .map(([k, v]) => renderValue(k, v))
    .join('')
}

/** A complete S3 response document: `<?xml …?><Root xmlns="…">…</Root>`. */
export function xmlDocument(root: string, body: XmlNode, namespace = true): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root}${namespace ? ` xmlns="${S3_NS}"` : ''}>${renderChildren(body)}</${root}>`
}

/** Elements that may repeat: always arrays, one occurrence too (a CORS configuration's rules and their lists). */
const ARRAYS = new Set(['Part', 'Object', 'Tag', 'CORSRule', 'AllowedOrigin', 'AllowedMethod', 'AllowedHeader', 'ExposeHeader'])

const parser = new XMLParser({
  ignoreAttributes: true,
  removeNSPrefix: true,
  // Keys such as "007" or "1e3" must stay strings.
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
  // References are decoded by textOf, once: the parser's decoder drops (XML 1.0) the character
  // references SDKs write for control characters and CR in keys (`&#x1;`, `&#x0D;`), so a
  // DeleteObjects named another key than the client's and answered it Deleted (#24).
  processEntities: false,
  isArray: (name) => ARRAYS.has(name),
})

/**
 * Parses a small XML request body into plain objects (elements → properties, repeated `Part`,
 * `Object` and `Tag` → arrays). Anything that is not well-formed XML, or declares a DOCTYPE (entity
 * expansion), is `MalformedXML`.
 */
export function parseXml(body: Buffer): Record<string, unknown> {
  const text = body.toString('utf8')
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw malformed()
  if (text.trim() === '' || XMLValidator.validate(text) !== true) throw malformed()
  try {
    // A CDATA section's text is literal: written as escaped text, so that textOf's decoding gives it back as is.
    return parser.parse(text.replace(/<!\[CDATA\[([\s\S]*?)\]\]>/g, (_, cdata: string) => esc(cdata))) as Record<string, unknown>
  } catch {
    throw malformed()
  }
}

export const malformed = () => new S3Error('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema.')

const PREDEFINED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }

/** Element text with its references decoded: the five predefined entities and numeric character references. */
function decodeText(raw: string): string {
  return raw.replace(/&(?:#x([0-9A-Fa-f]{1,6})|#([0-9]{1,7})|([A-Za-z]+));/g, (_ref, hex?: string, dec?: string, name?: string) => {
    if (name !== undefined) {
      const c = PREDEFINED[name]
      if (c === undefined) throw malformed()
      return c
    }
    const cp = hex !== undefined ? parseInt(hex, 16) : Number(dec)
    if (cp === 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) throw malformed()
    return String.fromCodePoint(cp)
  })
}

/** A child element's text (references decoded), or undefined. */
export function textOf(node: unknown, name: string): string | undefined {
  if (node === null || typeof node !== 'object') return undefined
  const v = (node as Record<string, unknown>)[name]
  if (typeof v === 'string') return decodeText(v)
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  if (v === '' || (v !== null && typeof v === 'object' && Object.keys(v).length === 0)) return ''
  return undefined
}

/** A child element as an object (an empty element is an empty object), or undefined. */
export function childOf(node: unknown, name: string): Record<string, unknown> | undefined {
  if (node === null || typeof node !== 'object') return undefined
  const v = (node as Record<string, unknown>)[name]
  if (v === '') return {}
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
}

/** A repeated text element's values (references decoded), in order. */
export function textsOf(node: unknown, name: string): string[] {
  if (node === null || typeof node !== 'object') return []
  const v = (node as Record<string, unknown>)[name]
  if (!Array.isArray(v)) return []
  return (v as unknown[]).map((e) => {
    const text = textOf({ e }, 'e')
    if (text === undefined) throw malformed()
    return text
  })
}

/** A repeated child element as an array of objects. */
export function listOf(node: unknown, name: string): Record<string, unknown>[] {
  if (node === null || typeof node !== 'object') return []
  const v = (node as Record<string, unknown>)[name]
  if (!Array.isArray(v)) return []
  return v.map((e) => (e !== null && typeof e === 'object' ? (e as Record<string, unknown>) : {}))
}
