import type { BucketWorkspace as Workspace } from '../../services/bucket-cache'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES } from '../xml'
import { S3Error } from '../errors'
import { checkVersionId } from '../objects'
import { lockConfigurationDocument, lockError, parseLegalHold, parseLockConfiguration, parseRetention } from '../object-lock'
import { header, xml, type Handlers, type OpContext } from './context'
import { retainUntilIso } from '../../lib/retain-until'

/** The version a retention or legal hold request names: `versionId`, else the key's current one (never a delete marker). */
function targetVersion({ s3, key, query }: OpContext, w: Workspace): string {
  const versionId = query.get('versionId')
  if (versionId !== undefined) {
    checkVersionId(versionId)
    const v = s3.versions.byId(w.id, key, versionId)
    if (!v) throw new S3Error('NoSuchVersion', 'The specified version does not exist.')
    if (v.fileId === null) throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.')
    return versionId
  }
  const v = s3.versions.latest(w.id, key)
  if (!v || v.fileId === null) throw new S3Error('NoSuchKey', 'The specified key does not exist.')
  return v.versionId
}

const run = <T>(f: () => T): T => {
  try {
    return f()
  } catch (err) {
    throw lockError(err)
  }
}

/** Object lock (#25): a bucket's lock configuration, a version's retention and legal hold (rules: services/object-lock.ts). */
export const objectLockHandlers = {
  GetObjectLockConfiguration({ s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const cfg = s3.objectLock.config(w.id)
    if (!cfg) throw new S3Error('ObjectLockConfigurationNotFoundError', 'Object Lock configuration does not exist for this bucket')
    return xml(reply, 'ObjectLockConfiguration', lockConfigurationDocument(cfg))
  },

  async PutObjectLockConfiguration({ s3, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const cfg = parseLockConfiguration(await readSmallBody(body(), MAX_XML_BODY_BYTES))
    run(() => s3.objectLock.putConfig(w.id, cfg))
    return reply.send()
  },

  GetObjectRetention(c) {
    const w = c.s3.buckets.resolve(c.tenant, c.bucket)
    if (!c.s3.objectLock.enabled(w.id)) throw new S3Error('InvalidRequest', 'Bucket is missing Object Lock Configuration')
    const lock = c.s3.objectLock.get(w.id, c.key, targetVersion(c, w))
    if (!lock || lock.mode === null || lock.until === null)
      throw new S3Error('NoSuchObjectLockConfiguration', 'The specified object does not have a ObjectLock configuration')
    return xml(c.reply, 'Retention', { Mode: lock.mode, RetainUntilDate: retainUntilIso(lock.until) })
  },

  async PutObjectRetention(c) {
    const w = c.s3.buckets.resolve(c.tenant, c.bucket)
    const next = parseRetention(await readSmallBody(c.body(), MAX_XML_BODY_BYTES))
    if (!c.s3.objectLock.enabled(w.id)) throw new S3Error('InvalidRequest', 'Bucket is missing Object Lock Configuration')
    const versionId = targetVersion(c, w)
    const bypass = header(c.request, 'x-amz-bypass-governance-retention')?.toLowerCase() === 'true'
    run(() => c.s3.objectLock.putRetention(w.id, c.key, versionId, next, bypass))
    return c.reply.send()
  },

  GetObjectLegalHold(c) {
    const w = c.s3.buckets.resolve(c.tenant, c.bucket)
    if (!c.s3.objectLock.enabled(w.id)) throw new S3Error('InvalidRequest', 'Bucket is missing Object Lock Configuration')
    const lock = c.s3.objectLock.get(w.id, c.key, targetVersion(c, w))
    return xml(c.reply, 'LegalHold', { Status: lock?.legalHold ? 'ON' : 'OFF' })
  },

  async PutObjectLegalHold(c) {
    const w = c.s3.buckets.resolve(c.tenant, c.bucket)
    const on = parseLegalHold(await readSmallBody(c.body(), MAX_XML_BODY_BYTES))
    if (!c.s3.objectLock.enabled(w.id)) throw new S3Error('InvalidRequest', 'Bucket is missing Object Lock Configuration')
    const versionId = targetVersion(c, w)
    run(() => c.s3.objectLock.putLegalHold(w.id, c.key, versionId, on))
    return c.reply.send()
  },
} satisfies Handlers
