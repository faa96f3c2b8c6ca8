import { S3Error } from './errors'
import { S3_NS, esc } from './xml'

/**
 * ACLs (bucket configuration family, architecture.md). Coffer has no grants: every bucket and
 * object is its tenant's alone, which is the canned ACL `private` (and, for an object, whose owner
 * is the bucket's, `bucket-owner-full-control`). So the ACL operations answer that truth and accept
 * what does not change it; anything that would grant someone else is 501, never pretended (#24).
 */

/** AWS's canned ACLs (S3 User Guide, "Canned ACL"). */
const CANNED_ACLS = new Set([
  'private',
  'public-read',
  'public-read-write',
  'aws-exec-read',
  'authenticated-read',
  'bucket-owner-read',
  'bucket-owner-full-control',
  'log-delivery-write',
])

/** The canned ACLs that are exactly what a Coffer bucket or object already is. */
const NO_OP_ACLS = { bucket: new Set(['private']), object: new Set(['private', 'bucket-owner-full-control']) }

/**
 * An `x-amz-acl` that names no canned ACL (`public-ready`) is 400 InvalidArgument, as AWS and RGW
 * answer it, checked before any refusal of what Coffer does not implement (which would be 501).
 */
export function checkCannedAcl(value: string | undefined): void {
  if (value !== undefined && !CANNED_ACLS.has(value)) {
    throw new S3Error('InvalidArgument', 'The x-amz-acl header does not name a canned ACL', { ArgumentName: 'x-amz-acl', ArgumentValue: value })
  }
}

/** Whether the canned ACL a write asks for (if any) is what every Coffer object and bucket has. */
export function isNoOpAcl(value: string | undefined, kind: 'bucket' | 'object'): boolean {
  return value === undefined || NO_OP_ACLS[kind].has(value)
}

/**
 * PutBucketAcl / PutObjectAcl: the header form with a canned ACL that is Coffer's state is a
 * no-op (200). Grants (`x-amz-grant-*`), an `AccessControlPolicy` body, another canned ACL, or no
 * ACL at all are 501: Coffer cannot grant, and an ACL body is not read to find out that it grants
 * nothing.
 */
export function checkPutAcl(headers: Record<string, string | string[] | undefined>, bodyBytes: number, kind: 'bucket' | 'object'): void {
  const canned = headers['x-amz-acl']
  const value = Array.isArray(canned) ? canned.join(',') : canned
  checkCannedAcl(value)
  const grants = Object.keys(headers).filter((h) => h.startsWith('x-amz-grant-'))
  if (value === undefined || !isNoOpAcl(value, kind) || grants.length > 0 || bodyBytes > 0) {
    throw new S3Error(
      'NotImplemented',
      `Coffer implements no ACL grants: only the canned ACL ${[...NO_OP_ACLS[kind]].join(' or ')} (the x-amz-acl header, no body), which every ${kind} already has`,
    )
  }
}

/** GetBucketAcl / GetObjectAcl: the owner (the tenant) with FULL_CONTROL, and no other grant. */
export function ownerOnlyAcl(owner: { ID: string; DisplayName: string }): string {
  const who = `<ID>${esc(owner.ID)}</ID><DisplayName>${esc(owner.DisplayName)}</DisplayName>`
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<AccessControlPolicy xmlns="${S3_NS}"><Owner>${who}</Owner><AccessControlList><Grant>` +
    `<Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser">${who}</Grantee>` +
    `<Permission>FULL_CONTROL</Permission></Grant></AccessControlList></AccessControlPolicy>`
  )
}
