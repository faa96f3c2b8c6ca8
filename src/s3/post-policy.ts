import { S3Error } from './errors'

/**
 * The policy document of a browser form upload (Amazon S3 API reference, "Creating a POST policy"):
 * base64 JSON with an `expiration` and `conditions`, each an exact match (`{"acl": "private"}` or
 * `["eq", "$acl", "private"]`), a prefix (`["starts-with", "$key", "user/"]`) or the file's size
 * range (`["content-length-range", min, max]`). Every form field must be covered by a condition,
 * except those AWS exempts.
 */

type Condition = { op: 'eq' | 'starts-with'; field: string; value: string } | { op: 'range'; min: number; max: number }

export interface PostPolicy {
  expiration: number
  conditions: Condition[]
  /** The content-length-range's bounds, when the policy has one. */
  size?: { min: number; max: number }
}

const invalid = (why: string) => new S3Error('InvalidPolicyDocument', `Invalid Policy: ${why}`)
const refused = (why: string) => new S3Error('AccessDenied', `Invalid according to Policy: ${why}`)

/** ISO 8601 as AWS accepts it in a policy: a UTC date and time, optional fraction. */
const EXPIRATION = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/

function bound(v: unknown): number {
  const n = typeof v === 'string' && /^\d{1,16}$/.test(v) ? Number(v) : v
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw invalid('Invalid content-length-range bound.')
  return n
}

/** Parses and checks the shape of a policy (400 InvalidPolicyDocument for any defect). */
export function parsePostPolicy(base64: string): PostPolicy {
  let doc: unknown
  try {
    if (!/^[A-Za-z0-9+/=\s]*$/.test(base64)) throw new Error('not base64')
    doc = JSON.parse(Buffer.from(base64, 'base64').toString('utf8'))
  } catch {
    throw invalid('Invalid JSON.')
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw invalid('Invalid JSON.')
  const d = doc as Record<string, unknown>
  // Keys are case-sensitive (ceph/s3-tests' test_post_object_expires_is_case_sensitive).
  if (d.expiration === undefined) throw invalid('Policy missing expiration.')
  if (typeof d.expiration !== 'string' || !EXPIRATION.test(d.expiration) || Number.isNaN(Date.parse(d.expiration))) {
    throw invalid("Invalid 'expiration' value: must be an ISO 8601 date and time in UTC.")
  }
  if (!Array.isArray(d.conditions)) throw invalid('Policy missing conditions.')
  const conditions: Condition[] = []
  let size: { min: number; max: number } | undefined
  for (const c of d.conditions as unknown[]) {
    if (Array.isArray(c)) {
      const op = typeof c[0] === 'string' ? c[0].toLowerCase() : ''
      if (op === 'content-length-range') {
        if (c.length !== 3) throw invalid('Invalid content-length-range condition: it takes a minimum and a maximum.')
        const min = bound(c[1])
        const max = bound(c[2])
        if (min > max) throw invalid('Invalid content-length-range condition: the minimum is over the maximum.')
        size = { min: Math.max(min, size?.min ?? 0), max: Math.min(max, size?.max ?? max) }
        conditions.push({ op: 'range', min, max })
        continue
      }
      if ((op !== 'eq' && op !== 'starts-with') || c.length !== 3 || typeof c[1] !== 'string' || typeof c[2] !== 'string' || !c[1].startsWith('$')) {
        throw invalid(`Invalid condition: ${JSON.stringify(c).slice(0, 200)}`)
      }
      conditions.push({ op, field: c[1].slice(1).toLowerCase(), value: c[2] })
    } else if (c !== null && typeof c === 'object') {
      const entries = Object.entries(c as Record<string, unknown>)
      if (entries.length !== 1 || typeof entries[0]![1] !== 'string') throw invalid(`Invalid condition: ${JSON.stringify(c).slice(0, 200)}`)
      const [field, value] = entries[0] as [string, string]
      conditions.push({ op: 'eq', field: field.replace(/^\$/, '').toLowerCase(), value })
    } else throw invalid(`Invalid condition: ${JSON.stringify(c).slice(0, 200)}`)
  }
  return { expiration: Date.parse(d.expiration), conditions, ...(size ? { size } : {}) }
}

/**
 * Form fields every form may carry without a condition: AWS's (the signature, the file, the
 * policy, x-ignore-*), and a checksum of the file, which only holds the upload to its bytes (as
 * Ceph RGW takes it: ceph/s3-tests' test_post_object_upload_checksum).
 */
function exempt(name: string): boolean {
  return (
    name === 'x-amz-signature' ||
    name === 'signature' ||
    name === 'awsaccesskeyid' ||
    name === 'file' ||
    name === 'policy' ||
    name.startsWith('x-ignore-') ||
    (name.startsWith('x-amz-checksum-') && name !== 'x-amz-checksum-algorithm')
  )
}

/**
 * Checks the form's fields (lower-case names; `bucket` is the addressed bucket, `key` after
 * `${filename}`) against the policy: 403 AccessDenied for a failed condition, an expired policy
 * or a field no condition covers.
 */
export function checkPostPolicy(policy: PostPolicy, fields: ReadonlyMap<string, string>, now: number): void {
  if (policy.expiration <= now) throw refused('Policy expired.')
  const covered = new Set<string>()
  for (const c of policy.conditions) {
    if (c.op === 'range') continue
    covered.add(c.field)
    const value = fields.get(c.field)
    const failed = () => refused(`Policy Condition failed: ["${c.op}", "$${c.field}", ${JSON.stringify(c.value)}]`)
    // An empty prefix holds for any value, an absent field's too (as AWS and Ceph RGW take it:
    // ceph/s3-tests' test_sse_s3_default_post_object_authenticated_request, #27).
    if (value === undefined && c.op === 'starts-with' && c.value === '') continue
    if (value === undefined) throw failed()
    if (c.op === 'eq') {
      if (value !== c.value) throw failed()
    } else {
      // A Content-Type may list several types, each of which must have the prefix (AWS).
      const values = c.field === 'content-type' ? value.split(',').map((v) => v.trim()) : [value]
      if (!values.every((v) => v.startsWith(c.value))) throw failed()
    }
  }
  for (const name of fields.keys()) {
    if (name === 'bucket' || exempt(name) || covered.has(name)) continue
    throw refused(`Extra input fields: ${name}`)
  }
}
