import type { FastifyRequest } from 'fastify'
import { CANNED_ACLS, isPublicAcl, type CannedAcl, type PublicAccessService } from '../services/public-access'
import { S3Error } from './errors'
import { S3_NS, childOf, esc, parseXml, textOf } from './xml'

/**
 * ACLs on the wire (#26; what they mean is services/public-access.ts). Coffer stores a canned ACL
 * per bucket and per object. A request may say it as `x-amz-acl`, as `x-amz-grant-*` headers or as
 * an AccessControlPolicy body: grants are read back into the canned ACL they amount to, and a grant
 * no canned ACL expresses (to another tenant, by e-mail, WRITE_ACP to everyone, …) is 501, never
 * pretended. `public-read-write` lets anyone write the bucket's objects, as on AWS (authorize.ts).
 */

const ALL_USERS = 'http://acs.amazonaws.com/groups/global/AllUsers'
const AUTHENTICATED_USERS = 'http://acs.amazonaws.com/groups/global/AuthenticatedUsers'

/** AWS's canned ACLs, including those Coffer does not implement (their names are no client error). */
const AWS_CANNED = new Set<string>([...CANNED_ACLS, 'aws-exec-read', 'log-delivery-write'])

/**
 * An `x-amz-acl` that names no canned ACL (`public-ready`) is 400 InvalidArgument, as AWS and RGW
 * answer it, checked before any refusal of what Coffer does not implement (which would be 501).
 */
export function checkCannedAcl(value: string | undefined): void {
  if (value !== undefined && !AWS_CANNED.has(value)) {
    throw new S3Error('InvalidArgument', 'The x-amz-acl header does not name a canned ACL', { ArgumentName: 'x-amz-acl', ArgumentValue: value })
  }
}

type Grantee = 'owner' | 'all' | 'authenticated'
interface Grant {
  grantee: Grantee
  permission: string
}

const notImplemented = (why: string) =>
  new S3Error('NotImplemented', `${why} is not implemented by Coffer: only the grants of a canned ACL to the owner, AllUsers or AuthenticatedUsers`)

/** The canned ACL a set of grants amounts to (the owner always keeps FULL_CONTROL). */
function cannedOf(grants: Grant[]): CannedAcl {
  // The owner always has FULL_CONTROL here: an ACL granting it less cannot be honoured.
  const lesser = grants.find((g) => g.grantee === 'owner' && g.permission !== 'FULL_CONTROL')
  if (lesser) throw notImplemented(`The owner's ${lesser.permission} alone (the owner always has FULL_CONTROL)`)
  const rest = new Set(grants.filter((g) => g.grantee !== 'owner').map((g) => `${g.grantee}:${g.permission}`))
  const is = (...want: string[]) => rest.size === want.length && want.every((w) => rest.has(w))
  if (is()) return 'private'
  if (is('all:READ')) return 'public-read'
  if (is('authenticated:READ')) return 'authenticated-read'
  if (is('all:READ', 'all:WRITE')) return 'public-read-write'
  throw notImplemented(`The grants ${[...rest].join(', ')}`)
}

function granteeOf(ownerId: string, kind: 'id' | 'uri' | 'email', value: string): Grantee {
  if (kind === 'id' && value === ownerId) return 'owner'
  if (kind === 'uri' && value === ALL_USERS) return 'all'
  if (kind === 'uri' && value === AUTHENTICATED_USERS) return 'authenticated'
  if (kind === 'uri') throw new S3Error('InvalidArgument', `Invalid group uri: ${value}`)
  throw notImplemented(`A grant to ${kind === 'email' ? 'an e-mail address' : `the canonical user ${value}`} (another account)`)
}

const GRANT_HEADERS: Record<string, string> = {
  'x-amz-grant-read': 'READ',
  'x-amz-grant-write': 'WRITE',
  'x-amz-grant-read-acp': 'READ_ACP',
  'x-amz-grant-write-acp': 'WRITE_ACP',
  'x-amz-grant-full-control': 'FULL_CONTROL',
}

