import type { Core } from '../core'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { BucketWorkspace as Workspace } from '../services/bucket-cache'
import { isUuid } from '../lib/ids'
import { evaluatePolicy, type CompiledPolicy, type PolicyRequest } from '../services/bucket-policy'
import type { BucketAcl, PublicAccessBlock } from '../services/public-access'
import type { ObjectRow } from '../db/repos/objects'
import { S3Error } from './errors'
import { ACTIONS, requestActions, type Operation } from './operations'
import { checkAclWrite, requestedAclWrite, type AclWrite } from './acl'
import { conditionKeys, type RequestFacts } from './policy-keys'
import { copySourceOf } from './copy-source'

export type { RequestFacts } from './policy-keys'

/** Who sent a request: a tenant (by its signature), or anyone (no signature at all). */
export type Principal = { kind: 'tenant'; tenant: AuthenticatedTenant } | { kind: 'anonymous' }

/** What an authorized request runs as: the bucket owner's tenant, and the bucket's name within it. */
export interface Authorized {
  readonly tenant: AuthenticatedTenant
  readonly bucket: string
}

/**
 * What anyone but the owner may be granted (by an ACL or a policy): reads, listings, the object
 * lock of a version (a policy only), and the writes of objects a `public-read-write` ACL (AWS's
 * WRITE to AllUsers) or a policy grants, which run as the bucket owner's (its quota, its webhooks).
 * Bucket configuration stays the owner's (501 if a policy grants it to others), and so does
 * DeleteObjects: each of its keys would need its own decision (a policy's Deny of
 * `bucket/archive/*` must not be passed by a batch), which is not built.
 */
const FOREIGN_OPS = new Set([
  'GetObject',
  'HeadObject',
  'ListObjects',
  'ListObjectsV2',
  'ListObjectVersions',
  'ListMultipartUploads',
  'HeadBucket',
  'GetObjectAcl',
  'GetBucketAcl',
  'GetObjectTagging',
  'PutObjectTagging',
  'DeleteObjectTagging',
  'GetObjectRetention',
  'PutObjectRetention',
  'GetObjectLegalHold',
  'PutObjectLegalHold',
  'PutObject',
  'PostObject',
  'CopyObject',
  'DeleteObject',
  'CreateMultipartUpload',
  'UploadPart',
  'UploadPartCopy',
  'ListParts',
  'CompleteMultipartUpload',
  'AbortMultipartUpload',
])
/** Operations the owner may always run whatever its policy denies (AWS's rule against locking oneself out). */
const POLICY_OPS = new Set(['GetBucketPolicy', 'PutBucketPolicy', 'DeleteBucketPolicy'])
/** Writes that take a canned ACL in their headers: BlockPublicAcls and ownership apply (#26). */
const ACL_WRITES = new Set(['PutObject', 'PostObject', 'CopyObject', 'CreateMultipartUpload', 'PutBucketAcl', 'PutObjectAcl', 'CreateBucket'])

/**
 * The ACL a write asks for. A re-create of one's bucket sets no ACL (ops/buckets.ts): `private`
 * there is what the bucket has, which a bucket with ACLs disabled does not refuse.
 */
function aclWriteOf(operation: Operation, request: RequestFacts, ownerId: string): AclWrite | undefined {
  const write = requestedAclWrite(request, ownerId)
  if (write && operation.name === 'CreateBucket' && (write.acl === 'private' || write.acl === 'bucket-owner-full-control')) {
    return { ...write, ownerFullControl: true }
  }
  return write
}

const denied = () => new S3Error('AccessDenied', 'Access Denied')
const noSuchBucket = (name: string) => new S3Error('NoSuchBucket', 'The specified bucket does not exist', { BucketName: name })

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(',') : v)

type Target = { bucket: string | undefined; key: string | undefined; query: ReadonlyMap<string, string> }

/**
 * Authorization: one call per request, with the operation it is. It resolves
 * whose bucket the request names (README, S3, "Public objects, ACLs and bucket policies"): a plain
 * name is the signing tenant's own bucket; `<tenant-id>:<bucket>` (Ceph RGW's syntax for another
 * tenant's bucket) names that tenant's. With COFFER_S3_ANONYMOUS_BUCKET_NAMES=unique, a plain name
 * (or `:<bucket>`, RGW's name in the default tenant) that the requester does not own also names
 * another tenant's bucket, while exactly one tenant has a bucket of that name.
 *
 * The owner may run every operation but what its bucket policy explicitly denies (AWS applies a
 * bucket policy's Deny to the owner's principals too), except the policy operations themselves.
 * Anyone else (another tenant, or anonymous) is evaluated as AWS does: the public access block,
 * then the policy (an explicit Deny wins, then an Allow), then the canned ACLs; what is granted
 * runs as the bucket owner. An object's existence is not revealed without s3:ListBucket (AWS's
 * 403-for-404 rule).
 */
