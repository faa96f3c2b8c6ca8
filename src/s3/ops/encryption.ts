import type { FastifyReply, FastifyRequest } from 'fastify'
import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, listOf, malformed, parseXml, textOf } from '../xml'
import type { OperationName } from '../operations'
import { checkCannedAcl } from '../acl'
import { header, notImplemented, xml, type Handlers } from './context'
import type { KmsKeyRing } from '../../lib/kms-keys'
import type { BucketEncryption } from '../../services/bucket-encryption'
import { hasCustomerHeaders, kmsKeyIdOf, unknownKmsKey } from '../sse'

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
 * The server-side encryption headers of a request (#27), refused as AWS refuses them: on a write,
 * AES256 (SSE-S3) is always taken (the data dir seals the object, else Coffer's SSE-S3 key does,
 * ../sse.ts); aws:kms needs a key of Coffer's key ring, named or the default (else 400); a KMS key id without aws:kms,
 * or SSE-S3 or SSE-KMS with a customer key, is 400; any other value is 400. On a GET or HEAD the
 * header is 400 (InvalidArgument), as AWS answers: the object's own encryption applies. The
 * customer key's headers are checked by the operations that take them (../sse.ts).
 */
export function checkSseHeader(request: Pick<FastifyRequest, 'headers'>, operation: OperationName, ring: KmsKeyRing, tenantId: string): void {
  const value = header(request, 'x-amz-server-side-encryption')
  const kmsKeyId = header(request, 'x-amz-server-side-encryption-aws-kms-key-id')
  if (value === undefined && kmsKeyId === undefined) return
  if (SSE_READS.has(operation) && value !== undefined) {
    throw new S3Error('InvalidArgument', 'The x-amz-server-side-encryption header is not supported for this operation.')
  }
  if (!SSE_WRITES.has(operation)) return
  // A value that is no canned ACL at all is the client's error (400), whatever else is refused (context.ts).
  checkCannedAcl(header(request, 'x-amz-acl'))
  // Two encryptions at once is the client's error before anything is refused as not built (AWS: 400).
  if (value !== undefined && hasCustomerHeaders(request)) {
    throw new S3Error('InvalidArgument', 'Server Side Encryption with Customer provided key is incompatible with the encryption method specified')
  }
  if (kmsKeyId !== undefined && value !== 'aws:kms') {
    throw new S3Error('InvalidArgument', 'Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms')
  }
  if (value === 'aws:kms') {
    // A key the bucket owner's tenant may not use is answered as an unknown one.
    const id = kmsKeyIdOf(request, ring, tenantId)
    if (!ring.sealKey(id, tenantId)) throw unknownKmsKey(id)
    return
  }
  if (value === 'aws:kms:dsse') throw notImplemented('SSE-KMS with dual-layer encryption (aws:kms:dsse)')
  if (value !== 'AES256') throw new S3Error('InvalidArgument', 'The encryption method specified is not supported')
}

/**
 * Reports SSE-S3 on the answers of object operations, when every object is sealed at rest, unless
 * the answer reports the object's own key (SSE-C or SSE-KMS, ../sse.ts reportKey).
 */
export function reportSse(reply: FastifyReply, operation: OperationName): void {
  if (!SSE_REPORTED.has(operation) || reply.statusCode >= 300) return
  if (reply.hasHeader('x-amz-server-side-encryption') || reply.hasHeader('x-amz-server-side-encryption-customer-algorithm')) return
  reply.header('x-amz-server-side-encryption', 'AES256')
}

/** The bucket encryption family: the default encryption of a bucket (Put/Get/DeleteBucketEncryption). */
export const encryptionHandlers = {
  GetBucketEncryption({ s3, core, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const config = core.bucketEncryption.get(w.id)
    if (!config) throw new S3Error('ServerSideEncryptionConfigurationNotFoundError', 'The server side encryption configuration was not found')
    const apply =
      config.algorithm === 'aws:kms' && config.keyId !== undefined
        ? { SSEAlgorithm: config.algorithm, KMSMasterKeyID: config.keyId }
        : { SSEAlgorithm: config.algorithm }
    return xml(reply, 'ServerSideEncryptionConfiguration', { Rule: { ApplyServerSideEncryptionByDefault: apply, BucketKeyEnabled: 'false' } })
  },

  async PutBucketEncryption({ s3, core, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const doc = parseXml(await readSmallBody(body(), MAX_XML_BODY_BYTES))
    const root = childOf(doc, 'ServerSideEncryptionConfiguration')
    const rules = root ? [childOf(root, 'Rule'), ...listOf(root, 'Rule')].filter((r) => r !== undefined) : []
    if (rules.length !== 1) throw malformed()
    const apply = childOf(rules[0], 'ApplyServerSideEncryptionByDefault')
    const algorithm = textOf(apply, 'SSEAlgorithm')
    const keyId = textOf(apply, 'KMSMasterKeyID')?.trim()
    if (algorithm === 'aws:kms:dsse') throw notImplemented('SSE-KMS with dual-layer encryption (aws:kms:dsse)')
    if (algorithm !== 'AES256' && algorithm !== 'aws:kms') throw malformed()
    if (algorithm === 'AES256' && keyId !== undefined) {
      throw new S3Error('InvalidArgument', 'a KMSMasterKeyID is only allowed with the aws:kms algorithm')
    }
    const config: BucketEncryption = algorithm === 'AES256' ? { algorithm } : { algorithm, ...(keyId ? { keyId } : {}) }
    const refused = core.bucketEncryption.put(w.id, tenant.id, config)
    if (refused === 'unknown-kms-key') throw unknownKmsKey(keyId!)
    if (refused === 'no-default-kms-key') {
      throw new S3Error('InvalidArgument', 'aws:kms without a KMSMasterKeyID needs a default key (COFFER_KMS_DEFAULT_KEY)')
    }
    return reply.send()
  },

  DeleteBucketEncryption({ s3, core, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    core.bucketEncryption.delete(w.id)
    return reply.code(204).send()
  },
} satisfies Handlers
