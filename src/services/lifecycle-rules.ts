import type { ObjectInfo } from '../db/repos/objects'

/**
 * A bucket's lifecycle configuration as stored (bucket_configs family 'lifecycle', #25): the rules
 * of PutBucketLifecycleConfiguration, validated, in the shape both fronts read. The filter keeps the
 * form the client used (the legacy top-level Prefix, or a Filter with a Prefix, a Tag, an And, or a
 * size bound) so that GetBucketLifecycleConfiguration answers what was put.
 */
export interface LifecycleConfiguration {
  rules: LifecycleRule[]
}

export interface Tag {
  key: string
  value: string
}

export interface LifecycleFilter {
  prefix?: string
  tag?: Tag
  sizeGreaterThan?: number
  sizeLessThan?: number
  and?: { prefix?: string; tags: Tag[]; sizeGreaterThan?: number; sizeLessThan?: number }
}

export interface LifecycleRule {
  id: string
  status: 'Enabled' | 'Disabled'
  /** The legacy form: a Prefix beside the actions, no Filter. */
  prefix?: string
  /** The current form; `{}` is an empty Filter (every object). */
  filter?: LifecycleFilter
  expiration?: { days?: number; date?: string; expiredObjectDeleteMarker?: boolean }
  noncurrentExpiration?: { noncurrentDays: number; newerNoncurrentVersions?: number }
  abortIncompleteMultipartUpload?: { daysAfterInitiation: number }
}

/** AWS's limit on rules per configuration. */
export const MAX_RULES = 1000
/** AWS's limit on a rule's ID. */
export const MAX_RULE_ID = 255

/** What a rule selects, flattened: a key prefix, tags that must all be on the object, size bounds (exclusive). */
export interface Selection {
  prefix: string
  tags: Tag[]
  sizeGreaterThan?: number
  sizeLessThan?: number
}

export function selectionOf(rule: LifecycleRule): Selection {
  const f = rule.filter
  if (f === undefined) return { prefix: rule.prefix ?? '', tags: [] }
  const a = f.and
  if (a !== undefined) {
    return { prefix: a.prefix ?? '', tags: a.tags, ...bounds(a) }
  }
  return { prefix: f.prefix ?? '', tags: f.tag ? [f.tag] : [], ...bounds(f) }
}

function bounds(f: { sizeGreaterThan?: number; sizeLessThan?: number }): Pick<Selection, 'sizeGreaterThan' | 'sizeLessThan'> {
  return {
    ...(f.sizeGreaterThan !== undefined ? { sizeGreaterThan: f.sizeGreaterThan } : {}),
    ...(f.sizeLessThan !== undefined ? { sizeLessThan: f.sizeLessThan } : {}),
  }
}

/**
 * The object's tags as the tagging work (#26) stores them: `tags` in its object_info, a map of key
 * to value. Until that lands no object has tags, so a rule with a Tag filter selects nothing (README).
 */
export function tagsOf(info: ObjectInfo | null): Record<string, string> {
  const tags = (info as { tags?: unknown } | null)?.tags
  if (tags === null || typeof tags !== 'object') return {}
  if (Array.isArray(tags)) {
    const out: Record<string, string> = {}
    for (const t of tags as { key?: unknown; Key?: unknown; value?: unknown; Value?: unknown }[]) {
      const k = t.key ?? t.Key
      const v = t.value ?? t.Value
      if (typeof k === 'string' && typeof v === 'string') out[k] = v
    }
    return out
  }
  return tags as Record<string, string>
}

/** True when the selection takes an object version of this key, size and stored info (a delete marker: size undefined). */
export function selects(s: Selection, key: string, size: number | undefined, info: ObjectInfo | null): boolean {
  if (!key.startsWith(s.prefix)) return false
  if (size === undefined) {
    // A delete marker has no tags and no size: only a rule of a prefix alone applies to it (AWS).
    return s.tags.length === 0 && s.sizeGreaterThan === undefined && s.sizeLessThan === undefined
  }
  if (s.sizeGreaterThan !== undefined && !(size > s.sizeGreaterThan)) return false
  if (s.sizeLessThan !== undefined && !(size < s.sizeLessThan)) return false
  if (s.tags.length > 0) {
    const have = tagsOf(info)
    if (!s.tags.every((t) => have[t.key] === t.value)) return false
  }
  return true
}

const DAY_MS = 86_400_000

/**
 * When an object created at `createdAt` expires under `days` lifecycle days. With real days (AWS) the
 * moment is rounded up to the next midnight UTC ("Lifecycle rules: based on an object's age"); with
 * a shortened day (COFFER_S3_LIFECYCLE_DAY_SECONDS, like RGW's rgw_lc_debug_interval) it is exact.
 */
export function expiryAt(createdAt: number, days: number, dayMs: number): number {
  const at = createdAt + days * dayMs
  if (dayMs !== DAY_MS) return at
  return Math.ceil(at / DAY_MS) * DAY_MS
}

/** The date `x-amz-expiration` states, always in real days rounded up to midnight UTC (as AWS and RGW state it). */
export function statedExpiry(createdAt: number, days: number): number {
  return expiryAt(createdAt, days, DAY_MS)
}
