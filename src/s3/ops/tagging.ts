import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, listOf, malformed, parseXml, textOf } from '../xml'
import { BucketTagsService, MAX_OBJECT_TAGS, tagSet, tagsOf, type Tags } from '../../services/tagging'
import { tagsOrError, xml, type Handlers, type OpContext } from './context'
import { versionIdHeader } from '../versions'
import type { FastifyReply } from 'fastify'
import type { ObjectRow } from '../../db/repos/objects'

/** Tagging: an object's tags (kept in its info) and a bucket's (the 'tagging' configuration family). */
export const taggingHandlers = {
  GetObjectTagging({ s3, tenant, bucket, key, query, reply }) {
    const o = s3.objects.head(tenant, bucket, key, query.get('versionId'))
    versionOf(reply, o)
    return xml(reply, 'Tagging', tagSetXml(tagsOf(o.info)))
  },

  async PutObjectTagging(c) {
    const tags = await tagsOfBody(c, MAX_OBJECT_TAGS)
    versionOf(c.reply, c.s3.objects.setTags(c.tenant, c.bucket, c.key, tags, c.query.get('versionId')))
    return c.reply.send()
  },

  DeleteObjectTagging({ s3, tenant, bucket, key, query, reply }) {
    versionOf(reply, s3.objects.setTags(tenant, bucket, key, {}, query.get('versionId')))
    return reply.code(204).send()
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

/** The version whose tags were read or set (a version's tags are its own, #25): `null` for the null version. */
function versionOf(reply: FastifyReply, o: ObjectRow): void {
  reply.header('x-amz-version-id', versionIdHeader(o) ?? 'null')
}

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
  return pairsOfXml(await readSmallBody(body(), MAX_XML_BODY_BYTES))
}

function pairsOfXml(xmlText: Buffer): [string, string][] {
  const doc = parseXml(xmlText)
  const set = childOf(childOf(doc, 'Tagging'), 'TagSet')
  if (!set) throw malformed()
  return listOf(set, 'Tag').map((t) => {
    const key = textOf(t, 'Key')
    // A Tag without a Key is not the schema's; a missing Value is the empty one (AWS accepts it).
    if (key === undefined) throw malformed()
    return [key, textOf(t, 'Value') ?? '']
  })
}

/** A POST form's `tagging` field: the same Tagging document as PutObjectTagging's body (#26). */
export function tagsOfXml(text: string): Tags {
  const pairs = pairsOfXml(Buffer.from(text, 'utf8'))
  return tagsOrError(() => tagSet(pairs, MAX_OBJECT_TAGS))
}

async function tagsOfBody(c: OpContext, max: number): Promise<Tags> {
  const pairs = await pairsOfBody(c)
  return tagsOrError(() => tagSet(pairs, max))
}
