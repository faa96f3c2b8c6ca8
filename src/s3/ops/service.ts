import type { FastifyReply } from 'fastify'
import { iso, owner, xml, type Handlers } from './context'

/** The service's one operation: the tenant's buckets (its workspaces). */
export const serviceHandlers = {
  ListBuckets({ s3, tenant, reply }) {
    const buckets = s3.buckets.list(tenant)
    return xml(reply, 'ListAllMyBucketsResult', {
      Owner: owner(tenant),
      Buckets: { Bucket: buckets.map((b) => ({ Name: b.slug, CreationDate: iso(b.createdAt) })) },
    })
  },
} satisfies Handlers

/**
 * ListBuckets without a signature: anonymous owns no bucket, so the list is empty (Ceph RGW's
 * answer, which ceph/s3-tests' test_list_buckets_anonymous expects; AWS answers 403).
 */
export function anonymousListBuckets(reply: FastifyReply) {
  return xml(reply, 'ListAllMyBucketsResult', { Buckets: {} })
}
