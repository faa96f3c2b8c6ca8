import type { FastifyRequest } from 'fastify'
import type { Core } from '../core'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { Workspace } from '../db/repos/workspaces'
import { isUuid } from '../lib/ids'
import { evaluatePolicy, type CompiledPolicy, type PolicyRequest } from '../services/bucket-policy'
import type { PublicAccessBlock } from '../services/public-access'
import { S3Error } from './errors'
import { ACTIONS, type Operation } from './operations'
import { checkAclWrite, requestedAcl } from './acl'

/** Who sent a request: a tenant (by its signature), or anyone (no signature at all). */
export type Principal = { kind: 'tenant'; tenant: AuthenticatedTenant } | { kind: 'anonymous' }

/** What an authorized request runs as: the bucket owner's tenant, and the bucket's name within it. */
export interface Authorized {
  readonly tenant: AuthenticatedTenant
  readonly bucket: string
}

/** What anyone but the owner may be granted (by an ACL or a policy): reads. Coffer builds no foreign writes. */
const FOREIGN_READS = new Set(['GetObject', 'HeadObject', 'ListObjects', 'ListObjectsV2', 'HeadBucket', 'GetObjectAcl', 'GetBucketAcl'])
/** Operations the owner may always run whatever its policy denies (AWS's rule against locking oneself out). */
const POLICY_OPS = new Set(['GetBucketPolicy', 'PutBucketPolicy', 'DeleteBucketPolicy'])
/** Writes that take a canned ACL in their headers: BlockPublicAcls and ownership apply (#26). */
const ACL_WRITES = new Set(['PutObject', 'CopyObject', 'CreateMultipartUpload', 'PutBucketAcl', 'PutObjectAcl', 'CreateBucket'])

const denied = () => new S3Error('AccessDenied', 'Access Denied')
const noSuchBucket = (name: string) => new S3Error('NoSuchBucket', 'The specified bucket does not exist', { BucketName: name })

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(',') : v)

/** The condition keys of a request (services/bucket-policy.ts CONDITION_KEYS); absent ones are not set. */
function conditionKeys(request: FastifyRequest, operation: Operation, query: ReadonlyMap<string, string>): Map<string, string> {
  const keys = new Map<string, string>()
  const set = (k: string, v: string | undefined) => {
    if (v !== undefined) keys.set(k, v)
  }
  set('aws:referer', one(request.headers.referer))
  set('aws:sourceip', request.ip)
  set('aws:useragent', one(request.headers['user-agent']))
  keys.set('aws:securetransport', request.protocol === 'https' ? 'true' : 'false')
  set('s3:x-amz-acl', one(request.headers['x-amz-acl']))
  if (operation.name === 'ListObjects' || operation.name === 'ListObjectsV2') {
    // A listing without a prefix lists from the root: its s3:prefix is "" (so `"s3:prefix": ["", "home/"]` works).
    keys.set('s3:prefix', query.get('prefix') ?? '')
    set('s3:delimiter', query.get('delimiter'))
    set('s3:max-keys', query.get('max-keys'))
  }
  return keys
}

/**
 * Authorization: one call per request, with the operation it is (architecture.md). It resolves
 * whose bucket the request names (README, S3, "Public objects, ACLs and bucket policies"): a plain
 * name is the signing tenant's own bucket; `<tenant-id>:<bucket>` (Ceph RGW's syntax for another
 * tenant's bucket) names that tenant's; an anonymous request's plain name resolves only with
 * COFFER_S3_ANONYMOUS_BUCKET_NAMES=unique and only when one tenant alone has a bucket of that name.
 *
 * The owner may run every operation but what its bucket policy explicitly denies (AWS applies a
 * bucket policy's Deny to the owner's principals too), except the policy operations themselves.
 * Anyone else (another tenant, or anonymous) is evaluated as AWS does: the public access block,
 * then the policy (an explicit Deny wins, then an Allow), then the canned ACLs; and only reads are
 * ever granted: a write a policy or ACL would grant to someone else is 501 (Coffer builds no
 * anonymous or cross-tenant writes). An object's existence is not revealed without s3:ListBucket
 * (AWS's 403-for-404 rule).
 */
