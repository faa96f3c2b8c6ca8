import type { BucketConfigsService } from './bucket-configs'
import type { KmsKeyRing } from '../lib/kms-keys'
import { AppError } from '../errors'
import { kmsKey, type BucketEncryption, type SseKey } from '../s3/sse'

export type { BucketEncryption } from '../s3/sse'

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

  /**
   * The key an API upload into the workspace is sealed under: its default's key of the ring when
   * the default is aws:kms (as an S3 PutObject that asks for nothing), undefined otherwise (plain,
   * or AES256, which the data dir's own sealing is). A key the ring no longer holds (the server
   * restarted with another COFFER_KMS_KEYS_FILE, or without COFFER_KMS_DEFAULT_KEY) is 409
   * CONFLICT: the upload is refused rather than stored other than the workspace asks.
   */
  uploadKey(workspaceId: string): SseKey | undefined {
    const config = this.get(workspaceId)
    if (config?.algorithm !== 'aws:kms') return undefined
    const keyId = config.keyId ?? this.kms.defaultKeyId
    const key = keyId === undefined ? undefined : kmsKey(this.kms, keyId)
    if (key) return key
    throw new AppError(
      'CONFLICT',
      keyId === undefined
        ? "The workspace's default encryption is aws:kms with the server's default key, and the server has none (COFFER_KMS_DEFAULT_KEY)"
        : `The workspace's default encryption names the KMS key ${JSON.stringify(keyId)}, which the server's key ring (COFFER_KMS_KEYS_FILE) does not hold`,
      { field: 'encryption', keyId: keyId ?? null },
    )
  }

  delete(workspaceId: string): boolean {
    return this.configs.delete(workspaceId, FAMILY)
  }
}
