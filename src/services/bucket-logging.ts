import type { BucketConfigsService } from './bucket-configs'

/** The bucket_configs family of server access logging configurations. */
export const LOGGING = 'logging'

/** How delivered log objects are named (TargetObjectKeyFormat). */
export type LogKeyFormat = { kind: 'simple' } | { kind: 'partitioned'; dateSource: 'EventTime' | 'DeliveryTime' }

/** A bucket's LoggingEnabled, as stored in its 'logging' configuration document. */
export interface LoggingConfig {
  targetBucket: string
  targetPrefix: string
  keyFormat: LogKeyFormat
  /** Ceph RGW's ObjectRollTime extension: this bucket's roll time in seconds, over COFFER_S3_LOGGING_ROLL_SECONDS. */
  rollSeconds?: number
  /** Put with one of RGW's extension elements: GetBucketLogging answers them too. */
  rgw?: boolean
  /** When the configuration last changed (GetBucketLogging's Last-Modified, as RGW answers it). */
  modifiedAt: number
}

/**
 * Buckets' server access logging configurations (PutBucketLogging), kept as each source bucket's
 * 'logging' configuration document. The bucket is a workspace its caller resolved within its tenant.
 */
export class BucketLoggingService {
  constructor(private readonly configs: BucketConfigsService) {}

  get(workspaceId: string): LoggingConfig | undefined {
    return this.configs.get<LoggingConfig>(workspaceId, LOGGING)
  }

  /** Stores the configuration; the same one put again keeps its modification time. */
  put(workspaceId: string, config: Omit<LoggingConfig, 'modifiedAt'>, now: number): void {
    const old = this.get(workspaceId)
    if (old && sameConfig(old, config)) return
    this.configs.put(workspaceId, LOGGING, { ...config, modifiedAt: now })
  }

  delete(workspaceId: string): boolean {
    return this.configs.delete(workspaceId, LOGGING)
  }
}

function sameConfig(a: Omit<LoggingConfig, 'modifiedAt'>, b: Omit<LoggingConfig, 'modifiedAt'>): boolean {
  const strip = (c: Omit<LoggingConfig, 'modifiedAt'>) =>
    JSON.stringify([
      c.targetBucket,
      c.targetPrefix,
      c.keyFormat.kind,
      c.keyFormat.kind === 'partitioned' ? c.keyFormat.dateSource : '',
      c.rollSeconds ?? null,
      c.rgw ?? false,
    ])
  return strip(a) === strip(b)
}
