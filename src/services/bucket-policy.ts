import { BlockList, isIP } from 'node:net'

/**
 * Bucket policies (#26): the IAM JSON policy grammar (IAM User Guide, "IAM JSON policy elements
 * reference") as far as Coffer can decide it exactly, compiled once and evaluated per request as
 * AWS does (an explicit Deny wins, then an Allow; nothing matching is no grant). Anything the
 * evaluator could not decide — an action no operation has, a condition key or operator it does not
 * know, a principal of another account, a policy variable — refuses the whole policy when it is
 * put (MalformedPolicy), so that no statement is ever silently ignored.
 */

/** Why a policy was refused: the S3 front answers 400 MalformedPolicy with this message. */
export class MalformedPolicyError extends Error {
  override name = 'MalformedPolicyError'
}

/**
 * Who a statement is about: everyone (`*`, anonymous included), the bucket owner's tenant only, or
 * no request at all (the log delivery service, whose writes are the owner's own, never a request).
 */
type Principal = 'any' | 'owner' | 'none'

/** The service principal AWS's server access log delivery grant names (S3 User Guide, "Permissions for log delivery"). */
const LOG_DELIVERY = 'logging.s3.amazonaws.com'

/**
 * A statement about `{"Service": "logging.s3.amazonaws.com"}` only, as AWS documents granting log
 * delivery into a target bucket. Coffer delivers access logs as the bucket owner (bucket-logging.ts),
 * so the grant is not needed: accepted, so that the policy AWS asks for can be put, and applied to
 * no request. Any other service principal is refused.
 */
function isLogDeliveryPrincipal(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const entries = Object.entries(value as Record<string, unknown>)
  if (!entries.some(([kind]) => kind === 'Service')) return false
  for (const [kind, ids] of entries) {
    if (kind !== 'Service') refuse('A Service principal beside other principals is not supported by Coffer')
    for (const id of strings(ids, 'Principal')) if (id !== LOG_DELIVERY) refuse(`Principal Service ${id} is not supported by Coffer`)
  }
  return true
}

interface Condition {
  /** The operator without its IfExists suffix, e.g. `StringLike`. */
  readonly op: string
  readonly ifExists: boolean
  /** The condition key, lower-cased (keys are case-insensitive). */
  readonly key: string
  readonly values: readonly string[]
  /** IpAddress / NotIpAddress: the values as a block list. */
  readonly ips?: BlockList
  /** IpAddress / NotIpAddress: the addresses the values name, as ranges of the one IPv6 space (ipRanges). */
  readonly ranges?: readonly Range[]
}

interface Statement {
  readonly effect: 'Allow' | 'Deny'
  readonly principal: Principal
  readonly actions: { readonly not: boolean; readonly patterns: readonly RegExp[] }
  readonly resources: { readonly not: boolean; readonly patterns: readonly RegExp[] }
  readonly conditions: readonly Condition[]
}

export interface CompiledPolicy {
  readonly statements: readonly Statement[]
  /** AWS's "public" (GetBucketPolicyStatus, BlockPublicPolicy, RestrictPublicBuckets). */
  readonly isPublic: boolean
}

/** What a request is, for the evaluator. */
export interface PolicyRequest {
  /** The bucket owner's tenant, or anyone else (another tenant, or anonymous). */
  readonly principal: 'owner' | 'other'
  /** The operation's IAM action (operations.ts), e.g. `s3:GetObject`. */
  readonly action: string
  /** `arn:aws:s3:::bucket` or `arn:aws:s3:::bucket/key`. */
  readonly resource: string
  /** Condition key (lower-case) → value; an absent key is not in the request. */
  readonly keys: ReadonlyMap<string, string>
}

/** AWS's maximum bucket policy size. */
export const MAX_POLICY_BYTES = 20 * 1024

type KeyType = 'string' | 'ip' | 'numeric' | 'bool'

