import type { BucketConfigsService } from './bucket-configs'

/**
 * Tags: on objects (in the object's info, so they travel with it: copies, versions) and on
 * buckets (the bucket configuration family 'tagging'). The limits are AWS's ("Categorizing your
 * storage using tags", User Guide): 10 tags per object, 50 per bucket, keys of 1–128 and values of
 * 0–256 Unicode characters, keys unique, none starting with `aws:` (reserved for AWS's own).
 */
export type Tags = Record<string, string>

export const MAX_OBJECT_TAGS = 10
export const MAX_BUCKET_TAGS = 50

/** Why a tag set is refused: `InvalidTag` (AWS's code for every bad tag) with its message. */
export class TagError extends Error {
  constructor(
    readonly code: 'InvalidTag',
    message: string,
  ) {
    super(message)
  }
}

/** Unicode characters (code points), as AWS counts them, not UTF-16 units. */
const chars = (s: string) => [...s].length

/** A tag set from its (key, value) pairs, validated; throws TagError. */
export function tagSet(pairs: readonly (readonly [string, string])[], max: number): Tags {
  // InvalidTag, as Ceph RGW answers and ceph/s3-tests (test_put_excess_tags) expect, the bar of #26;
  // AWS's PutObjectTagging answers BadRequest there ("Object tags cannot be greater than 10").
  if (pairs.length > max) throw new TagError('InvalidTag', `Object tags cannot be greater than ${max}`)
  const tags: Tags = Object.create(null) as Tags
  for (const [key, value] of pairs) {
    if (chars(key) < 1 || chars(key) > 128) throw new TagError('InvalidTag', 'The TagKey you have provided is invalid')
    if (chars(value) > 256) throw new TagError('InvalidTag', 'The TagValue you have provided is invalid')
    if (key.toLowerCase().startsWith('aws:')) throw new TagError('InvalidTag', 'Your TagKey cannot be prefixed with aws:')
    if (Object.prototype.hasOwnProperty.call(tags, key)) throw new TagError('InvalidTag', 'Cannot provide multiple Tags with the same key')
    tags[key] = value
  }
  return { ...tags }
}

/**
 * `x-amz-tagging`'s form: a URL query (`k1=v1&k2=v2`, form-encoded). A key without `=` has an
 * empty value, as AWS reads it.
 */
export function parseTagQuery(text: string): Tags {
  if (text === '') return {}
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s.replace(/\+/g, ' '))
    } catch {
      throw new TagError('InvalidTag', 'The header x-amz-tagging is not correctly URL-encoded')
    }
  }
  const pairs = text.split('&').map((part): [string, string] => {
    const eq = part.indexOf('=')
    return eq < 0 ? [decode(part), ''] : [decode(part.slice(0, eq)), decode(part.slice(eq + 1))]
  })
  return tagSet(pairs, MAX_OBJECT_TAGS)
}

/** The object's tags (none for an object without info, such as a file uploaded through the API). */
export function tagsOf(info: { tags?: Tags } | null | undefined): Tags {
  return info?.tags ?? {}
}

/**
 * True when the object carries every tag of `filter` with the same value: a lifecycle rule's
 * `Tag` / `And.Tags` filter (AWS: an object matches when it has all of the filter's tags).
 */
export function hasTags(info: { tags?: Tags } | null | undefined, filter: Tags): boolean {
  const tags = tagsOf(info)
  return Object.entries(filter).every(([k, v]) => Object.prototype.hasOwnProperty.call(tags, k) && tags[k] === v)
}

/** A bucket's tags, kept as the bucket configuration family 'tagging'. */
export class BucketTagsService {
  constructor(private readonly configs: BucketConfigsService) {}

  /** The bucket's tags, or undefined when it has none (GetBucketTagging: NoSuchTagSet). */
  get(workspaceId: string): Tags | undefined {
    return this.configs.get<{ tags: Tags }>(workspaceId, 'tagging')?.tags
  }

  /** Replaces the bucket's tags (validated: TagError); an empty set removes them, as AWS does. */
  put(workspaceId: string, pairs: readonly (readonly [string, string])[]): void {
    const tags = tagSet(pairs, MAX_BUCKET_TAGS)
    if (Object.keys(tags).length === 0) this.configs.delete(workspaceId, 'tagging')
    else this.configs.put(workspaceId, 'tagging', { tags })
  }

  delete(workspaceId: string): void {
    this.configs.delete(workspaceId, 'tagging')
  }
}
