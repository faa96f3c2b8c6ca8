import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import type { Core } from '../core'
import { authenticationView, type AuthenticatedTenant } from '../db/repos/tenants'
import { redactUrl } from '../lib/logger'
import type { LoggingConfig } from '../services/bucket-logging'
import { S3Error } from './errors'
import type { OperationName } from './operations'

declare module 'fastify' {
  interface FastifyRequest {
    /** The logged bucket the request is on and its logging configuration, set once it is authorized (routes.ts). */
    s3LogSource?: LogSource
    /** A PutBucketLogging's bucket: its log is read once it is answered, so that the put that turns logging on is its first record. */
    s3LogAfter?: { tenant: AuthenticatedTenant; bucket: string }
    /** The S3 error code the request was answered with (the log record's error code field). */
    s3ErrorCode?: string
    /** When the response's first byte was ready (ms since the request began): the turn-around time. */
    s3TurnAround?: number
    /** The keys a DeleteObjects deleted: AWS logs one BATCH.DELETE.OBJECT record for each. */
    s3BatchDeleted?: { key: string; versionId: string | undefined }[]
  }
}

/** A request's bucket whose server access log records it. */
export interface LogSource {
  tenant: AuthenticatedTenant
  bucket: string
  workspaceId: string
  config: LoggingConfig
}

/**
 * The request's bucket and its logging configuration when it logs, else undefined. Read as the
 * request is authorized, beside its other reads of the bucket, so that a request on a bucket that
 * does not log pays no read of its own for logging.
 */
export function logSourceOf(core: Core, tenant: AuthenticatedTenant, bucket: string): LogSource | undefined {
  let workspaceId: string
  try {
    workspaceId = core.s3.buckets.resolve(tenant, bucket).id
  } catch {
    // Not there (CreateBucket, a NoSuchBucket): nothing logs it.
    return undefined
  }
  const config = core.bucketLogging.get(workspaceId)
  return config === undefined ? undefined : { tenant, bucket, workspaceId, config }
}

