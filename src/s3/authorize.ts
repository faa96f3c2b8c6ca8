import type { FastifyRequest } from 'fastify'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import { S3Error } from './errors'
import type { Operation } from './operations'

/**
 * Authorization: one call per request, with the operation it is (architecture.md). A tenant's
 * buckets are its own and nothing is shared, so an authenticated tenant may run every operation on
 * what it addresses (the services resolve buckets within the tenant: a foreign bucket is not found).
 * What remains to check is a client's statement of whose bucket it expects (AWS's bucket-owner
 * condition), which must not be ignored: the owner ID of a tenant's buckets is its id, and any
 * other is AccessDenied, as AWS answers it.
 */
export function authorize(request: FastifyRequest, tenant: AuthenticatedTenant, _operation: Operation): void {
  for (const name of ['x-amz-expected-bucket-owner', 'x-amz-source-expected-bucket-owner']) {
    const v = request.headers[name]
    const expected = Array.isArray(v) ? v.join(',') : v
    if (expected !== undefined && expected !== tenant.id) throw new S3Error('AccessDenied', 'Access Denied')
  }
}