export function authorize(core: Core, request: RequestFacts, principal: Principal, operation: Operation, target: Target): Authorized {
  if (operation.on === 'service' || target.bucket === undefined) {
    if (principal.kind === 'anonymous') throw denied()
    expectOwner(request, principal.tenant.id)
    return { tenant: principal.tenant, bucket: '' }
  }
  const colon = target.bucket.indexOf(':')
  const qualifier = colon < 0 ? undefined : target.bucket.slice(0, colon).toLowerCase()
  const name = colon < 0 ? target.bucket : target.bucket.slice(colon + 1)
  const unique = core.config.s3AnonymousBucketNames === 'unique'
  const workspaces = core.s3.buckets

  // The owner, naming its own bucket: always so for a qualified name, and for a plain one unless
  // another tenant's is meant (unique mode, the requester has none of that name, CreateBucket aside).
  if (principal.kind === 'tenant' && (qualifier === undefined || qualifier === principal.tenant.id)) {
    const own = workspaces.find(principal.tenant.id, name)
    const foreign = own === undefined && qualifier === undefined && unique && operation.name !== 'CreateBucket' ? workspaces.findAnyTenant(name) : []
    if (foreign.length === 0) return authorizeOwner(core, request, principal.tenant, operation, target, name, own)
  }

  // Anyone else: whose bucket it is.
  let w: Workspace | undefined
  if (qualifier !== undefined && qualifier !== '') {
    w = isUuid(qualifier) ? workspaces.find(qualifier, name) : undefined
  } else {
    if (!unique) throw denied()
    const found = workspaces.findAnyTenant(name)
    // Two tenants' buckets of that name: the plain name names neither (README).
    if (found.length > 1) throw denied()
    w = found[0]
  }
  if (!w) throw noSuchBucket(target.bucket)
  const owner = ownerOf(core, w.tenantId)
  if (!owner) throw noSuchBucket(target.bucket)
  if (principal.kind === 'tenant' && principal.tenant.id === owner.id) return authorizeOwner(core, request, owner, operation, target, name, w)
  authorizeOther(core, request, principal, operation, target, w, owner)
  // A copy's source is read by the requester too: it must be granted that read, and (as a copy runs
  // in one tenant) be a bucket of the same owner.
  if (operation.name === 'CopyObject' || operation.name === 'UploadPartCopy') {
    const source = copySourceOf(one(request.headers['x-amz-copy-source']) ?? '')
    const read: Operation = { name: 'GetObject', action: 's3:GetObject', on: 'object' }
    const from = authorize(core, request, principal, read, { bucket: source.bucket, key: source.key, query: source.query })
    if (from.tenant.id !== owner.id) throw new S3Error('NotImplemented', 'A copy between buckets of two tenants is not implemented by Coffer')
  }
  return { tenant: owner, bucket: name }
}

function authorizeOwner(
  core: Core,
  request: RequestFacts,
  tenant: AuthenticatedTenant,
  operation: Operation,
  target: Target,
  name: string,
  w: Workspace | undefined,
): Authorized {
  expectOwner(request, tenant.id)
  const { publicAccess } = core
  if (w && !POLICY_OPS.has(operation.name)) {
    const policy = publicAccess.policy(w.id, name, tenant.id, ACTIONS)
    if (policy) {
      const keys = conditionKeys(core, request, operation, target, w)
      // Any of the request's actions denied denies it (a versioned delete, a bypass of governance…).
      for (const action of requestActions(operation, target.query, request.headers)) {
        if (evaluatePolicy(policy, policyRequest('owner', operation, action, name, target, keys)) === 'deny') throw denied()
      }
    }
  }
  if (ACL_WRITES.has(operation.name)) checkAclWrite(publicAccess, w?.id, aclWriteOf(operation, request, tenant.id))
  return { tenant, bucket: name }
}

