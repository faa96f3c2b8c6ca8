import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, malformed, parseXml, textOf, type XmlNode } from '../xml'
import { etagOf } from '../objects'
import { listPage } from '../listing'
import { checkLocationConstraint } from '../buckets'
import { awsEncode } from '../sigv4'
import { requestedAcl } from '../acl'
import { header, intParam, iso, owner, refuseUnsupported, xml, type Handlers, type OpContext } from './context'

/** Buckets themselves: create, delete, head, where they are, and their listings. */
export const bucketHandlers = {
  HeadBucket({ s3, tenant, bucket, query, reply, region }) {
    const w = s3.buckets.resolve(tenant, bucket)
    // Ceph RGW's extension (ceph/s3-tests test_bucket_head_extended): with read-stats=true the answer
    // tells how many objects the bucket holds and their bytes, what a caller allowed to list it may count anyway.
    if (query.get('read-stats')?.toLowerCase() === 'true') {
      const stats = s3.objectsRepo.stats(w.id)
      reply.header('x-rgw-object-count', String(stats.objects)).header('x-rgw-bytes-used', String(stats.bytes))
    }
    return reply.header('x-amz-bucket-region', region).send()
  },

  GetBucketLocation({ s3, tenant, bucket, reply, region }) {
    s3.buckets.resolve(tenant, bucket)
    return reply
      .type('application/xml')
      .send(
        `<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${region === 'us-east-1' ? '' : region}</LocationConstraint>`,
      )
  },

  async CreateBucket({ core, s3, tenant, bucket, request, reply, region, body }) {
    const doc = await readSmallBody(body(), MAX_XML_BODY_BYTES)
    if (doc.length > 0) {
      const parsed = parseXml(doc)
      const cfg = childOf(parsed, 'CreateBucketConfiguration')
      if (!cfg) throw malformed()
      checkLocationConstraint(textOf(cfg, 'LocationConstraint'), region)
    }
    refuseUnsupported(request)
    const acl = requestedAcl(request, tenant.id)
    const ownership = header(request, 'x-amz-object-ownership')
    if (ownership !== undefined && ownership !== 'BucketOwnerEnforced' && ownership !== 'BucketOwnerPreferred' && ownership !== 'ObjectWriter') {
      throw new S3Error('InvalidArgument', 'Invalid x-amz-object-ownership header', { ArgumentName: 'x-amz-object-ownership', ArgumentValue: ownership })
    }
    if (ownership === 'BucketOwnerEnforced' && acl !== undefined && acl !== 'private' && acl !== 'bucket-owner-full-control') {
      throw new S3Error('InvalidBucketAclWithObjectOwnership', "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting")
    }
    const lock = header(request, 'x-amz-bucket-object-lock-enabled')
    if (lock !== undefined && !/^(true|false)$/i.test(lock.trim()))
      throw new S3Error('InvalidArgument', 'x-amz-bucket-object-lock-enabled must be true or false')
    const existed = s3.buckets.find(tenant.id, bucket) !== undefined
    const w = s3.buckets.create(tenant, bucket)
    // A re-create (200 in us-east-1) asking for another ACL than the bucket has would be a change it
    // does not make: 409 BucketAlreadyExists, as Ceph RGW answers it (ceph/s3-tests test_bucket_recreate_*_acl).
    if (existed && sameAsPrivate(acl ?? 'private') !== sameAsPrivate(core.publicAccess.bucketAcl(w.id).acl)) {
      throw new S3Error('BucketAlreadyExists', 'The requested bucket name is not available. The bucket namespace is shared by all users of the system.', {
        BucketName: bucket,
      })
    }
    // A bucket's ACL and ownership as created (#26); a re-create (200 in us-east-1) leaves them as they are.
    if (!existed && ((acl !== undefined && acl !== 'private') || ownership !== undefined)) {
      const doc = core.publicAccess.bucketAcl(w.id)
      core.publicAccess.putBucketAcl(w.id, { ...doc, ...(acl !== undefined ? { acl } : {}), ...(ownership !== undefined ? { ownership } : {}) })
    }
    // Object lock (#25): versioning Enabled for good, decided at creation as AWS does (not by a re-create).
    if (!existed && lock?.trim().toLowerCase() === 'true') s3.objectLock.enableOnNewBucket(w.id)
    return reply.header('location', `/${bucket}`).send()
  },

  async DeleteBucket({ s3, tenant, bucket, reply }) {
    await s3.buckets.delete(tenant, bucket)
    return reply.code(204).send()
  },

  ListObjects: (c) => listObjects(c, false),
  ListObjectsV2: (c) => {
    if (c.query.get('list-type') !== '2') throw new S3Error('InvalidArgument', 'list-type must be 2')
    return listObjects(c, true)
  },
} satisfies Handlers

