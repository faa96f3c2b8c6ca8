import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES } from '../xml'
import { awsEncode } from '../sigv4'
import { S3Error } from '../errors'
import { listVersionsDocument, listVersionsPage, parseVersioningConfiguration, versioningDocument } from '../versions'
import { header, intParam, owner, xml, type Handlers } from './context'

/** Versioning (#25): a bucket's versioning state and the listing of its versions (rules: services/versions.ts). */
export const versionHandlers = {
  GetBucketVersioning({ s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    return xml(reply, 'VersioningConfiguration', versioningDocument(s3.versions.status(w.id)))
  },

  async PutBucketVersioning({ s3, tenant, bucket, request, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const status = parseVersioningConfiguration(await readSmallBody(body(), MAX_XML_BODY_BYTES), header(request, 'x-amz-mfa'))
    // A bucket with object lock stays Enabled (AWS: InvalidBucketState, #25).
    if (status === 'Suspended' && s3.objectLock.enabled(w.id)) {
      throw new S3Error('InvalidBucketState', 'An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.')
    }
    s3.versions.setStatus(w.id, status)
    return reply.send()
  },

  ListObjectVersions({ s3, tenant, bucket, query: q, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const encoding = q.get('encoding-type')
    if (encoding !== undefined && encoding !== 'url') throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request')
    const enc = (s: string) => (encoding === 'url' ? awsEncode(s, true) : s)
    const query = {
      prefix: q.get('prefix') ?? '',
      delimiter: q.get('delimiter') ?? '',
      // An empty marker is no marker, as ListObjects' and ListMultipartUploads' are.
      keyMarker: q.get('key-marker') || undefined,
      versionIdMarker: q.get('version-id-marker') || undefined,
      maxKeys: intParam(q, 'max-keys', 1000, 1000),
    }
    const page = listVersionsPage(s3.versions, w.id, query)
    return xml(reply, 'ListVersionsResult', listVersionsDocument(bucket, { ...query, encoding }, page, owner(tenant), enc))
  },
} satisfies Handlers
