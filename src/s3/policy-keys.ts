import type { Core } from '../core'
import type { BucketWorkspace as Workspace } from '../services/bucket-cache'
import type { Operation } from './operations'

/** What authorization reads of a request: its headers, client address and scheme. */
export type RequestFacts = {
  readonly headers: Record<string, string | string[] | undefined>
  readonly ip: string
  readonly protocol: string
}

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(',') : v)

/** Request headers that are condition keys of their own name (Service Authorization Reference, "Condition keys for Amazon S3"). */
const HEADER_KEYS = [
  'x-amz-acl',
  'x-amz-copy-source',
  'x-amz-metadata-directive',
  'x-amz-server-side-encryption',
  'x-amz-server-side-encryption-aws-kms-key-id',
  'x-amz-server-side-encryption-customer-algorithm',
] as const

/** Operations on an object's current content, whose s3:ExistingObjectTag/<key> are its tags. */
const EXISTING_OBJECT_OPS = new Set([
  'GetObject',
  'HeadObject',
  'GetObjectAcl',
  'PutObjectAcl',
  'GetObjectTagging',
  'PutObjectTagging',
  'DeleteObjectTagging',
  'DeleteObject',
])

/**
 * The condition keys of a request (services/bucket-policy.ts CONDITION_KEYS); absent ones are not
 * set. The object's tags are read only when a policy is there to be evaluated (`bucket`).
 */
export function conditionKeys(
  core: Core,
  request: RequestFacts,
  operation: Operation,
  target: { key: string | undefined; query: ReadonlyMap<string, string> },
  bucket: Workspace | undefined,
): Map<string, string> {
  const keys = new Map<string, string>()
  const set = (k: string, v: string | undefined) => {
    if (v !== undefined) keys.set(k, v)
  }
  set('aws:referer', one(request.headers.referer))
  set('aws:sourceip', request.ip)
  set('aws:useragent', one(request.headers['user-agent']))
  keys.set('aws:securetransport', request.protocol === 'https' ? 'true' : 'false')
  for (const h of HEADER_KEYS) set(`s3:${h}`, one(request.headers[h]))
  const { query } = target
  if (operation.name === 'ListObjects' || operation.name === 'ListObjectsV2') {
    // A listing without a prefix lists from the root: its s3:prefix is "" (so `"s3:prefix": ["", "home/"]` works).
    keys.set('s3:prefix', query.get('prefix') ?? '')
    set('s3:delimiter', query.get('delimiter'))
    set('s3:max-keys', query.get('max-keys'))
  }
  // s3:ExistingObjectTag/<key>: the named object's tags (the current version's; keys are case-insensitive as every condition key).
  if (bucket !== undefined && target.key !== undefined && EXISTING_OBJECT_OPS.has(operation.name)) {
    const versionId = query.get('versionId')
    const fileId = versionId === undefined ? undefined : core.s3.versions.byId(bucket.id, target.key, versionId)?.fileId
    const object = versionId === undefined ? core.s3.objectsRepo.get(bucket.id, target.key) : fileId && core.s3.objectsRepo.byFile(fileId)
    const tags = (object && object.info?.tags) ?? {}
    for (const [k, v] of Object.entries(tags)) keys.set(`s3:existingobjecttag/${k.toLowerCase()}`, v)
  }
  return keys
}
