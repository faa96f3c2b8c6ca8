import type { BucketConfigsService } from './bucket-configs'
import type { KmsKeyRing } from '../lib/kms-keys'
import { AppError } from '../errors'
import { defaultKey, kmsKey, type BucketEncryption, type ServerKeys, type SseKey } from '../s3/sse'

export type { BucketEncryption } from '../s3/sse'

const FAMILY = 'encryption'

/** Why a default encryption cannot be set. */
export type RefusedEncryption = 'unknown-kms-key' | 'no-default-kms-key'

/**
 * Server-side encryption for both fronts (#27). Every blob of an encrypted data dir
 * (COFFER_ENCRYPTION_KEY_FILE) is sealed at rest whoever writes it, so SSE-S3 is what every object
 * of such a data dir has: an S3 write asking for it, an API upload into a bucket whose default
 * asks for it, and a read reporting it are all true. Without an encrypted data dir, an object
 * asking for SSE-S3 (or whose bucket's default is AES256) is sealed on its own under Coffer's
 * SSE-S3 key (services/encryption.ts SseS3Keys). SSE-KMS seals an object under a key of the ring
 * (lib/kms-keys.ts), with or without an encrypted data dir.
 */
export class BucketEncryptionService {
  constructor(
    private readonly configs: BucketConfigsService,
    /** True when the data dir seals every blob. */
    readonly atRest: boolean,
    private readonly keys: ServerKeys,
  ) {}

  get kms(): KmsKeyRing {
    return this.keys.kms
  }

  get(workspaceId: string): BucketEncryption | undefined {
    return this.configs.get<BucketEncryption>(workspaceId, FAMILY)
  }

  /**
   * Sets the default of a workspace of `tenantId`; a reason when it cannot be honoured (nothing
   * stored, the caller refuses). A KMS key that tenant may not use is refused as an unknown one.
   */
  put(workspaceId: string, tenantId: string, config: BucketEncryption): RefusedEncryption | undefined {
    if (config.algorithm === 'aws:kms') {
      if (config.keyId !== undefined && !this.kms.sealKey(config.keyId, tenantId)) return 'unknown-kms-key'
      if (config.keyId === undefined && this.kms.defaultKeyFor(tenantId) === undefined) return 'no-default-kms-key'
    }
    this.configs.put(workspaceId, FAMILY, config)
    return undefined
  }

  /**
   * The key an API upload into the workspace is sealed under, as an S3 PutObject that asks for
   * nothing: its default's key of the ring when the default is aws:kms, Coffer's SSE-S3 key when it
   * is AES256 without a master key; undefined otherwise (plain, or AES256 with a master key, which
   * the data dir's own sealing is). A key the ring no longer holds (the server
   * restarted with another COFFER_KMS_KEYS_FILE, or without COFFER_KMS_DEFAULT_KEY) is 409
   * CONFLICT: the upload is refused rather than stored other than the workspace asks. So is a key
   * the workspace's tenant `tenantId` may no longer use (the ring's tenant list changed), alike.
   */
  uploadKey(workspaceId: string, tenantId: string): SseKey | undefined {
    const config = this.get(workspaceId)
    if (config?.algorithm !== 'aws:kms') return defaultKey(this.keys, config, tenantId)
    const keyId = config.keyId ?? this.kms.defaultKeyFor(tenantId)
    const key = keyId === undefined ? undefined : kmsKey(this.kms, keyId, tenantId)
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