/** The condition keys Coffer can decide exactly, with their types (lower-case: keys are case-insensitive). */
export const CONDITION_KEYS: ReadonlyMap<string, KeyType> = new Map<string, KeyType>([
  ['aws:referer', 'string'],
  ['aws:sourceip', 'ip'],
  ['aws:useragent', 'string'],
  ['aws:securetransport', 'bool'],
  ['s3:prefix', 'string'],
  ['s3:delimiter', 'string'],
  ['s3:max-keys', 'numeric'],
  ['s3:x-amz-acl', 'string'],
  ['s3:x-amz-copy-source', 'string'],
  ['s3:x-amz-metadata-directive', 'string'],
  ['s3:x-amz-server-side-encryption', 'string'],
  ['s3:x-amz-server-side-encryption-aws-kms-key-id', 'string'],
  ['s3:x-amz-server-side-encryption-customer-algorithm', 'string'],
])

/** `s3:ExistingObjectTag/<tag key>`: the named object's tag of that key (a string; absent when it has none). */
const EXISTING_OBJECT_TAG = 's3:existingobjecttag/'

/** The type of a condition key Coffer can decide, or undefined. */
function keyType(key: string): KeyType | undefined {
  if (key.startsWith(EXISTING_OBJECT_TAG) && key.length > EXISTING_OBJECT_TAG.length) return 'string'
  return CONDITION_KEYS.get(key)
}

const STRING_OPS = new Set(['StringEquals', 'StringNotEquals', 'StringEqualsIgnoreCase', 'StringNotEqualsIgnoreCase', 'StringLike', 'StringNotLike'])
const NUMERIC_OPS = new Set(['NumericEquals', 'NumericNotEquals', 'NumericLessThan', 'NumericLessThanEquals', 'NumericGreaterThan', 'NumericGreaterThanEquals'])
const IP_OPS = new Set(['IpAddress', 'NotIpAddress'])
/** Operators whose answer is the negation of a match: true when the key is absent (IAM, "Condition operators"). */
const NEGATED = new Set(['StringNotEquals', 'StringNotEqualsIgnoreCase', 'StringNotLike', 'NumericNotEquals', 'NotIpAddress'])

const STATEMENT_KEYS = new Set(['Sid', 'Effect', 'Principal', 'NotPrincipal', 'Action', 'NotAction', 'Resource', 'NotResource', 'Condition'])

const refuse = (why: string): never => {
  throw new MalformedPolicyError(why)
}

/** `*` and `?` wildcards (IAM's, in actions, resources and StringLike) as an anchored expression. */
function wildcard(pattern: string, flags = ''): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.')
  return new RegExp(`^${body}$`, `s${flags}`)
}

/** A string or an array of strings (a policy's list elements). */
function strings(value: unknown, what: string): string[] {
  const list = Array.isArray(value) ? value : [value]
  if (list.length === 0) refuse(`${what} is empty`)
  return list.map((v) => {
    if (typeof v === 'boolean' || typeof v === 'number') return String(v)
    if (typeof v !== 'string') return refuse(`${what} must be a string or a list of strings`)
    return v
  })
}

/** The owner in a principal: this tenant's id, its canonical user, or its account's root ARN. */
function principalOf(value: unknown, ownerId: string): Principal {
  if (value === '*') return 'any'
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return refuse('Invalid principal in policy')
  let any = false
  for (const [kind, ids] of Object.entries(value as Record<string, unknown>)) {
    if (kind !== 'AWS' && kind !== 'CanonicalUser') refuse(`Principal ${kind} is not supported by Coffer`)
    for (const id of strings(ids, 'Principal')) {
      if (id === '*' && kind === 'AWS') any = true
      else if (id !== ownerId && id !== `arn:aws:iam::${ownerId}:root`)
        refuse(`Invalid principal in policy: ${id} is not this bucket's owner (Coffer grants no other account)`)
    }
  }
  return any ? 'any' : 'owner'
}