/** `x-amz-grant-read: uri="http://…/AllUsers", id="…"`. */
function headerGrants(request: Pick<FastifyRequest, 'headers'>, ownerId: string): Grant[] | undefined {
  const grants: Grant[] = []
  let any = false
  for (const [name, permission] of Object.entries(GRANT_HEADERS)) {
    const raw = request.headers[name]
    if (raw === undefined) continue
    any = true
    for (const item of (Array.isArray(raw) ? raw.join(',') : raw).split(',')) {
      const m = /^\s*(id|uri|emailAddress)\s*=\s*"?([^"]*)"?\s*$/i.exec(item)
      if (!m) throw new S3Error('InvalidArgument', `Invalid ${name} value`)
      const kind = m[1]!.toLowerCase() === 'emailaddress' ? 'email' : (m[1]!.toLowerCase() as 'id' | 'uri')
      grants.push({ grantee: granteeOf(ownerId, kind, m[2]!), permission })
    }
  }
  return any ? grants : undefined
}

/**
 * The canned ACL a write's headers ask for (x-amz-acl or x-amz-grant-*), or undefined when they
 * ask for none. Both at once is InvalidRequest, as AWS answers it.
 */
export function requestedAcl(request: Pick<FastifyRequest, 'headers'>, ownerId: string): CannedAcl | undefined {
  const raw = request.headers['x-amz-acl']
  const canned = Array.isArray(raw) ? raw.join(',') : raw
  checkCannedAcl(canned)
  const grants = headerGrants(request, ownerId)
  if (canned !== undefined && grants !== undefined) {
    throw new S3Error('InvalidRequest', 'Specifying both Canned ACLs and Header Grants is not allowed')
  }
  if (grants !== undefined) return cannedOf(grants)
  if (canned === undefined) return undefined
  if (!(CANNED_ACLS as readonly string[]).includes(canned)) {
    throw new S3Error('NotImplemented', `The canned ACL ${canned} is not implemented by Coffer (it would deliver logs or grant EC2 reads)`)
  }
  return canned as CannedAcl
}

/**
 * An AccessControlPolicy body (PutBucketAcl / PutObjectAcl) as the canned ACL it amounts to. An
 * empty AccessControlList (no grant at all, not even the owner's) is `private` whose grants are
 * listed as none (`listed: false`): the owner keeps its rights (on AWS, its account's), as RGW.
 */
export function aclOfBodyListed(body: Buffer, ownerId: string): { acl: CannedAcl; listed: boolean } {
  const acl = aclOfBody(body, ownerId)
  const list = childOf(childOf(parseXml(body), 'AccessControlPolicy'), 'AccessControlList')
  return { acl, listed: !(acl === 'private' && (list?.Grant === undefined || (Array.isArray(list.Grant) && list.Grant.length === 0))) }
}

/** An AccessControlPolicy body (PutBucketAcl / PutObjectAcl) as the canned ACL it amounts to. */
export function aclOfBody(body: Buffer, ownerId: string): CannedAcl {
  const doc = childOf(parseXml(body), 'AccessControlPolicy')
  const malformedAcl = () => new S3Error('MalformedACLError', 'The XML you provided was not well-formed or did not validate against our published schema')
  if (!doc) throw malformedAcl()
  const ownerIdGiven = textOf(childOf(doc, 'Owner'), 'ID')
  if (ownerIdGiven !== undefined && ownerIdGiven !== ownerId) throw new S3Error('AccessDenied', 'Access Denied')
  const list = childOf(doc, 'AccessControlList')
  if (!list) throw malformedAcl()
  const raw = list.Grant
  const items = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]) as unknown[]
  const grants = items.map((g): Grant => {
    const grantee = childOf(g, 'Grantee')
    const permission = textOf(g, 'Permission')
    if (!grantee || !permission || !['READ', 'WRITE', 'READ_ACP', 'WRITE_ACP', 'FULL_CONTROL'].includes(permission)) throw malformedAcl()
    const id = textOf(grantee, 'ID')
    const uri = textOf(grantee, 'URI')
    const email = textOf(grantee, 'EmailAddress')
    const who =
      id !== undefined
        ? granteeOf(ownerId, 'id', id)
        : uri !== undefined
          ? granteeOf(ownerId, 'uri', uri)
          : email !== undefined
            ? granteeOf(ownerId, 'email', email)
            : (() => {
                throw malformedAcl()
              })()
    return { grantee: who, permission }
  })
  return cannedOf(grants)
}

