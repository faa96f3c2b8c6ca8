import type { FastifyReply, FastifyRequest } from 'fastify'
import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, listOf, malformed, parseXml, textOf } from '../xml'
import type { OperationName } from '../operations'
import { checkCannedAcl } from '../acl'
import { header, notImplemented, xml, type Handlers } from './context'

/** Needs an encrypted data dir: what a request for SSE-S3 is told when there is none. */
const NEEDS_KEY = 'Server-side encryption without an encrypted data dir (COFFER_ENCRYPTION_KEY_FILE, see README "Encryption at rest")'

/** Writes that take x-amz-server-side-encryption (Amazon S3 API reference: PutObject, CopyObject, CreateMultipartUpload). */
const SSE_WRITES = new Set<OperationName>(['PutObject', 'CopyObject', 'CreateMultipartUpload'])
/** Reads that refuse it: the object's own encryption applies (ceph/s3-tests test_sse_s3_default_method_head). */
const SSE_READS = new Set<OperationName>(['GetObject', 'HeadObject'])
/** Answers that report the object's encryption (x-amz-server-side-encryption). */
const SSE_REPORTED = new Set<OperationName>([
  'PutObject',
  'CopyObject',
  'GetObject',
  'HeadObject',
  'CreateMultipartUpload',
  'UploadPart',
  'UploadPartCopy',
  'CompleteMultipartUpload',
])

/**
 * The x-amz-server-side-encryption header of a request (#27): AES256 (SSE-S3) on a write when the
 * data dir is encrypted; aws:kms is not built (501); any other value is 400 as AWS answers; on a
 * GET or HEAD it is 400 (InvalidArgument), as AWS answers. SSE-C's headers stay refused (501) by
 * refuseUnsupported.
 */
export function checkSseHeader(request: FastifyRequest, operation: OperationName, atRest: boolean): void {
  const value = header(request, 'x-amz-server-side-encryption')
  if (value === undefined) return
  if (SSE_READS.has(operation)) throw new S3Error('InvalidArgument', 'The x-amz-server-side-encryption header is not supported for this operation.')
  if (!SSE_WRITES.has(operation)) return
  // A value that is no canned ACL at all is the client's error (400), whatever else is refused (context.ts).
  checkCannedAcl(header(request, 'x-amz-acl'))
  // Two encryptions at once is the client's error before anything is refused as not built (AWS: 400).
  if (Object.keys(request.headers).some((h) => h.startsWith('x-amz-server-side-encryption-customer-'))) {
    throw new S3Error('InvalidArgument', 'Server Side Encryption with Customer provided key is incompatible with the encryption method specified')
  }
  if (value === 'AES256' && header(request, 'x-amz-server-side-encryption-aws-kms-key-id') !== undefined) {
    throw new S3Error('InvalidArgument', 'Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms')
  }
  if (value === 'aws:kms' || value === 'aws:kms:dsse') throw notImplemented('SSE-KMS')
  if (value !== 'AES256') throw new S3Error('InvalidArgument', 'The encryption method specified is not supported')
  if (!atRest) throw notImplemented(NEEDS_KEY)
}

/** Reports SSE-S3 on the answers of object operations, when every object is sealed at rest. */
export function reportSse(reply: FastifyReply, operation: OperationName): void {
  if (SSE_REPORTED.has(operation) && reply.statusCode < 300) reply.header('x-amz-server-side-encryption', 'AES256')
}

/** The bucket encryption family: the default encryption of a bucket (Put/Get/DeleteBucketEncryption). */
export const encryptionHandlers = {
  GetBucketEncryption({ s3, core, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const config = core.bucketEncryption.get(w.id)
    if (!config) throw new S3Error('ServerSideEncryptionConfigurationNotFoundError', 'The server side encryption configuration was not found')
    return xml(reply, 'ServerSideEncryptionConfiguration', {
      Rule: { ApplyServerSideEncryptionByDefault: { SSEAlgorithm: config.algorithm }, BucketKeyEnabled: 'false' },
    })
  },

  async PutBucketEncryption({ s3, core, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const doc = parseXml(await readSmallBody(body(), MAX_XML_BODY_BYTES))
    const root = childOf(doc, 'ServerSideEncryptionConfiguration')
    const rules = root ? [childOf(root, 'Rule'), ...listOf(root, 'Rule')].filter((r) => r !== undefined) : []
    if (rules.length !== 1) throw malformed()
    const apply = childOf(rules[0], 'ApplyServerSideEncryptionByDefault')
    const algorithm = textOf(apply, 'SSEAlgorithm')
    if (algorithm === 'aws:kms' || algorithm === 'aws:kms:dsse') throw notImplemented('SSE-KMS')
    if (algorithm !== 'AES256') throw malformed()
    if (textOf(apply, 'KMSMasterKeyID') !== undefined) {
      throw new S3Error('InvalidArgument', 'a KMSMasterKeyID is only allowed with the aws:kms algorithm')
    }
    if (!core.bucketEncryption.put(w.id, { algorithm })) throw notImplemented(NEEDS_KEY)
    return reply.send()
  },

  DeleteBucketEncryption({ s3, core, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    core.bucketEncryption.delete(w.id)
    return reply.code(204).send()
  },
} satisfies Handlers