export function authorize(
  core: Core,
  request: FastifyRequest,
  principal: Principal,
  operation: Operation,
  target: { bucket: string | undefined; key: string | undefined; query: ReadonlyMap<string, string> },
): Authorized {
  if (operation.on === 'service' || target.bucket === undefined) {
    if (principal.kind === 'anonymous') throw denied()
    expectOwner(request, principal.tenant.id)
    return { tenant: principal.tenant, bucket: '' }
  }
  const colon = target.bucket.indexOf(':')
  const qualifier = colon < 0 ? undefined : target.bucket.slice(0, colon).toLowerCase()
  const name = colon < 0 ? target.bucket : target.bucket.slice(colon + 1)
  const { publicAccess } = core
  const workspaces = core.s3.buckets

  // The owner, naming its own bucket.
  if (principal.kind === 'tenant' && (qualifier === undefined || qualifier === principal.tenant.id)) {
    expectOwner(request, principal.tenant.id)
    const w = workspaces.find(principal.tenant.id, name)
    if (w && !POLICY_OPS.has(operation.name)) {
      const policy = publicAccess.policy(w.id, name, principal.tenant.id, ACTIONS)
      if (policy && evaluatePolicy(policy, policyRequest('owner', operation, name, target, conditionKeys(request, operation, target.query))) === 'deny') {
        throw denied()
      }
    }
    if (ACL_WRITES.has(operation.name)) checkAclWrite(publicAccess, w?.id, requestedAcl(request, principal.tenant.id))
    return { tenant: principal.tenant, bucket: name }
  }

  // Anyone else: whose bucket it is.
  let w: Workspace | undefined
  if (qualifier !== undefined) {
    w = isUuid(qualifier) ? workspaces.find(qualifier, name) : undefined
  } else {
    if (core.config.s3AnonymousBucketNames !== 'unique') throw denied()
    const found = workspaces.findAnyTenant(name)
    if (found.length > 1) throw denied()
    w = found[0]
  }
  if (!w) throw noSuchBucket(target.bucket)
  const owner = ownerOf(core, w.tenantId)
  if (!owner) throw noSuchBucket(target.bucket)
  expectOwner(request, owner.id)

  const block = publicAccess.block(w.id)
  const policy = publicAccess.policy(w.id, name, owner.id, ACTIONS)
  // RestrictPublicBuckets: a bucket with a public policy is its owner's alone (S3 User Guide).
  if (block.restrictPublicBuckets && policy?.isPublic) throw denied()
  const keys = conditionKeys(request, operation, target.query)
  const grants = (op: Operation, aclGrants: boolean) => granted(policy, block, policyRequest('other', op, name, target, keys), aclGrants)
  const aclGrantsRead = (acl: string | undefined) =>
    acl === 'public-read' || acl === 'public-read-write' || (acl === 'authenticated-read' && principal.kind === 'tenant')
  const bucketAcl = publicAccess.bucketAcl(w.id)
  const listing: Operation = { name: 'ListObjects', action: 's3:ListBucket', on: 'bucket' }
  const listGranted = () => grants(listing, aclGrantsRead(bucketAcl.acl) && bucketAcl.ownership !== 'BucketOwnerEnforced')

  let ok: boolean
  if (operation.name === 'GetObject' || operation.name === 'HeadObject') {
    const object = core.s3.objectsRepo.get(w.id, target.key ?? '')
    if (!object) {
      if (!listGranted()) throw denied()
      ok = true // the handler answers NoSuchKey: the caller may list the bucket, and so learn as much
    } else ok = grants(operation, aclGrantsRead(object.info?.acl) && bucketAcl.ownership !== 'BucketOwnerEnforced')
  } else if (operation.name === 'ListObjects' || operation.name === 'ListObjectsV2' || operation.name === 'HeadBucket') {
    ok = listGranted()
  } else {
    // ACLs grant nothing else to others (no canned ACL grants READ_ACP or a write): only a policy can.
    ok = grants(operation, false)
  }
  if (!ok) throw denied()
  if (!FOREIGN_READS.has(operation.name)) {
    throw new S3Error('NotImplemented', `${operation.name} by anyone but the bucket owner is not implemented by Coffer (only reads are shared)`)
  }
  return { tenant: owner, bucket: name }
}

/** The live tenant that owns a bucket. */
function ownerOf(core: Core, tenantId: string): AuthenticatedTenant | undefined {
  try {
    const { usedBytes: _used, ...tenant } = core.tenants.get(tenantId)
    return tenant
  } catch {
    return undefined
  }
}

/** The policy first (an explicit Deny wins), then the canned ACL unless the public access block ignores it. */
function granted(policy: CompiledPolicy | undefined, block: PublicAccessBlock, r: PolicyRequest, aclGrants: boolean): boolean {
  const decision = policy === undefined ? 'none' : evaluatePolicy(policy, r)
  if (decision !== 'none') return decision === 'allow'
  return aclGrants && !block.ignorePublicAcls
}

function policyRequest(
  principal: 'owner' | 'other',
  operation: Operation,
  bucket: string,
  target: { key: string | undefined },
  keys: ReadonlyMap<string, string>,
): PolicyRequest {
  const resource = operation.on === 'object' && target.key !== undefined ? `arn:aws:s3:::${bucket}/${target.key}` : `arn:aws:s3:::${bucket}`
  return { principal, action: operation.action, resource, keys }
}

/**
 * A client's statement of whose bucket it expects (AWS's bucket-owner condition) must not be
 * ignored: the owner ID of a tenant's buckets is its id, and any other is AccessDenied, as AWS
 * answers it.
 */
function expectOwner(request: FastifyRequest, ownerId: string): void {
  for (const name of ['x-amz-expected-bucket-owner', 'x-amz-source-expected-bucket-owner']) {
    const expected = one(request.headers[name])
    if (expected !== undefined && expected !== ownerId) throw denied()
  }
}