/** The operation field of a record: AWS's REST.<method>.<resource type> names. */
const OPERATION_FIELD: Record<OperationName, string> = {
  ListBuckets: 'REST.GET.SERVICE',
  HeadBucket: 'REST.HEAD.BUCKET',
  GetBucketCors: 'REST.GET.CORS',
  GetBucketAcl: 'REST.GET.ACL',
  GetBucketLocation: 'REST.GET.LOCATION',
  GetBucketTagging: 'REST.GET.TAGGING',
  GetBucketLifecycleConfiguration: 'REST.GET.LIFECYCLE',
  GetBucketVersioning: 'REST.GET.VERSIONING',
  GetBucketEncryption: 'REST.GET.ENCRYPTION',
  GetBucketLogging: 'REST.GET.LOGGING_STATUS',
  GetObjectLockConfiguration: 'REST.GET.OBJECT_LOCK_CONFIGURATION',
  ListObjectVersions: 'REST.GET.BUCKETVERSIONS',
  ListMultipartUploads: 'REST.GET.UPLOADS',
  GetBucketPolicy: 'REST.GET.BUCKETPOLICY',
  GetBucketPolicyStatus: 'REST.GET.POLICY_STATUS',
  GetPublicAccessBlock: 'REST.GET.PUBLIC_ACCESS_BLOCK',
  GetBucketOwnershipControls: 'REST.GET.OWNERSHIP_CONTROLS',
  PutBucketOwnershipControls: 'REST.PUT.OWNERSHIP_CONTROLS',
  DeleteBucketOwnershipControls: 'REST.DELETE.OWNERSHIP_CONTROLS',
  ListObjectsV2: 'REST.GET.BUCKET',
  ListObjects: 'REST.GET.BUCKET',
  PutBucketCors: 'REST.PUT.CORS',
  PutBucketTagging: 'REST.PUT.TAGGING',
  DeleteBucketTagging: 'REST.DELETE.TAGGING',
  PutBucketAcl: 'REST.PUT.ACL',
  PutBucketEncryption: 'REST.PUT.ENCRYPTION',
  DeleteBucketEncryption: 'REST.DELETE.ENCRYPTION',
  PutBucketLifecycleConfiguration: 'REST.PUT.LIFECYCLE',
  PutBucketVersioning: 'REST.PUT.VERSIONING',
  PutBucketPolicy: 'REST.PUT.BUCKETPOLICY',
  PutBucketLogging: 'REST.PUT.LOGGING_STATUS',
  PostBucketLogging: 'REST.POST.LOGGING',
  PutPublicAccessBlock: 'REST.PUT.PUBLIC_ACCESS_BLOCK',
  PutObjectLockConfiguration: 'REST.PUT.OBJECT_LOCK_CONFIGURATION',
  CreateBucket: 'REST.PUT.BUCKET',
  DeleteBucketCors: 'REST.DELETE.CORS',
  DeleteBucketPolicy: 'REST.DELETE.BUCKETPOLICY',
  DeletePublicAccessBlock: 'REST.DELETE.PUBLIC_ACCESS_BLOCK',
  DeleteBucketLifecycle: 'REST.DELETE.LIFECYCLE',
  DeleteBucket: 'REST.DELETE.BUCKET',
  DeleteObjects: 'REST.POST.MULTI_OBJECT_DELETE',
  PostObject: 'REST.POST.OBJECT',
  ListParts: 'REST.GET.UPLOAD',
  GetObjectRetention: 'REST.GET.RETENTION',
  GetObjectLegalHold: 'REST.GET.LEGAL_HOLD',
  PutObjectRetention: 'REST.PUT.RETENTION',
  PutObjectLegalHold: 'REST.PUT.LEGAL_HOLD',
  GetObjectAcl: 'REST.GET.ACL',
  GetObjectAttributes: 'REST.GET.OBJECT_ATTRIBUTES',
  GetObjectTagging: 'REST.GET.OBJECT_TAGGING',
  GetObject: 'REST.GET.OBJECT',
  HeadObject: 'REST.HEAD.OBJECT',
  PutObjectAcl: 'REST.PUT.ACL',
  PutObjectTagging: 'REST.PUT.OBJECT_TAGGING',
  UploadPartCopy: 'REST.COPY.PART',
  UploadPart: 'REST.PUT.PART',
  CopyObject: 'REST.COPY.OBJECT',
  PutObject: 'REST.PUT.OBJECT',
  CreateMultipartUpload: 'REST.POST.UPLOADS',
  CompleteMultipartUpload: 'REST.POST.UPLOAD',
  AbortMultipartUpload: 'REST.DELETE.UPLOAD',
  DeleteObjectTagging: 'REST.DELETE.OBJECT_TAGGING',
  DeleteObject: 'REST.DELETE.OBJECT',
}

/** Operations whose object size is the request body's (the others' is the response's object). */
const WRITES: ReadonlySet<string> = new Set(['PutObject', 'UploadPart', 'PostObject'])
/** Operations whose record states the addressed object's size. */
const OBJECT_READS: ReadonlySet<string> = new Set(['GetObject', 'HeadObject'])

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const two = (n: number) => String(n).padStart(2, '0')

/** `[06/Feb/2019:00:00:38 +0000]`, in UTC. */
function logTime(ms: number): string {
  const d = new Date(ms)
  return `[${two(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} +0000]`
}

/** A field as AWS writes it: `-` when empty; a quoted one keeps no quote or line break of its own. */
const field = (v: string | number | undefined): string => (v === undefined || v === '' ? '-' : String(v).replace(/\s/g, ''))
const quoted = (v: string | undefined): string => (v === undefined || v === '' ? '-' : `"${v.replace(/["\r\n]/g, (c) => (c === '"' ? '\\"' : ''))}"`)

const headerText = (v: string | number | string[] | undefined): string | undefined => (v === undefined ? undefined : Array.isArray(v) ? v.join(',') : String(v))

/** The key field: URL-encoded, its slashes kept, as AWS writes it. */
const keyField = (key: string) => encodeURIComponent(key).replace(/%2F/g, '/')

