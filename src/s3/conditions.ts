/** The `x-amz-copy-source-if-*` headers of CopyObject and UploadPartCopy. */
export interface Conditions {
  ifMatch: string | undefined
  ifNoneMatch: string | undefined
  ifModifiedSince: string | undefined
  ifUnmodifiedSince: string | undefined
}

const stripTag = (t: string) => t.trim().replace(/^W\//, '')

function tagListMatches(header: string, etag: string): boolean {
  if (header.trim() === '*') return true
  return header.split(',').some((t) => stripTag(t) === etag || stripTag(t) === etag.replace(/"/g, ''))
}

/**
 * The copy source's preconditions in RFC 9110 §13.2.2 order, as S3 applies them: If-Match (else
 * If-Unmodified-Since), then If-None-Match (else If-Modified-Since). For a copy any of them
 * failing is 412 (GetObject's own conditionals go through http/send-blob.ts).
 */
export function copySourceHolds(c: Conditions, etag: string, modifiedMs: number): boolean {
  const modified = Math.floor(modifiedMs / 1000) * 1000
  if (c.ifMatch !== undefined) {
    if (!tagListMatches(c.ifMatch, etag)) return false
  } else if (c.ifUnmodifiedSince !== undefined) {
    const t = Date.parse(c.ifUnmodifiedSince)
    if (!Number.isNaN(t) && modified > t) return false
  }
  if (c.ifNoneMatch !== undefined) {
    if (tagListMatches(c.ifNoneMatch, etag)) return false
  } else if (c.ifModifiedSince !== undefined) {
    const t = Date.parse(c.ifModifiedSince)
    if (!Number.isNaN(t) && modified <= t) return false
  }
  return true
}