/** GetBucketAcl / GetObjectAcl: the grants AWS lists for that canned ACL (none when they were all revoked). */
export function aclXml(owner: { ID: string; DisplayName: string }, acl: CannedAcl, listed = true): string {
  const who = `<ID>${esc(owner.ID)}</ID><DisplayName>${esc(owner.DisplayName)}</DisplayName>`
  const grant = (grantee: string, type: string, permission: string) =>
    `<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="${type}">${grantee}</Grantee><Permission>${permission}</Permission></Grant>`
  const group = (uri: string, permission: string) => grant(`<URI>${uri}</URI>`, 'Group', permission)
  const extra =
    acl === 'public-read'
      ? group(ALL_USERS, 'READ')
      : acl === 'public-read-write'
        ? group(ALL_USERS, 'READ') + group(ALL_USERS, 'WRITE')
        : acl === 'authenticated-read'
          ? group(AUTHENTICATED_USERS, 'READ')
          : ''
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<AccessControlPolicy xmlns="${S3_NS}"><Owner>${who}</Owner><AccessControlList>` +
    // Group grants first, as RGW lists them (ceph/s3-tests' check_grants relies on that order).
    (listed ? extra + grant(who, 'CanonicalUser', 'FULL_CONTROL') : '') +
    `</AccessControlList></AccessControlPolicy>`
  )
}

/**
 * An ACL a write asks for, and whether it is the bucket owner's full control alone: the one ACL a
 * bucket with ACLs disabled (BucketOwnerEnforced) takes, as `bucket-owner-full-control` or as the
 * grants (headers or an AccessControlPolicy body) that amount to it. `x-amz-acl: private` is not:
 * AWS refuses it there (AccessControlListNotSupported).
 */
export interface AclWrite {
  acl: CannedAcl
  ownerFullControl: boolean
}

/** The ACL a write's headers ask for (requestedAcl), with whether it is the owner's full control alone. */
export function requestedAclWrite(request: Pick<FastifyRequest, 'headers'>, ownerId: string): AclWrite | undefined {
  const acl = requestedAcl(request, ownerId)
  if (acl === undefined) return undefined
  const raw = request.headers['x-amz-acl']
  const canned = Array.isArray(raw) ? raw.join(',') : raw
  // Without x-amz-acl the ACL came from x-amz-grant-* headers: `private` is then the owner's FULL_CONTROL alone.
  return { acl, ownerFullControl: canned === undefined ? acl === 'private' : canned === 'bucket-owner-full-control' }
}

/**
 * Whether a bucket takes this ACL (#26): a public one is AccessDenied under BlockPublicAcls (the
 * bucket's or the server's), and with ACLs disabled (BucketOwnerEnforced) any but the owner's full
 * control alone is AccessControlListNotSupported, as AWS answers both.
 */
export function checkAclWrite(publicAccess: PublicAccessService, workspaceId: string | undefined, write: AclWrite | undefined): void {
  if (write === undefined) return
  if (isPublicAcl(write.acl) && publicAccess.block(workspaceId).blockPublicAcls) throw new S3Error('AccessDenied', 'Access Denied')
  if (workspaceId !== undefined && !write.ownerFullControl && publicAccess.aclsDisabled(workspaceId)) {
    throw new S3Error('AccessControlListNotSupported', 'The bucket does not allow ACLs')
  }
}