/** A positive byte count, or `-` (AWS writes `-` for none). */
const bytes = (v: string | undefined): string => (v !== undefined && /^\d+$/.test(v) && v !== '0' ? v : '-')

/**
 * One request as a record of AWS's Server Access Log format: 26 space-separated fields, in AWS's
 * order (Amazon S3 User Guide, "Amazon S3 server access log format"). Coffer serves plain HTTP
 * (TLS is a proxy's), has no access points and no ACL-only grants to report: those fields are `-`.
 */
export function formatRecord(
  request: FastifyRequest,
  reply: FastifyReply,
  source: { ownerId: string; bucket: string },
  now: number,
  /** One key of a DeleteObjects: its BATCH.DELETE.OBJECT record. */
  batchDeleted?: { key: string; versionId: string | undefined },
): string {
  const operation = request.s3Operation
  const name = operation === undefined || operation instanceof S3Error ? undefined : operation.name
  const auth = request.s3Auth
  const key = batchDeleted ? batchDeleted.key : request.s3Target?.key
  const totalMs = Math.max(0, Math.round(reply.elapsedTime))
  const sentLength = request.method === 'HEAD' ? undefined : headerText(reply.getHeader('content-length'))
  let objectSize: string | undefined
  if (name !== undefined && WRITES.has(name))
    objectSize = headerText(request.headers['x-amz-decoded-content-length']) ?? headerText(request.headers['content-length'])
  else if (name !== undefined && OBJECT_READS.has(name) && reply.statusCode < 300) {
    const range = headerText(reply.getHeader('content-range'))
    objectSize = range?.slice(range.lastIndexOf('/') + 1) ?? headerText(reply.getHeader('content-length'))
  }
  const turnAround = request.s3TurnAround === undefined ? undefined : Math.max(0, Math.round(request.s3TurnAround))
  const version = batchDeleted ? batchDeleted.versionId : headerText(reply.getHeader('x-amz-version-id'))
  return [
    field(source.ownerId),
    field(source.bucket),
    logTime(now - reply.elapsedTime),
    field(request.ip),
    field(auth?.principal.id),
    field(String(request.id)),
    field(batchDeleted ? 'BATCH.DELETE.OBJECT' : name === undefined ? `REST.${request.method}.UNKNOWN` : OPERATION_FIELD[name]),
    field(key === undefined ? undefined : keyField(key)),
    quoted(`${request.method} ${redactUrl(request.raw.url ?? '/')} HTTP/${request.raw.httpVersion}`),
    field(batchDeleted ? 204 : reply.statusCode),
    field(batchDeleted ? undefined : request.s3ErrorCode),
    bytes(batchDeleted ? undefined : sentLength),
    bytes(objectSize),
    field(totalMs),
    field(turnAround),
    quoted(headerText(request.headers.referer)),
    quoted(headerText(request.headers['user-agent'])),
    field(version),
    field(String(request.id)),
    field(auth === undefined ? undefined : auth.version === 2 ? 'SigV2' : 'SigV4'),
    '-',
    field(auth === undefined ? undefined : auth.presigned ? 'QueryString' : 'AuthHeader'),
    field(headerText(request.headers.host)),
    '-',
    '-',
    '-',
  ].join(' ')
}

/** A batch of one source bucket's records for one destination, delivered as one log object. */
interface Batch {
  tenantId: string
  sourceBucket: string
  config: LoggingConfig
  lines: string[]
  bytes: number
  /** When its first record came (a PartitionedPrefix's EventTime). */
  openedAt: number
  /** When it is delivered, or retried. */
  dueAt: number
  attempts: number
}

/** A batch is delivered early past this size: a log object stays a readable size. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024
/** Records held at most in this process (undelivered ones included); past it new ones are dropped, and counted. */
const MAX_BUFFERED_BYTES = 64 * 1024 * 1024
/** A delivery that keeps failing is given up after this many tries (log delivery is best effort, as AWS's). */
const MAX_ATTEMPTS = 8

const dateKey = (ms: number) => {
  const d = new Date(ms)
  return `${d.getUTCFullYear()}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}-${two(d.getUTCHours())}-${two(d.getUTCMinutes())}-${two(d.getUTCSeconds())}`
}

