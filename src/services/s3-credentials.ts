import { createCipheriv, createDecipheriv, randomBytes, randomInt } from 'node:crypto'
import type { DB } from '../db/database'
import { constraintViolated, engineOf, type Engine } from '../db/engine'
import type { S3CredentialsRepo } from '../db/repos/s3-credentials'
import { authenticationView, type AuthenticatedTenant, type TenantsRepo } from '../db/repos/tenants'
import { isoTime, type Clock } from '../lib/clock'
import { deriveKey } from '../lib/secrets'
import { notFound, AppError } from '../errors'
import { isUuid } from '../lib/ids'

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
/** Access key ids are 20 characters [A-Z0-9], as AWS's, starting with `CK` (Coffer's own, told apart at a glance). */
export const ACCESS_KEY_ID = /^CK[A-Z0-9]{18}$/
/**
 * What a fixed pair of a CI fixture may be (#28; the same rules as COFFER_S3_ACCESS_KEY_ID and
 * COFFER_S3_SECRET_ACCESS_KEY in config.ts): generated ids are among these ids too.
 */
export const FIXED_ACCESS_KEY_ID = /^[A-Za-z0-9._-]{3,128}$/
export const FIXED_SECRET = /^[A-Za-z0-9+/=._-]{4,128}$/

/** The most S3 credential pairs a tenant may hold by creating them itself (#31). */
export const SELF_SERVICE_LIMIT = 20

function newAccessKeyId(): string {
  let id = 'CK'
  for (let i = 0; i < 18; i++) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)]
  return id
}

/** 40 characters of base64 (30 random bytes), the shape of an AWS secret access key. */
const newSecret = () => randomBytes(30).toString('base64')

export interface CreatedS3Credential {
  accessKeyId: string
  secretAccessKey: string
  createdAt: string
}

/** The self-service limit's refusal (createOwn). */
const overLimit = (held: number, limit: number) =>
  new AppError('CONFLICT', `This tenant already holds ${held} S3 credential pairs, the most a tenant can create itself: revoke one first`, {
    field: 'accessKeyId',
    limit,
  })

/**
 * S3 credential pairs of tenants. SigV4 needs the secret itself on the server, so it is sealed
 * with AES-256-GCM under a key derived (HKDF) from the server secret: a copy of the database alone
 * reveals no secret. The access key id is bound into the seal (associated data), so a sealed
 * secret cannot be moved to another id.
 */
export class S3CredentialsService {
  private readonly key: Buffer
  /**
   * Verified lookups by access key id: reading the pair and its tenant and opening the secret
   * (AES-GCM) on every request cost a third of a GetObject's CPU (#14). Valid while nothing that
   * decides them changes: another connection's commit (the CLI revoking a pair or deleting a
   * tenant: `PRAGMA data_version`), this connection's tenant changes (TenantsService.authChanges)
   * and revocations here (which drop the entry). Each is effective on the next request. Only
   * pairs that exist are kept, so it holds at most one entry per live pair; bounded all the same.
   */
  private readonly verified = new Map<string, { secret: string; tenant: AuthenticatedTenant }>()
  private verifiedAt = { dataVersion: -1, authChanges: -1 }
  private readonly engine: Engine

  constructor(
    db: DB | Engine,
    private readonly repo: S3CredentialsRepo,
    private readonly tenants: TenantsRepo,
    private readonly clock: Clock,
    serverSecret: Buffer,
    /** TenantsService.authChanges: this connection's changes to tenants' keys, settings or existence. */
    private readonly authChanges: () => number,
    /**
     * Other connections' commits. On SQLite, BucketChanges.version: one `PRAGMA data_version` per
     * event-loop callback, read after the request's bytes, which the bucket cache reads in the same
     * callback anyway (#29: a 4 KiB PutObject ran the pragma twice, ~2% of its main thread each).
     */
    private readonly dataVersion: () => number = () => tenants.dataVersion(),
  ) {
    this.key = deriveKey(serverSecret, 's3-credentials', 'v1')
    this.engine = engineOf(db)
  }

