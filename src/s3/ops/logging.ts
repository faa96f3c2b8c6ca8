import { LOGGING, type LoggingConfig, type LogKeyFormat } from '../../services/bucket-logging'
import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, malformed, parseXml, textOf } from '../xml'
import { xml, type Handlers } from './context'
import type { XmlNode } from '../xml'

declare module 'fastify' {
  interface FastifyInstance {
    /** This S3 listener's access log delivery (access-log.ts). */
    s3AccessLogs?: import('../access-log').AccessLogDelivery
  }
}

/** What PutBucketLogging's body asks for: a configuration, or none (logging off). */
type Requested = (Omit<LoggingConfig, 'modifiedAt'> & { grants: boolean; rgw: boolean }) | undefined

const GRANT_PERMISSIONS = new Set(['FULL_CONTROL', 'READ', 'WRITE'])

/** The most a bucket's ObjectRollTime (RGW's extension) may say: a day. */
const MAX_ROLL_SECONDS = 86400

/** `<BucketLoggingStatus>`: an empty one turns logging off; a LoggingEnabled needs TargetBucket and TargetPrefix. */
function parseLoggingStatus(body: Buffer): Requested {
  const status = childOf(parseXml(body), 'BucketLoggingStatus')
  if (!status) throw malformed()
  const enabled = childOf(status, 'LoggingEnabled')
  if (enabled === undefined) {
    if (status.LoggingEnabled !== undefined) throw malformed()
    return undefined
  }
  const targetBucket = textOf(enabled, 'TargetBucket')
  const targetPrefix = textOf(enabled, 'TargetPrefix')
  if (targetBucket === undefined || targetPrefix === undefined) throw malformed()
  let keyFormat: LogKeyFormat = { kind: 'simple' }
  const format = childOf(enabled, 'TargetObjectKeyFormat')
  if (enabled.TargetObjectKeyFormat !== undefined) {
    if (format === undefined) throw malformed()
    const partitioned = childOf(format, 'PartitionedPrefix')
    const simple = format.SimplePrefix !== undefined
    if (partitioned !== undefined && simple) throw malformed()
    if (partitioned !== undefined) {
      const source = textOf(partitioned, 'PartitionDateSource') ?? 'EventTime'
      if (source !== 'EventTime' && source !== 'DeliveryTime') throw malformed()
      keyFormat = { kind: 'partitioned', dateSource: source }
    } else if (!simple) throw malformed()
  }
  const grants = childOf(enabled, 'TargetGrants')
  if (enabled.TargetGrants !== undefined && grants === undefined && enabled.TargetGrants !== '') throw malformed()
  const grantList = grants?.Grant === undefined ? [] : Array.isArray(grants.Grant) ? (grants.Grant as unknown[]) : [grants.Grant]
  for (const g of grantList) {
    const permission = textOf(g, 'Permission')
    if (childOf(g, 'Grantee') === undefined || (permission !== undefined && !GRANT_PERMISSIONS.has(permission))) throw malformed()
  }
  // Ceph RGW's extensions (its botocore model adds them): a roll time of the bucket's own, Standard records only.
  const roll = textOf(enabled, 'ObjectRollTime')
  if (roll !== undefined && !/^\d{1,9}$/.test(roll.trim())) throw malformed()
  const type = textOf(enabled, 'LoggingType')
  if (type !== undefined && type !== 'Standard' && type !== 'Journal') throw malformed()
  if (type === 'Journal') throw new S3Error('NotImplemented', 'Journal logging (a Ceph RGW extension) is not implemented by Coffer: only Standard records')
  const batch = textOf(enabled, 'RecordsBatchSize')
  if (batch !== undefined && !/^\d{1,9}$/.test(batch.trim())) throw malformed()
  const rollSeconds = roll === undefined ? undefined : Math.min(MAX_ROLL_SECONDS, Math.max(1, Number(roll.trim())))
  return {
    targetBucket,
    targetPrefix,
    keyFormat,
    ...(rollSeconds !== undefined ? { rollSeconds } : {}),
    grants: grantList.length > 0,
    rgw: roll !== undefined || type !== undefined || batch !== undefined,
  }
}

/** Server access logging's configuration (Put/GetBucketLogging) and RGW's flush (POST ?logging). */
export const loggingHandlers = {
  async PutBucketLogging({ core, s3, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const requested = parseLoggingStatus(await readSmallBody(body(), MAX_XML_BODY_BYTES))
    if (requested === undefined) {
      core.bucketLogging.delete(w.id)
      return reply.send()
    }
    // The target is one of the same owner's buckets, as AWS requires (a tenant is an account here).
    let target
    try {
      target = s3.buckets.resolve(tenant, requested.targetBucket)
    } catch {
      target = undefined
    }
    if (target === undefined) {
      throw new S3Error('InvalidTargetBucketForLogging', 'The target bucket for logging does not exist', { TargetBucket: requested.targetBucket })
    }
    // AWS: a target whose Object Ownership is BucketOwnerEnforced takes no grants, only policies.
    if (requested.grants && core.publicAccess.aclsDisabled(target.id)) {
      throw new S3Error(
        'InvalidTargetBucketForLogging',
        'Target grants are not supported for a target bucket with the bucket owner enforced setting for Object Ownership',
        { TargetBucket: requested.targetBucket },
      )
    }
    core.bucketLogging.put(
      w.id,
      {
        targetBucket: requested.targetBucket,
        targetPrefix: requested.targetPrefix,
        keyFormat: requested.keyFormat,
        ...(requested.rollSeconds !== undefined ? { rollSeconds: requested.rollSeconds } : {}),
        ...(requested.rgw ? { rgw: true } : {}),
      },
      core.clock.now(),
    )
    return reply.send()
  },

  GetBucketLogging({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const config = core.bucketLogging.get(w.id)
    if (config === undefined) return xml(reply, 'BucketLoggingStatus', {})
    reply.header('last-modified', new Date(config.modifiedAt).toUTCString())
    const enabled: XmlNode = {
      TargetBucket: config.targetBucket,
      TargetPrefix: config.targetPrefix,
      TargetObjectKeyFormat:
        config.keyFormat.kind === 'simple' ? { SimplePrefix: {} } : { PartitionedPrefix: { PartitionDateSource: config.keyFormat.dateSource } },
    }
    if (config.rollSeconds !== undefined) enabled.ObjectRollTime = config.rollSeconds
    if (config.rgw) {
      enabled.LoggingType = 'Standard'
      enabled.RecordsBatchSize = 0
    }
    return xml(reply, 'BucketLoggingStatus', { LoggingEnabled: enabled })
  },

  /** Ceph RGW's extension: delivers the bucket's pending records now, naming the object written. */
  async PostBucketLogging({ core, s3, tenant, bucket, request, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    if (core.bucketConfigs.get(w.id, LOGGING) === undefined) {
      throw new S3Error('InvalidArgument', 'Logging is not enabled on the bucket', { BucketName: bucket })
    }
    const key = await request.server.s3AccessLogs?.flushBucket(w.id)
    return xml(reply, 'PostBucketLoggingOutput', key === undefined ? {} : { FlushedLoggingObject: key })
  },
} satisfies Handlers