/**
 * The key of a delivered log object: `[TargetPrefix]YYYY-mm-DD-HH-MM-SS-UniqueString` (SimplePrefix),
 * or `[TargetPrefix][SourceAccountId]/[SourceRegion]/[SourceBucket]/YYYY/MM/DD/YYYY-MM-DD-HH-MM-SS-UniqueString`
 * (PartitionedPrefix). The unique string is random: every process (worker, node) names its own objects.
 */
export function logObjectKey(
  config: LoggingConfig,
  source: { ownerId: string; region: string; bucket: string },
  eventTime: number,
  deliveryTime: number,
): string {
  const unique = randomBytes(8).toString('hex').toUpperCase()
  const name = `${dateKey(deliveryTime)}-${unique}`
  if (config.keyFormat.kind === 'simple') return `${config.targetPrefix}${name}`
  const d = new Date(config.keyFormat.dateSource === 'EventTime' ? eventTime : deliveryTime)
  return `${config.targetPrefix}${source.ownerId}/${source.region}/${source.bucket}/${d.getUTCFullYear()}/${two(d.getUTCMonth() + 1)}/${two(d.getUTCDate())}/${name}`
}

/**
 * Server access log delivery (PutBucketLogging). Each S3 request to a bucket with logging enabled
 * adds a record to this process's buffer after its response went out (never on the request's
 * path); a batch is written as one object into the target bucket once its roll time passed
 * (COFFER_S3_LOGGING_ROLL_SECONDS, or the bucket's ObjectRollTime), when it grows past 4 MiB, on
 * `POST /bucket?logging` (RGW's flush) and at a clean shutdown. The write is the bucket owner's,
 * through the same PutObject path as every object (the target's quota, versioning and default
 * encryption apply); it is no S3 request, so it is never logged itself. A failed write is retried
 * with a growing delay and given up after a few tries: delivery is best effort, as AWS's. Records
 * live in memory only: a crash loses those not delivered yet (at most one roll time's worth).
 */
export class AccessLogDelivery {
  private readonly batches = new Map<string, Batch>()
  private readonly retries: Batch[] = []
  private buffered = 0
  private dropped = 0
  private timer: NodeJS.Timeout | undefined
  private timerAt = Infinity
  private running: Promise<void> | undefined
  private closed = false

  constructor(
    private readonly core: Core,
    private readonly log: FastifyBaseLogger,
  ) {}

  /** Called once a response finished: records it when its bucket logs. Never throws. */
  record(request: FastifyRequest, reply: FastifyReply): void {
    if (this.closed) return
    try {
      const after = request.s3LogAfter
      const source = request.s3LogSource ?? (after && logSourceOf(this.core, after.tenant, after.bucket))
      if (source === undefined) return
      const { core } = this
      const { workspaceId, config } = source
      const now = core.clock.now()
      const src = { ownerId: source.tenant.id, bucket: source.bucket }
      const lines = [formatRecord(request, reply, src, now), ...(request.s3BatchDeleted ?? []).map((d) => formatRecord(request, reply, src, now, d))]
      const size = lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
      if (this.buffered + size > MAX_BUFFERED_BYTES) {
        if (this.dropped++ === 0) this.log.warn('S3 access log buffer full: records are dropped until deliveries catch up')
        return
      }
      // One batch per configuration: a changed one (a new target, prefix or roll time) starts its own.
      const k = `${workspaceId}\n${JSON.stringify(config)}`
      let batch = this.batches.get(k)
      if (batch === undefined) {
        const rollMs = (config.rollSeconds ?? core.config.s3LoggingRollSeconds) * 1000
        batch = { tenantId: source.tenant.id, sourceBucket: source.bucket, config, lines: [], bytes: 0, openedAt: now, dueAt: now + rollMs, attempts: 0 }
        this.batches.set(k, batch)
      }
      batch.lines.push(...lines)
      batch.bytes += size
      this.buffered += size
      if (batch.bytes >= MAX_BATCH_BYTES) batch.dueAt = now
      this.schedule(batch.dueAt)
    } catch (err) {
      this.log.warn({ err }, 'S3 access log record failed')
    }
  }

