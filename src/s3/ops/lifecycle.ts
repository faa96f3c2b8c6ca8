import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES } from '../xml'
import { S3Error } from '../errors'
import { lifecycleDocument, parseLifecycleConfiguration } from '../lifecycle'
import { xml, type Handlers } from './context'

/** Lifecycle configuration (#25): the rules of a bucket (the pass that applies them: services/lifecycle.ts). */
export const lifecycleHandlers = {
  GetBucketLifecycleConfiguration({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const config = core.lifecycle.get(w.id)
    if (!config) throw new S3Error('NoSuchLifecycleConfiguration', 'The lifecycle configuration does not exist', { BucketName: bucket })
    return xml(reply, 'LifecycleConfiguration', lifecycleDocument(config))
  },

  async PutBucketLifecycleConfiguration({ core, s3, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const config = parseLifecycleConfiguration(await readSmallBody(body(), MAX_XML_BODY_BYTES))
    core.lifecycle.put(w.id, config)
    return reply.send()
  },

  // 204 whether or not the bucket had one, as AWS (ceph/s3-tests test_lifecycle_delete).
  DeleteBucketLifecycle({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    core.lifecycle.delete(w.id)
    return reply.code(204).send()
  },
} satisfies Handlers
