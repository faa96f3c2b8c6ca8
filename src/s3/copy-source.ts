import { S3Error } from './errors'
import { decodePath } from './ops/context'

/** What `x-amz-copy-source` names: `[/]bucket/key[?versionId=…]`, percent-encoded. */
export interface CopySource {
  bucket: string
  key: string
  versionId?: string
  /** The source's query as a request's (its versionId), for authorizing its read. */
  query: ReadonlyMap<string, string>
}

export function copySourceOf(raw: string): CopySource {
  const [pathPart, queryPart] = raw.split('?', 2)
  let versionId: string | undefined
  if (queryPart !== undefined) {
    // The one parameter a copy source takes (AWS); anything else would be silently ignored.
    const m = /^versionId=([^&]*)$/.exec(queryPart)
    if (!m) throw new S3Error('InvalidArgument', 'The x-amz-copy-source query may only name a versionId', { ArgumentName: 'x-amz-copy-source' })
    versionId = decodePath(m[1]!)
  }
  const path = decodePath(pathPart!.replace(/^\//, ''))
  const slash = path.indexOf('/')
  if (slash <= 0 || slash === path.length - 1)
    throw new S3Error('InvalidArgument', 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey')
  const query = new Map(versionId !== undefined ? [['versionId', versionId]] : [])
  return { bucket: path.slice(0, slash), key: path.slice(slash + 1), ...(versionId !== undefined ? { versionId } : {}), query }
}
