import path from 'node:path'

export const SHA256_RE = /^[0-9a-f]{64}$/

/**
 * Where a blob lives under a blob root: `<root>/<aa>/<bb>/<sha256>`. Two levels of at most 256
 * directories keep every directory small however many blobs there are. The one definition of
 * the layout: the disk store and the backup's copy both use it.
 */
export function blobPath(root: string, sha256: string): string {
  if (!SHA256_RE.test(sha256)) throw new Error(`not a sha256: ${JSON.stringify(sha256).slice(0, 80)}`)
  const p = path.join(root, sha256.slice(0, 2), sha256.slice(2, 4), sha256)
  // Defence in depth: whatever reaches here must resolve inside the blob root.
  if (!p.startsWith(root + path.sep)) throw new Error('blob path escapes the store')
  return p
}