/** The owner of a bucket owns its objects: the bucket-owner-* ACLs are `private` on a bucket. */
const sameAsPrivate = (acl: string) => (acl === 'bucket-owner-read' || acl === 'bucket-owner-full-control' ? 'private' : acl)

function listObjects({ s3, tenant, bucket, query: q, reply }: OpContext, v2: boolean) {
  const w = s3.buckets.resolve(tenant, bucket)
  const encoding = q.get('encoding-type')
  if (encoding !== undefined && encoding !== 'url') throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request')
  const enc = (s: string) => (encoding === 'url' ? awsEncode(s, true) : s)
  const prefix = q.get('prefix') ?? ''
  const delimiter = q.get('delimiter') ?? ''
  // RGW cannot group an unordered listing by a delimiter, and refuses the two together: so does Coffer,
  // so that a client written against RGW gets the same answer here.
  if (q.get('allow-unordered')?.toLowerCase() === 'true' && delimiter !== '') {
    throw new S3Error('InvalidArgument', 'allow-unordered cannot be combined with a delimiter', {
      ArgumentName: 'allow-unordered',
      ArgumentValue: q.get('allow-unordered')!,
    })
  }
  const maxKeys = intParam(q, 'max-keys', 1000, 1000)
  let after: string | undefined
  // An empty continuation-token is no token, as AWS treats it (#24).
  const token = q.get('continuation-token') || undefined
  if (v2 && token !== undefined) {
    if (!/^[A-Za-z0-9_-]{2,3000}$/.test(token)) throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect')
    const decoded = Buffer.from(token, 'base64url').toString('utf8')
    if (!decoded.startsWith('k:')) throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect')
    after = decoded.slice(2)
  } else if (v2) after = q.get('start-after') || undefined
  else after = q.get('marker') || undefined
  const page = listPage(s3.objectsRepo, w.id, { prefix, delimiter, after, maxKeys })
  const last = page.last === undefined ? undefined : page.last.kind === 'object' ? page.last.row.key : page.last.prefix
  const contents = page.entries.flatMap((e) => (e.kind === 'object' ? [e.row] : []))
  const prefixes = page.entries.flatMap((e) => (e.kind === 'prefix' ? [e.prefix] : []))
  const withOwner = !v2 || q.get('fetch-owner') === 'true'
  const body: XmlNode = {
    Name: bucket,
    // With encoding-type=url, AWS encodes every key-bearing element once, except ListObjects
    // (v1)'s Prefix, which it sends as given: botocore decodes all but that one (its
    // decode_list_object), so an encoded v1 Prefix reached boto3 as `%0A` (#24).
    Prefix: v2 ? enc(prefix) : prefix,
    ...(v2
      ? {
          // Echoed as sent, an empty one too (AWS; ceph/s3-tests reads it back).
          ...(q.has('continuation-token') ? { ContinuationToken: q.get('continuation-token')! } : {}),
          ...(q.has('start-after') ? { StartAfter: enc(q.get('start-after')!) } : {}),
          KeyCount: page.entries.length,
        }
      : { Marker: enc(q.get('marker') ?? '') }),
    MaxKeys: maxKeys,
    ...(delimiter !== '' ? { Delimiter: enc(delimiter) } : {}),
    ...(encoding ? { EncodingType: encoding } : {}),
    IsTruncated: page.truncated,
    ...(page.truncated && last !== undefined
      ? v2
        ? { NextContinuationToken: Buffer.from(`k:${last}`).toString('base64url') }
        : delimiter !== ''
          ? { NextMarker: enc(last) }
          : {}
      : {}),
    Contents: contents.map((o) => ({
      Key: enc(o.key),
      LastModified: iso(o.completedAt),
      ETag: etagOf(o),
      Size: o.size,
      ...(withOwner ? { Owner: owner(tenant) } : {}),
      StorageClass: 'STANDARD',
    })),
    CommonPrefixes: prefixes.map((p) => ({ Prefix: enc(p) })),
  }
  return xml(reply, 'ListBucketResult', body)
}
