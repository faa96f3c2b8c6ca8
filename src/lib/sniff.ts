import type { FileType } from './file-types'

const startsWith = (head: Buffer, bytes: number[] | string, offset = 0): boolean => {
  const sig = typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : Buffer.from(bytes)
  return head.length >= offset + sig.length && head.subarray(offset, offset + sig.length).equals(sig)
}

/** ISO-BMFF (HEIF) `ftyp` box whose major or a compatible brand is AVIF (`avif` image, `avis` sequence). */
function isAvif(head: Buffer): boolean {
  if (!startsWith(head, 'ftyp', 4) || head.length < 12) return false
  const boxSize = head.readUInt32BE(0)
  const end = Math.min(head.length, boxSize >= 16 ? boxSize : 16)
  const brands = [head.subarray(8, 12).toString('latin1')]
  for (let i = 16; i + 4 <= end; i += 4) brands.push(head.subarray(i, i + 4).toString('latin1'))
  return brands.includes('avif') || brands.includes('avis')
}

const SIGNATURES: Record<FileType, (head: Buffer) => boolean> = {
  'image/jpeg': (h) => startsWith(h, [0xff, 0xd8, 0xff]),
  'image/png': (h) => startsWith(h, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  'image/gif': (h) => startsWith(h, 'GIF87a') || startsWith(h, 'GIF89a'),
  'image/webp': (h) => startsWith(h, 'RIFF') && startsWith(h, 'WEBP', 8),
  'image/avif': isAvif,
  'application/pdf': (h) => startsWith(h, '%PDF-'),
}

/** Whether `type` has a signature the first bytes must carry: the spec's six do; any other type is taken as declared. */
export function hasKnownSignature(type: string): type is FileType {
  return Object.hasOwn(SIGNATURES, type)
}

/** True when the first bytes of a file carry the signature ("magic bytes") of `type`. */
export function hasSignature(type: FileType, head: Buffer): boolean {
  return SIGNATURES[type](head)
}

/** The supported type whose signature the first bytes carry, or undefined: the type of a file from its content. */
export function detectType(head: Buffer): FileType | undefined {
  return (Object.keys(SIGNATURES) as FileType[]).find((t) => SIGNATURES[t](head))
}
