import { readSmallBody } from '../ingest'
import { S3Error } from '../errors'
import { ACTIONS } from '../operations'
import { MAX_XML_BODY_BYTES, childOf, malformed, parseXml, textOf } from '../xml'
import { MalformedPolicyError, MAX_POLICY_BYTES } from '../../services/bucket-policy'
import { isPublicAcl, type PublicAccessBlock } from '../../services/public-access'
import { xml, type Handlers } from './context'

const noPolicy = (bucket: string) => new S3Error('NoSuchBucketPolicy', 'The bucket policy does not exist', { BucketName: bucket })

/** The four settings, in AWS's element names. */
const PAB_ELEMENTS = [
  ['BlockPublicAcls', 'blockPublicAcls'],
  ['IgnorePublicAcls', 'ignorePublicAcls'],
  ['BlockPublicPolicy', 'blockPublicPolicy'],
  ['RestrictPublicBuckets', 'restrictPublicBuckets'],
] as const

/** Bucket policies and the public access block (#26; the rules are in services/bucket-policy.ts and public-access.ts). */
export const policyHandlers = {
  GetBucketPolicy({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const text = core.publicAccess.policyText(w.id)
    if (text === undefined) throw noPolicy(bucket)
    return reply.type('application/json').send(text)
  },

  async PutBucketPolicy({ core, s3, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const text = (
      await readSmallBody(body(), MAX_POLICY_BYTES).catch((err: unknown) => {
        throw err instanceof S3Error && err.code === 'MaxMessageLengthExceeded'
          ? new S3Error('MalformedPolicy', `Policies must be at most ${MAX_POLICY_BYTES} bytes`)
          : err
      })
    ).toString('utf8')
    let publicPolicy: boolean
    try {
      publicPolicy = core.publicAccess.compile(text, bucket, tenant.id, ACTIONS).isPublic
    } catch (err) {
      if (err instanceof MalformedPolicyError) throw new S3Error('MalformedPolicy', err.message)
      throw err
    }
    // BlockPublicPolicy: a public policy is refused, as AWS refuses it (403).
    if (publicPolicy && core.publicAccess.block(w.id).blockPublicPolicy) throw new S3Error('AccessDenied', 'Access Denied')
    core.publicAccess.putPolicy(w.id, text)
    return reply.code(204).send()
  },

  DeleteBucketPolicy({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    core.publicAccess.deletePolicy(w.id)
    return reply.code(204).send()
  },

  /**
   * IsPublic as Ceph RGW answers it (ceph/s3-tests' test_get_*_bucket_policy_status, #26): a public
   * policy or a public canned ACL of the bucket (unless IgnorePublicAcls) makes it public, and a
   * bucket with neither is `false` rather than AWS's 404 NoSuchBucketPolicy.
   */
  GetBucketPolicyStatus({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const { publicAccess } = core
    const policy = publicAccess.policy(w.id, bucket, tenant.id, ACTIONS)
    const bucketAcl = publicAccess.bucketAcl(w.id)
    const publicAcl = isPublicAcl(bucketAcl.acl) && bucketAcl.ownership !== 'BucketOwnerEnforced' && !publicAccess.block(w.id).ignorePublicAcls
    return xml(reply, 'PolicyStatus', { IsPublic: (policy?.isPublic ?? false) || publicAcl })
  },

  GetPublicAccessBlock({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const stored = core.publicAccess.storedBlock(w.id)
    if (!stored) {
      throw new S3Error('NoSuchPublicAccessBlockConfiguration', 'The public access block configuration was not found', { BucketName: bucket })
    }
    return xml(reply, 'PublicAccessBlockConfiguration', Object.fromEntries(PAB_ELEMENTS.map(([el, k]) => [el, stored[k]])))
  },

  async PutPublicAccessBlock({ core, s3, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const cfg = childOf(parseXml(await readSmallBody(body(), MAX_XML_BODY_BYTES)), 'PublicAccessBlockConfiguration')
    if (!cfg) throw malformed()
    const doc = {} as PublicAccessBlock
    for (const [el, k] of PAB_ELEMENTS) {
      const v = textOf(cfg, el)?.trim().toLowerCase()
      if (v !== undefined && v !== 'true' && v !== 'false') throw malformed()
      doc[k] = v === 'true'
    }
    core.publicAccess.putBlock(w.id, doc)
    return reply.send()
  },

  DeletePublicAccessBlock({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    core.publicAccess.deleteBlock(w.id)
    return reply.code(204).send()
  },
} satisfies Handlers