function authorizeOther(
  core: Core,
  request: RequestFacts,
  principal: Principal,
  operation: Operation,
  target: Target,
  w: Workspace,
  owner: AuthenticatedTenant,
): void {
  expectOwner(request, owner.id)
  const { publicAccess } = core
  const name = w.slug
  const block = publicAccess.block(w.id)
  const policy = publicAccess.policy(w.id, name, owner.id, ACTIONS)
  // RestrictPublicBuckets: a bucket with a public policy is its owner's alone (S3 User Guide).
  if (block.restrictPublicBuckets && policy?.isPublic) throw denied()
  const keys = conditionKeys(core, request, operation, target, policy ? w : undefined)
  const grants = (action: string, op: Operation, aclGrants: boolean) =>
    granted(policy, block, policyRequest('other', op, action, name, target, keys), aclGrants)
  const bucketAcl = publicAccess.bucketAcl(w.id)
  const listing: Operation = { name: 'ListObjects', action: 's3:ListBucket', on: 'bucket' }

  // A read's object is the version it names (`versionId`, `null` included), else the current one:
  // its own ACL is the one that grants it, never another version's.
  let object: ObjectRow | undefined
  if (operation.name === 'GetObject' || operation.name === 'HeadObject') {
    object = addressedObject(core, w, target)
    // Missing (or a delete marker): the handler answers NoSuchKey / NoSuchVersion to a caller
    // that may list the bucket, and so learn as much; anyone else learns nothing (AWS's 403).
    if (!object) {
      if (!grants('s3:ListBucket', listing, aclGrants(bucketAcl, undefined, principal, 's3:ListBucket'))) throw denied()
      return
    }
  }
  for (const action of requestActions(operation, target.query, request.headers)) {
    if (!grants(action, operation, aclGrants(bucketAcl, object, principal, action))) throw denied()
  }
  // A write by someone else names its own ACL: BlockPublicAcls refuses a public one as the owner's
  // would be, and a bucket with ACLs disabled any but the owner's full control, before anything is
  // refused as not built (AWS's answer to the client's request comes first).
  if (ACL_WRITES.has(operation.name)) checkAclWrite(publicAccess, w.id, aclWriteOf(operation, request, owner.id))
  if (!FOREIGN_OPS.has(operation.name)) {
    throw new S3Error('NotImplemented', `${operation.name} by anyone but the bucket owner is not implemented by Coffer (only objects are shared)`)
  }
}

/**
 * What the canned ACLs grant anyone but the owner, by IAM action (S3 User Guide, "Mapping of ACL
 * permissions and access policy permissions"): READ on the bucket grants its listings; WRITE on it
 * (public-read-write) creating, overwriting and deleting objects, never a version's delete (an ACL
 * grants s3:DeleteObjectVersion to no one but the owner) nor an object lock; READ on an object (or
 * version) grants reading that object (s3:GetObject, s3:GetObjectVersion). READ_ACP and WRITE_ACP,
 * which no canned ACL grants to others, are the rest: nothing. With ACLs disabled
 * (BucketOwnerEnforced) they grant nothing at all.
 */
function aclGrants(bucketAcl: BucketAcl, object: ObjectRow | undefined, principal: Principal, action: string): boolean {
  if (bucketAcl.ownership === 'BucketOwnerEnforced') return false
  switch (action) {
    case 's3:ListBucket':
    case 's3:ListBucketVersions':
    case 's3:ListBucketMultipartUploads':
      return readBy(bucketAcl.acl, principal)
    case 's3:PutObject':
    case 's3:DeleteObject':
    case 's3:AbortMultipartUpload':
      return bucketAcl.acl === 'public-read-write'
    case 's3:GetObject':
    case 's3:GetObjectVersion':
      return object !== undefined && readBy(object.info?.acl, principal)
    default:
      return false
  }
}

/** READ by a canned ACL: everyone's for public-read(-write), any tenant's for authenticated-read. */
function readBy(acl: string | undefined, principal: Principal): boolean {
  return acl === 'public-read' || acl === 'public-read-write' || (acl === 'authenticated-read' && principal.kind === 'tenant')
}

/**
 * The object a GetObject / HeadObject addresses, as its handler reads it (s3/objects.ts head): the
 * version `versionId` names, else the key's current object; undefined when there is none or it is
 * a delete marker.
 */
function addressedObject(core: Core, w: Workspace, target: Target): ObjectRow | undefined {
  const key = target.key ?? ''
  const versionId = target.query.get('versionId')
  if (versionId === undefined) return core.s3.objectsRepo.get(w.id, key)
  const v = core.s3.versions.byId(w.id, key, versionId)
  return v?.fileId ? core.s3.objectsRepo.byFile(v.fileId) : undefined
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
  action: string,
  bucket: string,
  target: { key: string | undefined },
  keys: ReadonlyMap<string, string>,
): PolicyRequest {
  const resource = operation.on === 'object' && target.key !== undefined ? `arn:aws:s3:::${bucket}/${target.key}` : `arn:aws:s3:::${bucket}`
  return { principal, action, resource, keys }
}

/**
 * A client's statement of whose bucket it expects (AWS's bucket-owner condition) must not be
 * ignored: the owner ID of a tenant's buckets is its id, and any other is AccessDenied, as AWS
 * answers it.
 */
function expectOwner(request: RequestFacts, ownerId: string): void {
  for (const name of ['x-amz-expected-bucket-owner', 'x-amz-source-expected-bucket-owner']) {
    const expected = one(request.headers[name])
    if (expected !== undefined && expected !== ownerId) throw denied()
  }
}