function actionsOf(value: unknown, known: readonly string[]): RegExp[] {
  return strings(value, 'Action').map((a) => {
    if (a === '*') return /^.*$/s
    if (!/^s3:/i.test(a)) refuse(`Action ${a} is not an S3 action`)
    const re = wildcard(a, 'i')
    if (!known.some((k) => re.test(k))) refuse(`Action ${a} names no operation Coffer serves`)
    return re
  })
}

/**
 * A policy's resources, each `arn:aws:s3:::<bucket>[/<key pattern>]` of this bucket. The bucket may
 * be named as other tenants name it, `<tenant-id>:<bucket>` (Ceph RGW's form, which RGW also takes
 * as `arn:aws:s3::<tenant-id>:<bucket>`), the owner's id only: it is the same bucket, so a policy
 * written with the name its readers use means what it says.
 */
function resourcesOf(value: unknown, bucket: string, ownerId: string): RegExp[] {
  return strings(value, 'Resource').map((r) => {
    if (r.includes('${')) refuse(`Policy variables are not supported by Coffer: ${r}`)
    const tenanted = /^arn:aws:s3::([^:]+):(.*)$/s.exec(r)
    let rest: string
    if (r.startsWith('arn:aws:s3:::')) rest = r.slice('arn:aws:s3:::'.length)
    else if (tenanted && tenanted[1]!.toLowerCase() === ownerId.toLowerCase()) rest = tenanted[2]!
    else return refuse(`Policy has invalid resource: ${r}`)
    const slash = rest.indexOf('/')
    let bucketPart = slash < 0 ? rest : rest.slice(0, slash)
    const colon = bucketPart.indexOf(':')
    if (colon >= 0) {
      // A bucket name has no colon: what precedes one is a tenant, which must be the owner.
      if (bucketPart.slice(0, colon).toLowerCase() !== ownerId.toLowerCase()) refuse(`Policy has invalid resource: ${r} is not in bucket ${bucket}`)
      bucketPart = bucketPart.slice(colon + 1)
    }
    // As AWS: a bucket's policy may only name that bucket and its objects.
    if (!wildcard(bucketPart).test(bucket)) refuse(`Policy has invalid resource: ${r} is not in bucket ${bucket}`)
    return wildcard(`arn:aws:s3:::${bucketPart}${slash < 0 ? '' : rest.slice(slash)}`)
  })
}

function conditionsOf(value: unknown): Condition[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return refuse('Condition must be an object')
  const out: Condition[] = []
  for (const [opName, block] of Object.entries(value as Record<string, unknown>)) {
    if (opName.includes(':')) refuse(`Condition operator ${opName} (multi-valued keys) is not supported by Coffer`)
    const ifExists = opName.endsWith('IfExists')
    const op = ifExists ? opName.slice(0, -'IfExists'.length) : opName
    if (block === null || typeof block !== 'object' || Array.isArray(block)) refuse(`Condition ${opName} must be an object`)
    for (const [keyName, raw] of Object.entries(block as Record<string, unknown>)) {
      const key = keyName.toLowerCase()
      const type = keyType(key)
      if (type === undefined) refuse(`Condition key ${keyName} is not supported by Coffer`)
      const values = strings(raw, `Condition ${opName} ${keyName}`)
      for (const v of values) if (v.includes('${')) refuse(`Policy variables are not supported by Coffer: ${v}`)
      const fits =
        op === 'Null'
          ? !ifExists && values.every((v) => v === 'true' || v === 'false')
          : STRING_OPS.has(op)
            ? type === 'string'
            : NUMERIC_OPS.has(op)
              ? type === 'numeric' && values.every((v) => /^-?\d+(\.\d+)?$/.test(v))
              : IP_OPS.has(op)
                ? type === 'ip'
                : op === 'Bool'
                  ? type === 'bool' && values.every((v) => v === 'true' || v === 'false')
                  : refuse(`Condition operator ${opName} is not supported by Coffer`)
      if (!fits) refuse(`Condition operator ${opName} cannot be applied to ${keyName} as given`)
      out.push({ op, ifExists, key, values, ...(IP_OPS.has(op) ? { ips: blockList(values), ranges: ipRanges(values) } : {}) })
    }
  }
  return out
}

