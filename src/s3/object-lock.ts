import type { FastifyRequest } from 'fastify'
import type { LockMode, VersionLock } from '../db/repos/object-locks'
import { LockRefusal, MAX_DEFAULT_RETENTION, type ObjectLockConfig } from '../services/object-lock'
import { MAX_RETAIN_UNTIL, retainUntilIso } from '../lib/retain-until'
import { S3Error } from './errors'
import { childOf, malformed, parseXml, textOf, type XmlNode } from './xml'

/** The S3 protocol of object lock (#25): its documents, its headers, its errors. Rules: services/object-lock.ts. */

const MODES = new Set(['GOVERNANCE', 'COMPLIANCE'])

/** A service refusal as S3 answers it. */
export function lockError(err: unknown): unknown {
  return err instanceof LockRefusal ? new S3Error(err.code, err.message) : err
}

/**
 * S3 dates: ISO 8601 with a zone (the SDKs send `2030-01-01T00:00:00.000Z`); else InvalidArgument.
 * So is a date past 9999-12-31T23:59:59.999Z (a four-digit year with a negative offset reaches year
 * 10000), which no S3 date can report back.
 */
function parseDate(text: string | undefined, what: string): number {
  const at = text === undefined || !/^\d{4}-\d{2}-\d{2}T[\d:.]+(Z|[+-]\d{2}:?\d{2})$/.test(text.trim()) ? NaN : Date.parse(text)
  if (Number.isNaN(at)) throw new S3Error('InvalidArgument', `${what} must be an ISO 8601 date`)
  if (at > MAX_RETAIN_UNTIL) throw new S3Error('InvalidArgument', `${what} must be before the year 10000`)
  return at
}

/** A DefaultRetention's Days or Years: a positive integer (else InvalidRetentionPeriod), at most AWS's bound (else InvalidArgument, as AWS answers). */
const period = (text: string | undefined, max: number): number | undefined => {
  if (text === undefined) return undefined
  const n = /^\d+$/.test(text.trim()) ? Number(text) : NaN
  if (!(n >= 1)) throw new S3Error('InvalidRetentionPeriod', 'Default retention period must be a positive integer value')
  if (n > max) throw new S3Error('InvalidArgument', 'Default retention period is too large.')
  return n
}

/** PutObjectLockConfiguration's body: ObjectLockEnabled Enabled, and an optional default rule with Days or Years, exactly one. */
export function parseLockConfiguration(body: Buffer): ObjectLockConfig {
  const doc = childOf(parseXml(body), 'ObjectLockConfiguration')
  if (!doc) throw malformed()
  if (textOf(doc, 'ObjectLockEnabled') !== 'Enabled') throw malformed()
  const rule = childOf(doc, 'Rule')
  if (!rule) return { enabled: true }
  const dr = childOf(rule, 'DefaultRetention')
  if (!dr) throw malformed()
  const mode = textOf(dr, 'Mode')
  if (mode === undefined || !MODES.has(mode)) throw malformed()
  const days = period(textOf(dr, 'Days'), MAX_DEFAULT_RETENTION.days)
  const years = period(textOf(dr, 'Years'), MAX_DEFAULT_RETENTION.years)
  if ((days === undefined) === (years === undefined)) throw malformed()
  return { enabled: true, rule: { mode: mode as LockMode, ...(days !== undefined ? { days } : { years: years! }) } }
}

export function lockConfigurationDocument(c: ObjectLockConfig): XmlNode {
  return {
    ObjectLockEnabled: 'Enabled',
    ...(c.rule ? { Rule: { DefaultRetention: { Mode: c.rule.mode, ...(c.rule.days !== undefined ? { Days: c.rule.days } : { Years: c.rule.years! }) } } } : {}),
  }
}

/** PutObjectRetention's body; an empty Retention (no Mode, no date) removes it. */
export function parseRetention(body: Buffer): { mode: LockMode; until: number } | null {
  const doc = childOf(parseXml(body), 'Retention')
  if (!doc) throw malformed()
  const mode = textOf(doc, 'Mode')
  const date = textOf(doc, 'RetainUntilDate')
  if (mode === undefined && date === undefined) return null
  if (mode === undefined || !MODES.has(mode) || date === undefined) throw malformed()
  return { mode: mode as LockMode, until: parseDate(date, 'RetainUntilDate') }
}

export function parseLegalHold(body: Buffer): boolean {
  const doc = childOf(parseXml(body), 'LegalHold')
  const status = doc && textOf(doc, 'Status')
  if (status !== 'ON' && status !== 'OFF') throw malformed()
  return status === 'ON'
}

/** The lock headers of a write (PutObject, CopyObject, CreateMultipartUpload): mode and date both or neither. */
export function lockHeaders(request: Pick<FastifyRequest, 'headers'>): { mode?: LockMode; until?: number; legalHold?: boolean } | undefined {
  const h = (n: string) => {
    const v = request.headers[n]
    return Array.isArray(v) ? v.join(',') : v
  }
  const mode = h('x-amz-object-lock-mode')
  const date = h('x-amz-object-lock-retain-until-date')
  const hold = h('x-amz-object-lock-legal-hold')
  const out: { mode?: LockMode; until?: number; legalHold?: boolean } = {}
  if ((mode === undefined) !== (date === undefined)) {
    throw new S3Error('InvalidArgument', 'x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied')
  }
  if (mode !== undefined) {
    if (!MODES.has(mode)) throw new S3Error('InvalidArgument', 'Unknown wormMode directive.')
    // Whether it is in the future is checked against the server clock when the version is made.
    out.mode = mode as LockMode
    out.until = parseDate(date, 'x-amz-object-lock-retain-until-date')
  }
  if (hold !== undefined) {
    if (hold !== 'ON' && hold !== 'OFF') throw new S3Error('InvalidArgument', 'Legal Hold must be either of ON or OFF')
    out.legalHold = hold === 'ON'
  }
  return out.mode === undefined && out.legalHold === undefined ? undefined : out
}

/** The lock headers GET and HEAD report for a version. */
export function lockResponseHeaders(lock: VersionLock | undefined): Record<string, string> {
  if (!lock) return {}
  return {
    ...(lock.mode !== null && lock.until !== null
      ? { 'x-amz-object-lock-mode': lock.mode, 'x-amz-object-lock-retain-until-date': retainUntilIso(lock.until) }
      : {}),
    ...(lock.legalHold ? { 'x-amz-object-lock-legal-hold': 'ON' } : {}),
  }
}