  /**
   * A new pair for the tenant; the secret exists in the clear only in the returned value.
   * `fixed`: the pair a CI fixture's configuration names (#28) instead of a generated one.
   */
  create(tenantId: string, fixed?: { accessKeyId: string; secretAccessKey: string }, limit?: number): CreatedS3Credential {
    if (!isUuid(tenantId) || !this.tenants.get(tenantId.toLowerCase())) throw notFound.tenant()
    if (fixed && !(FIXED_ACCESS_KEY_ID.test(fixed.accessKeyId) && FIXED_SECRET.test(fixed.secretAccessKey))) {
      throw new AppError('VALIDATION_ERROR', 'An access key id is 3 to 128 characters A-Z a-z 0-9 . _ -, a secret 4 to 128 characters A-Z a-z 0-9 + / = . _ -')
    }
    const taken = () => new AppError('CONFLICT', 'This access key id is taken')
    if (fixed && this.repo.get(fixed.accessKeyId)) throw taken()
    const accessKeyId = fixed?.accessKeyId ?? newAccessKeyId()
    const secretAccessKey = fixed?.secretAccessKey ?? newSecret()
    const createdAt = this.clock.now()
    const row = { accessKeyId, tenantId: tenantId.toLowerCase(), secretSealed: this.seal(accessKeyId, secretAccessKey), createdAt }
    try {
      this.engine.transaction(() => {
        if (limit !== undefined) {
          // Counted in the inserting transaction, after the tenant's row is locked (PostgreSQL: FOR
          // NO KEY UPDATE; SQLite: the write lock it already holds), so two requests on two nodes
          // (or two workers) cannot both find room for the last pair (#30).
          if (!this.tenants.getForCharge(row.tenantId)) throw notFound.tenant()
          const held = this.repo.listByTenant(row.tenantId).length
          if (held >= limit) throw overLimit(held, limit)
        }
        this.repo.insert(row)
      })
    } catch (err) {
      // Another process (another node, #30) inserted the same fixed id after the check above: the
      // primary key refuses this one, which is the check's CONFLICT.
      if (constraintViolated(err) === 'unique' && this.repo.get(accessKeyId)) throw taken()
      throw err
    }
    return { accessKeyId, secretAccessKey, createdAt: isoTime(createdAt) }
  }

  /** Ids and creation times, never secrets. */
  list(tenantId: string): { accessKeyId: string; createdAt: string }[] {
    if (!isUuid(tenantId) || !this.tenants.get(tenantId.toLowerCase())) throw notFound.tenant()
    return this.repo.listByTenant(tenantId.toLowerCase()).map((c) => ({ accessKeyId: c.accessKeyId, createdAt: isoTime(c.createdAt) }))
  }

  /**
   * The tenant's own pairs through the tenant API (#31): allowed unless the admin turned the
   * tenant's self-service off, which is read from the row on every call (no cache to outlive a
   * change). Creating one more than SELF_SERVICE_LIMIT is refused: a tenant key cannot grow the
   * table without bound; the admin API has no such limit.
   */
  createOwn(tenantId: string): CreatedS3Credential {
    this.checkSelfService(tenantId)
    return this.create(tenantId, undefined, SELF_SERVICE_LIMIT)
  }

  /** listOwn and revokeOwn: `list` and `revoke` behind the same check as createOwn. */
  listOwn(tenantId: string): { accessKeyId: string; createdAt: string }[] {
    this.checkSelfService(tenantId)
    return this.list(tenantId)
  }

  revokeOwn(tenantId: string, accessKeyId: string): void {
    this.checkSelfService(tenantId)
    this.revoke(tenantId, accessKeyId)
  }

  private checkSelfService(tenantId: string): void {
    const tenant = this.tenants.get(tenantId)
    if (!tenant) throw notFound.tenant()
    if (!tenant.selfServiceS3Credentials) {
      throw new AppError(
        'SELF_SERVICE_DISABLED',
        'The administrator has turned off self-service S3 credentials for this tenant: ask them to create or revoke a pair',
        { setting: 'selfServiceS3Credentials' },
      )
    }
  }

  /** Revokes a pair; the next request signed with it is refused. */
  revoke(tenantId: string, accessKeyId: string): void {
    if (!isUuid(tenantId) || !this.tenants.get(tenantId.toLowerCase())) throw notFound.tenant()
    const removed = this.engine.transaction(() => this.repo.delete(tenantId.toLowerCase(), accessKeyId))
    this.verified.delete(accessKeyId)
    if (!removed) throw new AppError('NOT_FOUND', 'No such S3 credential for this tenant')
  }

  /**
   * The secret and tenant behind an access key id, for SigV4 verification; undefined when unknown
   * or revoked. Cached (`verified`): a revocation or a tenant's deletion, by this process or by
   * another one on the same database (the CLI), is effective on the next request.
   */
  lookup(accessKeyId: string): { secret: string; tenant: AuthenticatedTenant } | undefined {
    if (!ACCESS_KEY_ID.test(accessKeyId) && !FIXED_ACCESS_KEY_ID.test(accessKeyId)) return undefined
    const dataVersion = this.dataVersion()
    const authChanges = this.authChanges()
    if (dataVersion !== this.verifiedAt.dataVersion || authChanges !== this.verifiedAt.authChanges) {
      this.verified.clear()
      this.verifiedAt = { dataVersion, authChanges }
    }
    const known = this.verified.get(accessKeyId)
    if (known) return known
    const row = this.repo.get(accessKeyId)
    const tenant = row && this.tenants.get(row.tenantId)
    if (!row || !tenant) return undefined
    const found = { secret: this.open(accessKeyId, row.secretSealed), tenant: authenticationView(tenant) }
    if (this.verified.size >= 10_000) this.verified.clear()
    this.verified.set(accessKeyId, found)
    return found
  }

  private seal(accessKeyId: string, secret: string): Buffer {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    cipher.setAAD(Buffer.from(accessKeyId))
    const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()])
    return Buffer.concat([iv, cipher.getAuthTag(), ct])
  }

  private open(accessKeyId: string, sealed: Buffer): string {
    const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.subarray(0, 12))
    decipher.setAAD(Buffer.from(accessKeyId))
    decipher.setAuthTag(sealed.subarray(12, 28))
    return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8')
  }
}
