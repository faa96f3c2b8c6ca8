import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, listOf, malformed, parseXml, textOf } from '../xml'
import { BucketTagsService, MAX_OBJECT_TAGS, tagSet, tagsOf, type Tags } from '../../services/tagging'
import { onlyNullVersion, tagsOrError, xml, type Handlers, type OpContext } from './context'

/** Tagging: an object's tags (kept in its info) and a bucket's (the 'tagging' configuration family). */
export const taggingHandlers = {
  GetObjectTagging({ s3, tenant, bucket, key, query, reply }) {
    onlyNullVersion(query)
    const o = s3.objects.head(tenant, bucket, key)
    reply.header('x-amz-version-id', 'null')
    return xml(reply, 'Tagging', tagSetXml(tagsOf(o.info)))
  },

  async PutObjectTagging(c) {
    onlyNullVersion(c.query)
    const tags = await tagsOfBody(c, MAX_OBJECT_TAGS)
    c.s3.objects.setTags(c.tenant, c.bucket, c.key, tags)
    return c.reply.header('x-amz-version-id', 'null').send()
  },

  DeleteObjectTagging({ s3, tenant, bucket, key, query, reply }) {
    onlyNullVersion(query)
    s3.objects.setTags(tenant, bucket, key, {})
    return reply.header('x-amz-version-id', 'null').code(204).send()
  },

  GetBucketTagging({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const tags = new BucketTagsService(core.bucketConfigs).get(w.id)
    if (tags === undefined) throw new S3Error('NoSuchTagSet', 'The TagSet does not exist', { BucketName: bucket })
    return xml(reply, 'Tagging', tagSetXml(tags))
  },

  async PutBucketTagging(c) {
    const w = c.s3.buckets.resolve(c.tenant, c.bucket)
    const pairs = await pairsOfBody(c)
    tagsOrError(() => {
      new BucketTagsService(c.core.bucketConfigs).put(w.id, pairs)
      return {}
    })
    return c.reply.code(204).send()
  },

  DeleteBucketTagging({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    new BucketTagsService(core.bucketConfigs).delete(w.id)
    return reply.code(204).send()
  },
} satisfies Handlers

/** In key order (UTF-8 binary, as listings), as Ceph RGW answers and ceph/s3-tests expect (test_put_obj_with_tags). */
const tagSetXml = (tags: Tags) => ({
  TagSet: {
    Tag: Object.entries(tags)
      .sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
      .map(([Key, Value]) => ({ Key, Value })),
  },
})

/** `<Tagging><TagSet><Tag><Key/><Value/></Tag>…</TagSet></Tagging>`: the pairs, in order. */
async function pairsOfBody({ body }: OpContext): Promise<[string, string][]> {
  const doc = parseXml(await readSmallBody(body(), MAX_XML_BODY_BYTES))
  const set = childOf(childOf(doc, 'Tagging'), 'TagSet')
  if (!set) throw malformed()
  return listOf(set, 'Tag').map((t) => {
    const key = textOf(t, 'Key')
    // A Tag without a Key is not the schema's; a missing Value is the empty one (AWS accepts it).
    if (key === undefined) throw malformed()
    return [key, textOf(t, 'Value') ?? '']
  })
}

async function tagsOfBody(c: OpContext, max: number): Promise<Tags> {
  const pairs = await pairsOfBody(c)
  return tagsOrError(() => tagSet(pairs, max))
}