  /**
   * Delivers the bucket's pending records now (RGW's `POST /bucket?logging`): the key of the object
   * written, undefined when there was nothing to deliver.
   */
  async flushBucket(workspaceId: string): Promise<string | undefined> {
    let last: string | undefined
    for (const [k, batch] of [...this.batches]) {
      if (!k.startsWith(`${workspaceId}\n`)) continue
      this.batches.delete(k)
      last = await this.deliver(batch, true)
    }
    return last
  }

  /** Delivers everything pending, once (a clean shutdown); records after this are not taken. */
  async close(): Promise<void> {
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    await this.running
    const all = [...this.batches.values(), ...this.retries.splice(0)]
    this.batches.clear()
    for (const batch of all) await this.deliver(batch, false)
    if (this.dropped > 0) this.log.warn({ dropped: this.dropped }, 'S3 access log records dropped (buffer full)')
  }

  private schedule(at: number): void {
    if (this.closed || at >= this.timerAt) return
    if (this.timer) clearTimeout(this.timer)
    this.timerAt = at
    this.timer = setTimeout(() => this.tick(), Math.max(0, at - this.core.clock.now()))
    this.timer.unref()
  }

  private tick(): void {
    this.timer = undefined
    this.timerAt = Infinity
    if (this.running) {
      void this.running.then(() => this.schedule(this.core.clock.now()))
      return
    }
    this.running = this.deliverDue().finally(() => {
      this.running = undefined
      const next = Math.min(...[...this.batches.values(), ...this.retries].map((b) => b.dueAt))
      if (Number.isFinite(next)) this.schedule(next)
    })
  }

  private async deliverDue(): Promise<void> {
    const now = this.core.clock.now()
    for (const [k, batch] of [...this.batches]) {
      if (batch.dueAt > now) continue
      this.batches.delete(k)
      await this.deliver(batch, true)
    }
    const due = this.retries.filter((b) => b.dueAt <= now)
    for (const batch of due) {
      this.retries.splice(this.retries.indexOf(batch), 1)
      await this.deliver(batch, true)
    }
  }

  /** Writes the batch as one object; on failure keeps it for a retry (when `retry`). Never throws. */
  private async deliver(batch: Batch, retry: boolean): Promise<string | undefined> {
    const { core } = this
    try {
      const tenant = authenticationView(core.tenants.get(batch.tenantId))
      const target = batch.config.targetBucket
      const w = core.s3.buckets.resolve(tenant, target)
      const now = core.clock.now()
      const key = logObjectKey(batch.config, { ownerId: tenant.id, region: core.config.s3Region, bucket: batch.sourceBucket }, batch.openedAt, now)
      const body = Buffer.from(`${batch.lines.join('\n')}\n`)
      await core.s3.objects.put(
        tenant,
        target,
        key,
        { source: Readable.from([body]), payload: { kind: 'unsigned' }, headers: { 'content-length': String(body.length) } },
        { contentType: 'text/plain', meta: {} },
        {},
        core.bucketEncryption.uploadKey(w.id, tenant.id),
      )
      this.buffered -= batch.bytes
      return key
    } catch (err) {
      batch.attempts++
      const code = (err as { code?: string }).code
      if (!retry || batch.attempts >= MAX_ATTEMPTS || code === 'TENANT_NOT_FOUND') {
        this.buffered -= batch.bytes
        this.log.warn(
          { err, bucket: batch.sourceBucket, records: batch.lines.length, attempts: batch.attempts },
          'S3 access log delivery failed; its records are dropped',
        )
        return undefined
      }
      // 5 s, 10 s, 20 s… up to an hour.
      batch.dueAt = core.clock.now() + Math.min(3_600_000, 5_000 * 2 ** (batch.attempts - 1))
      this.retries.push(batch)
      this.schedule(batch.dueAt)
      this.log.warn({ code, bucket: batch.sourceBucket, attempts: batch.attempts }, 'S3 access log delivery failed; retried later')
      return undefined
    }
  }
}
