import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES } from '../xml'
import { S3Error } from '../errors'
import { aclOfBodyListed, aclXml, checkAclWrite, requestedAclWrite } from '../acl'
import type { CannedAcl } from '../../services/public-access'
import type { Handlers, OpContext } from './context'

/** The ACL family (the wire rules are in ../acl.ts, what they grant in services/public-access.ts). */
export const aclHandlers = {
  GetBucketAcl({ s3, core, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const doc = core.publicAccess.bucketAcl(w.id)
    // With ACLs disabled, a read shows the owner's full control alone, whatever was stored before (AWS).
    if (doc.ownership === 'BucketOwnerEnforced') return reply.type('application/xml').send(aclXml({ ID: tenant.id, DisplayName: tenant.name }, 'private'))
    return reply.type('application/xml').send(aclXml({ ID: tenant.id, DisplayName: tenant.name }, doc.acl, doc.listed !== false))
  },

  async PutBucketAcl(c) {
    const w = c.s3.buckets.resolve(c.tenant, c.bucket)
    const { acl, listed } = await aclOfRequestListed(c, w.id)
    const { listed: _old, ...doc } = c.core.publicAccess.bucketAcl(w.id)
    c.core.publicAccess.putBucketAcl(w.id, { ...doc, acl, ...(listed ? {} : { listed: false }) })
    return c.reply.send()
  },

  GetObjectAcl(c) {
    const o = objectAclTarget(c)
    // With ACLs disabled, a read shows the owner's full control alone (an ACL set before grants nothing now).
    const acl = c.core.publicAccess.aclsDisabled(o.workspaceId) ? 'private' : ((o.info?.acl ?? 'private') as CannedAcl)
    return c.reply.type('application/xml').send(aclXml({ ID: c.tenant.id, DisplayName: c.tenant.name }, acl))
  },

  async PutObjectAcl(c) {
    const o = objectAclTarget(c)
    const acl = await aclOfRequest(c, o.workspaceId)
    const { acl: _old, ...rest } = o.info ?? { etag: `"${o.sha256}"`, contentType: o.fileType, meta: {} }
    const stored = acl === 'private' || acl === 'bucket-owner-full-control' || acl === 'bucket-owner-read' ? rest : { ...rest, acl }
    // The object replaced or deleted meanwhile: it is no longer the one named.
    if (!c.s3.objectsRepo.setInfo(o.fileId, stored)) throw new S3Error('NoSuchKey', 'The specified key does not exist.')
    return c.reply.send()
  },
} satisfies Handlers

/**
 * The canned ACL a Put*Acl sets: from its headers (x-amz-acl, x-amz-grant-*) or its
 * AccessControlPolicy body, not both (AWS); one of them is required.
 */
async function aclOfRequest(c: OpContext, workspaceId: string): Promise<CannedAcl> {
  return (await aclOfRequestListed(c, workspaceId)).acl
}

/** The same, and whether its grants are listed (an AccessControlPolicy body may revoke them all). */
async function aclOfRequestListed(c: OpContext, workspaceId: string): Promise<{ acl: CannedAcl; listed: boolean }> {
  const body = await readSmallBody(c.body(), MAX_XML_BODY_BYTES)
  const fromHeaders = requestedAclWrite(c.request, c.tenant.id)
  if (fromHeaders !== undefined && body.length > 0) throw new S3Error('UnexpectedContent', 'This request does not support content')
  if (fromHeaders !== undefined) return { acl: fromHeaders.acl, listed: true }
  if (body.length === 0) throw new S3Error('MissingSecurityHeader', 'Your request was missing a required header', { MissingHeaderName: 'x-amz-acl' })
  const given = aclOfBodyListed(body, c.tenant.id)
  // The headers were checked by authorize(); a body's ACL is checked here, as it is only now known:
  // the owner's FULL_CONTROL alone is the body form of bucket-owner-full-control.
  checkAclWrite(c.core.publicAccess, workspaceId, { acl: given.acl, ownerFullControl: given.acl === 'private' && given.listed })
  return given
}

/** The object a GetObjectAcl / PutObjectAcl names: it must exist (NoSuchKey), or the version named (NoSuchVersion). */
function objectAclTarget({ s3, tenant, bucket, key, query }: OpContext) {
  return s3.objects.head(tenant, bucket, key, query.get('versionId'))
}
