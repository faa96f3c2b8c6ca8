import type { Static } from '@sinclair/typebox'
import { AppError, notFound, validationError } from '../errors'
import type { DB } from '../db/database'
import type { AuthenticatedTenant, Tenant, TenantsRepo } from '../db/repos/tenants'
import type { Clock } from '../lib/clock'
import type { QuotaInfo } from '../contract/tenants'
import { NO_CONTROL, NO_CONTROL_MESSAGE } from '../contract/common'
import { uuidv7, isUuid } from '../lib/ids'
import { newApiKey, newWebhookSecret, sha256 } from '../lib/secrets'
import { DEFAULT_TENANT_QUOTA, FILE_TYPES } from '../lib/file-types'
import { timingSafeEqual } from 'node:crypto'

export interface CreateTenantInput {
  name: string
  quotaBytes?: number
  allowedFileTypes?: string[]
  /** `test` keys (`sk_test_…`) are made by the ephemeral CI-fixture mode. */
  keyKind?: 'live' | 'test'
}

/** The contract's rule for names (no control, bidi or invisible characters, no lone surrogates), as the API schema applies it. */
const NAME_TEXT = new RegExp(NO_CONTROL, 'u')

/**
 * Checks a tenant's settings whichever front they came from (the admin API validates the same
 * rules with its schema first; the CLI relies on this). Paths are JSON pointers into the input.
 */
export function checkTenantInput(input: CreateTenantInput): void {
  if (input.name.length < 1 || input.name.length > 100) throw validationError('/name', 'must be 1 to 100 characters')
  if (!NAME_TEXT.test(input.name)) throw validationError('/name', NO_CONTROL_MESSAGE)
  const q = input.quotaBytes
  if (q !== undefined && (!Number.isSafeInteger(q) || q < 0)) throw validationError('/quotaBytes', 'must be an integer of at least 0')
  const types = input.allowedFileTypes
  if (types !== undefined) {
    if (types.length === 0) throw validationError('/allowedFileTypes', 'must list at least one file type')
    const bad = types.find((t) => !(FILE_TYPES as readonly string[]).includes(t))
    if (bad !== undefined) throw validationError('/allowedFileTypes', `must be among: ${FILE_TYPES.join(', ')} (not ${JSON.stringify(bad)})`)
  }
}

/** Tenant lifecycle and API-key authentication. */
export class TenantsService {
  /**
   * Authenticated tenants by key hash, so a request costs one SQLite read fewer (15% of a
   * metadata read's CPU, #7). Valid while the database is unchanged by other connections
   * (`PRAGMA data_version`: the CLI regenerating a key elsewhere empties it before the next
   * request is authenticated); this connection's own tenant writes go through this service,
   * which empties it too. Only keys that matched are kept, so it holds at most one entry per tenant.
   */
  private readonly authenticated = new Map<string, { tenant: AuthenticatedTenant; keyHash: Buffer }>()
  private authenticatedAt = -1

  constructor(
    private readonly db: DB,
    private readonly repo: TenantsRepo,
    private readonly clock: Clock,
  ) {}

  /** Creates a tenant; the returned key and webhook secret exist nowhere else afterwards. */
  create(input: CreateTenantInput): { tenant: Tenant; apiKey: string } {
    checkTenantInput(input)
    const apiKey = newApiKey(input.keyKind ?? 'live')
    const allowed = input.allowedFileTypes ?? [...FILE_TYPES]
    // Keep the spec's order and drop duplicates.
    const allowedFileTypes = FILE_TYPES.filter((t) => allowed.includes(t))
    const row = {
      id: uuidv7(this.clock.now()),
      name: input.name,
      keyHash: sha256(apiKey),
      keyKind: input.keyKind ?? 'live',
      webhookSecret: newWebhookSecret(),
      quotaBytes: input.quotaBytes ?? DEFAULT_TENANT_QUOTA,
      allowedFileTypes,
      createdAt: this.clock.now(),
    }
    this.db
      .transaction(() => {
        const same = this.repo.getByName(row.name)
        if (same) {
          throw new AppError('CONFLICT', `A tenant named "${same.name}" already exists (names are compared ignoring case and Unicode normalisation)`, {
            field: 'name',
          })
        }
        this.repo.insert(row)
      })
      .immediate()
    return { tenant: this.repo.get(row.id)!, apiKey }
  }

  /** New key and webhook secret; the old key stops working with this commit. */
  regenerateKey(tenantId: string): { tenant: Tenant; apiKey: string } {
    const apiKey = newApiKey(this.get(tenantId).keyKind)
    const rotated = this.repo.rotate(tenantId, sha256(apiKey), newWebhookSecret())
    this.authenticated.clear()
    if (!rotated) throw notFound.tenant()
    return { tenant: this.repo.get(tenantId)!, apiKey }
  }

  /**
   * The tenant owning `apiKey`, or undefined. The lookup is by SHA-256 of the key, so a probe's
   * timing reveals nothing about stored keys; the final comparison is constant-time as well.
   */
  authenticate(apiKey: string): AuthenticatedTenant | undefined {
    if (!/^sk_(live|test)_[A-Za-z0-9_-]{20,100}$/.test(apiKey)) return undefined
    const hash = sha256(apiKey)
    const version = this.repo.dataVersion()
    if (version !== this.authenticatedAt) {
      this.authenticated.clear()
      this.authenticatedAt = version
    }
    const cacheKey = hash.toString('base64')
    // Found by hash in the cache or the table alike, and compared in constant time either way.
    const known = this.authenticated.get(cacheKey)
    if (known) return timingSafeEqual(known.keyHash, hash) ? known.tenant : undefined
    const found = this.repo.getByKeyHash(hash)
    if (!found || !timingSafeEqual(found.keyHash, hash)) return undefined
    const { usedBytes: _usage, ...tenant } = found.tenant
    this.authenticated.set(cacheKey, { tenant, keyHash: found.keyHash })
    return tenant
  }

  get(tenantId: string): Tenant {
    const t = isUuid(tenantId) ? this.repo.get(tenantId) : undefined
    if (!t) throw notFound.tenant()
    return t
  }

  /** Every tenant, oldest first. */
  list(): Tenant[] {
    return this.repo.list()
  }

  quota(tenantId: string): Static<typeof QuotaInfo> {
    const t = this.get(tenantId)
    const available = Math.max(0, t.quotaBytes - t.usedBytes)
    const percent = t.quotaBytes === 0 ? (t.usedBytes > 0 ? 100 : 0) : (t.usedBytes / t.quotaBytes) * 100
    return { quotaBytes: t.quotaBytes, usedBytes: t.usedBytes, availableBytes: available, usagePercent: Math.round(percent * 100) / 100 }
  }
}
