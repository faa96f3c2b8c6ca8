import type { BucketConfigsService } from './bucket-configs'

/** A bucket's (workspace's) default encryption, as PutBucketEncryption sets it (#27). */
export interface BucketEncryption {
  /** SSE-S3: Coffer's own keys. The only algorithm built (SSE-KMS and SSE-C are not, yet). */
  algorithm: 'AES256'
}

const FAMILY = 'encryption'

/**
 * Server-side encryption for both fronts (#27). Every blob of an encrypted data dir
 * (COFFER_ENCRYPTION_KEY_FILE) is sealed at rest whoever writes it, so SSE-S3 is what every object
 * of such a data dir has: an S3 write asking for it, an API upload into a bucket whose default
 * asks for it, and a read reporting it are all true. Without an encrypted data dir, asking for it
 * is refused (never claimed and not done).
 */
export class BucketEncryptionService {
  constructor(
    private readonly configs: BucketConfigsService,
    /** True when the data dir seals every blob. */
    readonly atRest: boolean,
  ) {}

  get(workspaceId: string): BucketEncryption | undefined {
    return this.configs.get<BucketEncryption>(workspaceId, FAMILY)
  }

  /** Sets the default; false when the data dir is not encrypted (nothing stored, the caller refuses). */
  put(workspaceId: string, config: BucketEncryption): boolean {
    if (!this.atRest) return false
    this.configs.put(workspaceId, FAMILY, config)
    return true
  }

  delete(workspaceId: string): boolean {
    return this.configs.delete(workspaceId, FAMILY)
  }
}
