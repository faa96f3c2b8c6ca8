import type { BucketConfigsRepo } from '../db/repos/bucket-configs'
import type { Clock } from '../lib/clock'
import type { BucketCache } from './bucket-cache'

/**
 * A bucket's configuration documents (CORS rules, a policy, public access block, tags, lifecycle
 * rules, default encryption, …), one per family, for both fronts. Each family's service validates
 * its document and gives it a type; this stores and returns it. The bucket is a workspace the caller
 * has already resolved within its tenant (so a foreign bucket never reaches here).
 */
export class BucketConfigsService {
  constructor(
    private readonly repo: BucketConfigsRepo,
    private readonly clock: Clock,
    /** Every request reads the documents of its bucket: kept across requests (#29). */
    private readonly cache?: BucketCache,
  ) {}

  get<T>(workspaceId: string, family: string): T | undefined {
    // Parsed at each call, so that no caller can change what the next one reads.
    const text = this.cache ? this.cache.config(workspaceId, family) : this.repo.get(workspaceId, family)
    return text === undefined ? undefined : (JSON.parse(text) as T)
  }

  put(workspaceId: string, family: string, document: unknown): void {
    this.repo.put(workspaceId, family, JSON.stringify(document), this.clock.now())
  }

  /** The document of a tenant's bucket by name, without resolving the bucket first (one read). */
  ofBucket<T>(tenantId: string, bucket: string, family: string): T | undefined {
    const text = this.repo.ofBucket(tenantId, bucket, family)
    return text === undefined ? undefined : (JSON.parse(text) as T)
  }

  /** The documents of that family of every tenant's bucket of that name. */
  byBucketName<T>(bucket: string, family: string): T[] {
    return this.repo.byBucketName(bucket, family).map((text) => JSON.parse(text) as T)
  }

  /** True when the bucket had a document of that family. */
  delete(workspaceId: string, family: string): boolean {
    return this.repo.delete(workspaceId, family)
  }
}
