import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, malformed, parseXml, textOf } from '../xml'
import { OBJECT_OWNERSHIPS, isPublicAcl, type ObjectOwnership } from '../../services/public-access'
import { xml, type Handlers } from './context'

/**
 * A bucket's ownership controls (Put/Get/DeleteBucketOwnershipControls), stored beside its canned
 * ACL in its `acl` configuration document (services/public-access.ts). A bucket without them has
 * ACLs enabled, as Coffer's buckets always had; BucketOwnerEnforced disables them (../acl.ts).
 */
export const ownershipHandlers = {
  async PutBucketOwnershipControls({ core, s3, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const ownership = parseOwnershipControls(await readSmallBody(body(), MAX_XML_BODY_BYTES))
    // Disabling ACLs must not silently drop what the bucket's ACL grants others: AWS refuses it
    // until the ACL is the owner's alone (S3 User Guide, "Prerequisites for disabling ACLs").
    if (ownership === 'BucketOwnerEnforced' && isPublicAcl(core.publicAccess.bucketAcl(w.id).acl)) {
      throw new S3Error('InvalidBucketAclWithObjectOwnership', "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting")
    }
    core.publicAccess.putOwnership(w.id, ownership)
    return reply.send()
  },

  GetBucketOwnershipControls({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const ownership = core.publicAccess.ownership(w.id)
    if (ownership === undefined) {
      throw new S3Error('OwnershipControlsNotFoundError', 'The bucket ownership controls were not found', { BucketName: bucket })
    }
    return xml(reply, 'OwnershipControls', { Rule: { ObjectOwnership: ownership } })
  },

  DeleteBucketOwnershipControls({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    if (core.publicAccess.ownership(w.id) !== undefined) core.publicAccess.putOwnership(w.id, undefined)
    return reply.code(204).send()
  },
} satisfies Handlers

/**
 * `<OwnershipControls><Rule><ObjectOwnership>…</ObjectOwnership></Rule></OwnershipControls>`: AWS
 * takes exactly one rule, and a value outside the three does not validate against its schema
 * (MalformedXML).
 */
function parseOwnershipControls(body: Buffer): ObjectOwnership {
  const doc = childOf(parseXml(body), 'OwnershipControls')
  if (!doc) throw malformed()
  const rules = doc.Rule
  if (rules === undefined || Array.isArray(rules)) throw malformed()
  const value = textOf(childOf(doc, 'Rule'), 'ObjectOwnership')?.trim()
  if (value === undefined || !(OBJECT_OWNERSHIPS as readonly string[]).includes(value)) throw malformed()
  return value as ObjectOwnership
}
