import type { BucketConfigsService } from './bucket-configs'
import type { KmsKeyRing } from '../lib/kms-keys'

/** A bucket's (workspace's) default encryption, as PutBucketEncryption sets it (#27). */
export type BucketEncryption =
  /** SSE-S3: Coffer's own keys (the encrypted data dir). */
  | { algorithm: 'AES256' }
  /** SSE-KMS with a key of Coffer's key ring; `keyId` absent: the ring's default key at each write. */
  | { algorithm: 'aws:kms'; keyId?: string }

const FAMILY = 'encryption'

/** Why a default encryption cannot be set. */
export type RefusedEncryption = 'needs-data-dir-key' | 'unknown-kms-key' | 'no-default-kms-key'

/**
 * Server-side encryption for both fronts (#27). Every blob of an encrypted data dir
 * (COFFER_ENCRYPTION_KEY_FILE) is sealed at rest whoever writes it, so SSE-S3 is what every object
 * of such a data dir has: an S3 write asking for it, an API upload into a bucket whose default
 * asks for it, and a read reporting it are all true. Without an encrypted data dir, asking for it
 * is refused (never claimed and not done). SSE-KMS seals an object under a key of the ring
 * (lib/kms-keys.ts), with or without an encrypted data dir.
 */
export class BucketEncryptionService {
  constructor(
    private readonly configs: BucketConfigsService,
    /** True when the data dir seals every blob. */
    readonly atRest: boolean,
    readonly kms: KmsKeyRing,
  ) {}

  get(workspaceId: string): BucketEncryption | undefined {
    return this.configs.get<BucketEncryption>(workspaceId, FAMILY)
  }

  /** Sets the default; a reason when it cannot be honoured (nothing stored, the caller refuses). */
  put(workspaceId: string, config: BucketEncryption): RefusedEncryption | undefined {
    if (config.algorithm === 'AES256' && !this.atRest) return 'needs-data-dir-key'
    if (config.algorithm === 'aws:kms') {
      if (config.keyId !== undefined && !this.kms.key(config.keyId)) return 'unknown-kms-key'
      if (config.keyId === undefined && this.kms.defaultKeyId === undefined) return 'no-default-kms-key'
    }
    this.configs.put(workspaceId, FAMILY, config)
    return undefined
  }

  delete(workspaceId: string): boolean {
    return this.configs.delete(workspaceId, FAMILY)
  }
}
