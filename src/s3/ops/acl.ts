import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES } from '../xml'
import { checkPutAcl, ownerOnlyAcl } from '../acl'
import type { Handlers, OpContext } from './context'

/** The ACL family (the rules are in ../acl.ts): every bucket and object is its tenant's alone. */
export const aclHandlers = {
  GetBucketAcl({ s3, tenant, bucket, reply }) {
    s3.buckets.resolve(tenant, bucket)
    return reply.type('application/xml').send(ownerOnlyAcl({ ID: tenant.id, DisplayName: tenant.name }))
  },

  async PutBucketAcl({ s3, tenant, bucket, request, reply, body }) {
    s3.buckets.resolve(tenant, bucket)
    checkPutAcl(request.headers, (await readSmallBody(body(), MAX_XML_BODY_BYTES)).length, 'bucket')
    return reply.send()
  },

  GetObjectAcl(c) {
    objectAclTarget(c)
    return c.reply.type('application/xml').send(ownerOnlyAcl({ ID: c.tenant.id, DisplayName: c.tenant.name }))
  },

  async PutObjectAcl(c) {
    objectAclTarget(c)
    checkPutAcl(c.request.headers, (await readSmallBody(c.body(), MAX_XML_BODY_BYTES)).length, 'object')
    return c.reply.send()
  },
} satisfies Handlers

/** The object a GetObjectAcl / PutObjectAcl names: it must exist (NoSuchKey), or the version named (NoSuchVersion). */
function objectAclTarget({ s3, tenant, bucket, key, query }: OpContext): void {
  s3.objects.head(tenant, bucket, key, query.get('versionId'))
}
