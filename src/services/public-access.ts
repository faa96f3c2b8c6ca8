import type { BucketConfigsService } from './bucket-configs'
import { compilePolicy, type CompiledPolicy } from './bucket-policy'

/**
 * What a bucket makes public (#26), for both fronts: its canned ACL and object ownership setting
 * (family `acl`), its policy (family `policy`) and its public access block (family
 * `public-access-block`), stored as bucket configuration documents; objects carry their own canned
 * ACL in their object_info. The server setting COFFER_S3_BLOCK_PUBLIC_ACCESS is an account-level
 * block over every bucket: all four settings on, whatever a bucket says.
 */

/**
 * The canned ACLs Coffer implements (S3 User Guide, "Canned ACL"). The object owner is always the
 * bucket owner here, so `bucket-owner-read` and `bucket-owner-full-control` are `private`.
 */
export const CANNED_ACLS = ['private', 'public-read', 'public-read-write', 'authenticated-read', 'bucket-owner-read', 'bucket-owner-full-control'] as const
export type CannedAcl = (typeof CANNED_ACLS)[number]

/** The canned ACLs AWS counts as public (AllUsers or AuthenticatedUsers grants). */
export const isPublicAcl = (acl: string | undefined): boolean => acl === 'public-read' || acl === 'public-read-write' || acl === 'authenticated-read'

/** Object ownership (x-amz-object-ownership): BucketOwnerEnforced disables ACLs, as on AWS. */
export type ObjectOwnership = 'BucketOwnerEnforced' | 'BucketOwnerPreferred' | 'ObjectWriter'
export const OBJECT_OWNERSHIPS: readonly ObjectOwnership[] = ['BucketOwnerEnforced', 'BucketOwnerPreferred', 'ObjectWriter']

/** The `acl` family's document. */
export interface BucketAcl {
  acl: CannedAcl
  ownership?: ObjectOwnership
  /** false when an AccessControlPolicy revoked every grant (the owner's too): GetBucketAcl lists none. */
  listed?: boolean
}

/** PutPublicAccessBlock's four settings (S3 User Guide, "Blocking public access"). */
export interface PublicAccessBlock {
  blockPublicAcls: boolean
  ignorePublicAcls: boolean
  blockPublicPolicy: boolean
  restrictPublicBuckets: boolean
}

const ALL_BLOCKED: PublicAccessBlock = { blockPublicAcls: true, ignorePublicAcls: true, blockPublicPolicy: true, restrictPublicBuckets: true }
const NONE_BLOCKED: PublicAccessBlock = { blockPublicAcls: false, ignorePublicAcls: false, blockPublicPolicy: false, restrictPublicBuckets: false }

export class PublicAccessService {
  /** Compiled policies by owner, bucket and text: a policy is compiled once, not on every request. */
  private readonly compiled = new Map<string, CompiledPolicy>()

  constructor(
    private readonly configs: BucketConfigsService,
    /** COFFER_S3_BLOCK_PUBLIC_ACCESS. */
    readonly serverBlock: boolean,
  ) {}

  bucketAcl(workspaceId: string): BucketAcl {
    return this.configs.get<BucketAcl>(workspaceId, 'acl') ?? { acl: 'private' }
  }

  putBucketAcl(workspaceId: string, doc: BucketAcl): void {
    this.configs.put(workspaceId, 'acl', doc)
  }

  /**
   * The bucket's ownership controls (PutBucketOwnershipControls, or CreateBucket's
   * x-amz-object-ownership); undefined for a bucket that has none, whose ACLs are enabled.
   */
  ownership(workspaceId: string): ObjectOwnership | undefined {
    return this.bucketAcl(workspaceId).ownership
  }

  /** Sets the bucket's ownership controls, or removes them (undefined), keeping its ACL. */
  putOwnership(workspaceId: string, ownership: ObjectOwnership | undefined): void {
    const { ownership: _old, ...doc } = this.bucketAcl(workspaceId)
    this.putBucketAcl(workspaceId, ownership === undefined ? doc : { ...doc, ownership })
  }

  /** Whether ACLs are disabled on the bucket (BucketOwnerEnforced). */
  aclsDisabled(workspaceId: string): boolean {
    return this.bucketAcl(workspaceId).ownership === 'BucketOwnerEnforced'
  }

  policyText(workspaceId: string): string | undefined {
    return this.configs.get<{ text: string }>(workspaceId, 'policy')?.text
  }

  /** The bucket's policy, compiled; undefined without one. */
  policy(workspaceId: string, bucket: string, ownerId: string, actions: readonly string[]): CompiledPolicy | undefined {
    const text = this.policyText(workspaceId)
    return text === undefined ? undefined : this.compile(text, bucket, ownerId, actions)
  }

  /** Compiles (refusing with MalformedPolicyError what cannot be decided) without storing. */
  compile(text: string, bucket: string, ownerId: string, actions: readonly string[]): CompiledPolicy {
    const k = `${ownerId}\0${bucket}\0${text}`
    const known = this.compiled.get(k)
    if (known) return known
    const p = compilePolicy(text, bucket, ownerId, actions)
    if (this.compiled.size >= 1000) this.compiled.clear()
    this.compiled.set(k, p)
    return p
  }

  putPolicy(workspaceId: string, text: string): void {
    this.configs.put(workspaceId, 'policy', { text })
  }

  deletePolicy(workspaceId: string): boolean {
    return this.configs.delete(workspaceId, 'policy')
  }

  /** The bucket's own public access block, as PutPublicAccessBlock stored it. */
  storedBlock(workspaceId: string): PublicAccessBlock | undefined {
    return this.configs.get<PublicAccessBlock>(workspaceId, 'public-access-block')
  }

  /** What is enforced: the bucket's settings, every one on under the server-wide block. */
  block(workspaceId: string | undefined): PublicAccessBlock {
    if (this.serverBlock) return ALL_BLOCKED
    return (workspaceId === undefined ? undefined : this.storedBlock(workspaceId)) ?? NONE_BLOCKED
  }

  putBlock(workspaceId: string, doc: PublicAccessBlock): void {
    this.configs.put(workspaceId, 'public-access-block', doc)
  }

  deleteBlock(workspaceId: string): boolean {
    return this.configs.delete(workspaceId, 'public-access-block')
  }
}