/** A CIDR of a condition checked: its address, family and prefix length; else MalformedPolicy. */
function cidrOf(v: string): { address: string; family: 4 | 6; bits: number } {
  const [address = '', bits, extra] = v.split('/')
  const family = isIP(address)
  const max = family === 4 ? 32 : 128
  if (family === 0 || address.includes('%') || extra !== undefined || (bits !== undefined && !/^\d{1,3}$/.test(bits)) || Number(bits ?? max) > max) {
    return refuse(`Invalid IP address or CIDR in condition: ${v}`)
  }
  return { address, family: family === 4 ? 4 : 6, bits: Number(bits ?? max) }
}

function blockList(values: readonly string[]): BlockList {
  const list = new BlockList()
  for (const v of values) {
    const { address, family, bits } = cidrOf(v)
    list.addSubnet(address, bits, family === 4 ? 'ipv4' : 'ipv6')
  }
  return list
}

/** An inclusive range of addresses in the one IPv6 space, where IPv4 is its IPv4-mapped block (::ffff:0:0/96). */
type Range = readonly [bigint, bigint]

const IPV4_BLOCK: Range = [0xffff_0000_0000n, 0xffff_ffff_ffffn]
const LAST = (1n << 128n) - 1n

/** An address as a number of the one IPv6 space: an IPv4 address as its IPv4-mapped IPv6 one. */
function addressNumber(address: string, family: 4 | 6): bigint {
  if (family === 4) return address.split('.').reduce((n, octet) => (n << 8n) | BigInt(Number(octet)), 0xffffn)
  let text = address
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const v4 = dotted[1]!.split('.').reduce((n, octet) => (n << 8) + Number(octet), 0)
    text = `${text.slice(0, dotted.index)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const groups = (part: string) => (part === '' ? [] : part.split(':'))
  const h = groups(head)
  const t = tail === undefined ? [] : groups(tail)
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t]
  return all.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n)
}

/**
 * The addresses condition values name, as sorted, merged ranges of the one IPv6 space: whatever
 * their spelling (a host part under a short prefix, leading zeros, `::0`, IPv4-mapped IPv6), two
 * values that name the same addresses give the same ranges, as Node's BlockList matches them.
 */
function ipRanges(values: readonly string[]): Range[] {
  const ranges = values.map((v): Range => {
    const { address, family, bits } = cidrOf(v)
    const size = 1n << BigInt((family === 4 ? 32 : 128) - bits)
    const first = addressNumber(address, family) & ~(size - 1n)
    return [first, first + size - 1n]
  })
  return merge(ranges)
}

function merge(ranges: readonly Range[]): Range[] {
  const sorted = [...ranges].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  const out: [bigint, bigint][] = []
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1]
    if (last && lo <= last[1] + 1n) last[1] = last[1] > hi ? last[1] : hi
    else out.push([lo, hi])
  }
  return out
}

/** The addresses in both sets of ranges. */
function intersect(a: readonly Range[], b: readonly Range[]): Range[] {
  const out: Range[] = []
  for (const [alo, ahi] of a) {
    for (const [blo, bhi] of b) {
      const lo = alo > blo ? alo : blo
      const hi = ahi < bhi ? ahi : bhi
      if (lo <= hi) out.push([lo, hi])
    }
  }
  return merge(out)
}

const covers = (set: readonly Range[], [lo, hi]: Range) => set.some(([a, b]) => a <= lo && b >= hi)

/**
 * Whether addresses that pass a statement's conditions are "everyone": every IPv4 address, or every
 * IPv6 one outside the IPv4-mapped block (a client may come over either).
 */
const everyone = (set: readonly Range[]) => covers(set, IPV4_BLOCK) || (covers(set, [0n, IPV4_BLOCK[0] - 1n]) && covers(set, [IPV4_BLOCK[1] + 1n, LAST]))

/**
 * AWS's "public" policy (S3 User Guide, "The meaning of public"): an Allow to everyone not limited
 * to a fixed set of source addresses. Only an `IpAddress` condition on `aws:SourceIp` limits it,
 * and only when the addresses it admits (all such conditions of the statement together) are not
 * everyone, however they are spelt (`1.2.3.4/0`, `0.0.0.0/00`, `::0/0`, `::ffff:0.0.0.0/96`, two
 * `/1` halves are all everyone). Nothing else the evaluator takes is proof: `NotIpAddress` admits
 * all but a few; Referer, User-Agent, SecureTransport and the request's own headers (a KMS key id
 * too: any client may name the owner's key) are whatever the client sends; an `…IfExists` condition
 * is not counted either.
 */
function allowsPublic(s: Statement): boolean {
  if (s.effect !== 'Allow' || s.principal !== 'any') return false
  let admitted: Range[] | undefined
  for (const c of s.conditions) {
    if (c.key !== 'aws:sourceip' || c.op !== 'IpAddress' || c.ifExists) continue
    admitted = admitted === undefined ? [...c.ranges!] : intersect(admitted, c.ranges!)
  }
  return admitted === undefined || everyone(admitted)
}

/** Parses and checks a bucket policy for `bucket` owned by `ownerId`; `actions` are the IAM actions of Coffer's operations. */
export function compilePolicy(text: string, bucket: string, ownerId: string, actions: readonly string[]): CompiledPolicy {
  if (Buffer.byteLength(text) > MAX_POLICY_BYTES) refuse(`Policies must be at most ${MAX_POLICY_BYTES} bytes`)
  let doc: unknown
  try {
    doc = JSON.parse(text)
  } catch {
    return refuse('Policies must be valid JSON')
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return refuse('Policies must be a JSON object')
  const { Version: version, Id: _id, Statement: statement, ...rest } = doc as Record<string, unknown>
  if (Object.keys(rest).length > 0) refuse(`Unknown policy element ${Object.keys(rest)[0]}`)
  if (version !== undefined && version !== '2012-10-17' && version !== '2008-10-17') refuse('The policy Version must be 2012-10-17 or 2008-10-17')
  if (statement === undefined) refuse('Missing required field Statement')
  const list = Array.isArray(statement) ? statement : [statement]
  if (list.length === 0) refuse('Statement is empty')
  const statements = list.map((s: unknown): Statement => {
    if (s === null || typeof s !== 'object' || Array.isArray(s)) return refuse('A Statement must be an object')
    const st = s as Record<string, unknown>
    for (const k of Object.keys(st)) if (!STATEMENT_KEYS.has(k)) refuse(`Unknown field ${k} in a statement`)
    if (st.Effect !== 'Allow' && st.Effect !== 'Deny') refuse('Effect must be Allow or Deny')
    if (st.NotPrincipal !== undefined) refuse('NotPrincipal is not supported by Coffer')
    if (st.Principal === undefined) refuse('Missing required field Principal')
    if ((st.Action === undefined) === (st.NotAction === undefined)) refuse('A statement needs exactly one of Action and NotAction')
    if ((st.Resource === undefined) === (st.NotResource === undefined)) refuse('A statement needs exactly one of Resource and NotResource')
    if (isLogDeliveryPrincipal(st.Principal)) {
      // Its conditions (aws:SourceArn, aws:SourceAccount) are about requests that never come: not compiled.
      if (st.Condition !== undefined && (st.Condition === null || typeof st.Condition !== 'object' || Array.isArray(st.Condition))) {
        refuse('Condition must be an object')
      }
      return {
        effect: st.Effect as 'Allow' | 'Deny',
        principal: 'none',
        actions: { not: st.Action === undefined, patterns: actionsOf(st.Action ?? st.NotAction, actions) },
        resources: { not: st.Resource === undefined, patterns: resourcesOf(st.Resource ?? st.NotResource, bucket, ownerId) },
        conditions: [],
      }
    }
    return {
      effect: st.Effect as 'Allow' | 'Deny',
      principal: principalOf(st.Principal, ownerId),
      actions: { not: st.Action === undefined, patterns: actionsOf(st.Action ?? st.NotAction, actions) },
      resources: { not: st.Resource === undefined, patterns: resourcesOf(st.Resource ?? st.NotResource, bucket, ownerId) },
      conditions: st.Condition === undefined ? [] : conditionsOf(st.Condition),
    }
  })
  return { statements, isPublic: statements.some(allowsPublic) }
}

const normalIp = (ip: string) => (ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip)

function conditionHolds(c: Condition, keys: ReadonlyMap<string, string>): boolean {
  const value = keys.get(c.key)
  if (c.op === 'Null') return c.values.some((v) => (v === 'true') === (value === undefined))
  if (value === undefined) return c.ifExists || NEGATED.has(c.op)
  const some = (f: (v: string) => boolean) => c.values.some(f)
  switch (c.op) {
    case 'StringEquals':
      return some((v) => v === value)
    case 'StringNotEquals':
      return !some((v) => v === value)
    case 'StringEqualsIgnoreCase':
      return some((v) => v.toLowerCase() === value.toLowerCase())
    case 'StringNotEqualsIgnoreCase':
      return !some((v) => v.toLowerCase() === value.toLowerCase())
    case 'StringLike':
      return some((v) => wildcard(v).test(value))
    case 'StringNotLike':
      return !some((v) => wildcard(v).test(value))
    case 'Bool':
      return some((v) => v === value)
    case 'IpAddress':
    case 'NotIpAddress': {
      const ip = normalIp(value)
      const family = isIP(ip)
      const hit = family !== 0 && c.ips!.check(ip, family === 4 ? 'ipv4' : 'ipv6')
      return c.op === 'IpAddress' ? hit : !hit
    }
    default: {
      const n = Number(value)
      if (!Number.isFinite(n)) return NEGATED.has(c.op)
      const cmp = {
        NumericEquals: (v: number) => n === v,
        NumericNotEquals: (v: number) => n !== v,
        NumericLessThan: (v: number) => n < v,
        NumericLessThanEquals: (v: number) => n <= v,
        NumericGreaterThan: (v: number) => n > v,
        NumericGreaterThanEquals: (v: number) => n >= v,
      }[c.op]!
      return c.op === 'NumericNotEquals' ? c.values.every((v) => cmp(Number(v))) : c.values.some((v) => cmp(Number(v)))
    }
  }
}

function applies(s: Statement, r: PolicyRequest): boolean {
  if (s.principal === 'none' || (s.principal === 'owner' && r.principal !== 'owner')) return false
  const action = s.actions.patterns.some((p) => p.test(r.action)) !== s.actions.not
  if (!action) return false
  const resource = s.resources.patterns.some((p) => p.test(r.resource)) !== s.resources.not
  return resource && s.conditions.every((c) => conditionHolds(c, r.keys))
}

/**
 * The policy's answer for a request, as IAM evaluates it: `deny` when any Deny statement applies,
 * else `allow` when an Allow does, else `none` (the policy neither grants nor refuses).
 */
export function evaluatePolicy(p: CompiledPolicy, r: PolicyRequest): 'allow' | 'deny' | 'none' {
  let allowed = false
  for (const s of p.statements) {
    if (!applies(s, r)) continue
    if (s.effect === 'Deny') return 'deny'
    allowed = true
  }
  return allowed ? 'allow' : 'none'
}
