import type { Static } from '@sinclair/typebox'
import { AppError, notFound, validationError } from '../errors'
import type { DB } from '../db/database'
import { constraintViolated, engineOf, type Engine } from '../db/engine'
import { authenticationView, type AuthenticatedTenant, type Tenant, type TenantsRepo } from '../db/repos/tenants'
import type { FilesRepo } from '../db/repos/files'
import type { WorkspacesRepo } from '../db/repos/workspaces'
import type { OutboxRepo } from '../db/repos/outbox'
import type { Clock } from '../lib/clock'
import type { QuotaInfo } from '../contract/tenants'
import { NO_CONTROL, NO_CONTROL_MESSAGE } from '../contract/common'
import { uuidv7, isUuid } from '../lib/ids'
import { newApiKey, newWebhookSecret, sha256 } from '../lib/secrets'
import { DEFAULT_TENANT_QUOTA, SPEC_SUPPORTED, type SupportedTypes } from '../lib/file-types'
import { hash, randomBytes, timingSafeEqual } from 'node:crypto'
import { decodeCursor, encodeCursor } from './files'

export interface CreateTenantInput {
  name: string
  /** Bytes; UNLIMITED_QUOTA for `unlimited`; absent: the server's default for new tenants. */
  quotaBytes?: number
  allowedFileTypes?: string[]
  /** Whether the tenant manages its own S3 credentials (#31); default true. */
  selfServiceS3Credentials?: boolean
  /** `test` keys (`sk_test_…`) are made by the ephemeral CI-fixture mode. */
  keyKind?: 'live' | 'test'
}

export interface UpdateTenantInput {
  name?: string
  quotaBytes?: number
  allowedFileTypes?: string[]
  selfServiceS3Credentials?: boolean
}

/** What a server decides about tenants beyond their input: the file types it supports and the quota of a new tenant. */
export interface TenantSettings {
  fileTypes: SupportedTypes
  defaultQuotaBytes: number
}

const SPEC_SETTINGS: TenantSettings = { fileTypes: SPEC_SUPPORTED, defaultQuotaBytes: DEFAULT_TENANT_QUOTA }

/** A tenant with the number of its files (not deleted, whatever their status): what an operator lists. */
export type TenantUsage = Tenant & { fileCount: number }

/** The rows a tenant's deletion reaches besides its own. */
export interface TenantOwnedRepos {
  files: FilesRepo
  workspaces: WorkspacesRepo
  outbox: OutboxRepo
  /** Object lock (#25): a tenant holding locked versions cannot be deleted. */
  objectLock?: { checkTenantDeletable(tenantId: string): void }
}

/** The contract's rule for names (no control, bidi or invisible characters, no lone surrogates), as the API schema applies it. */
const NAME_TEXT = new RegExp(NO_CONTROL, 'u')

/**
 * Checks a tenant's settings whichever front they came from (the admin API validates the same
 * rules with its schema first; the CLI relies on this). Paths are JSON pointers into the input.
 */
export function checkTenantInput(input: UpdateTenantInput, supported: SupportedTypes = SPEC_SUPPORTED): void {
  if (input.name !== undefined) {
    if (input.name.length < 1 || input.name.length > 100) throw validationError('/name', 'must be 1 to 100 characters')
    if (!NAME_TEXT.test(input.name)) throw validationError('/name', NO_CONTROL_MESSAGE)
  }
  const q = input.quotaBytes
  if (q !== undefined && (!Number.isSafeInteger(q) || q < 0)) throw validationError('/quotaBytes', 'must be an integer of at least 0')
  const selfService = input.selfServiceS3Credentials
  if (selfService !== undefined && typeof selfService !== 'boolean') throw validationError('/selfServiceS3Credentials', 'must be true or false')
  const types = input.allowedFileTypes
  if (types !== undefined) {
    if (types.length === 0) throw validationError('/allowedFileTypes', 'must list at least one file type')
    const bad = supported.unsupported(types)
    if (bad >= 0) {
      const widen = supported.any ? '' : '; the server setting COFFER_FILE_TYPES (--file-types) widens them'
      throw validationError(`/allowedFileTypes/${bad}`, `must be among: ${supported.describe()} (not ${JSON.stringify(types[bad])})${widen}`)
    }
  }
}

/**
 * Runs `write`, a transaction that checks a name is free and then writes it. Two nodes on one
 * PostgreSQL database can both pass the check before either commits; the unique index
 * (tenants_name_key) then refuses the second (#30), whose transaction is rolled back whole. That
 * violation is the check's own CONFLICT when the name is now another tenant's (`holder()`, read
 * after the rollback); any other (a fixed API key given twice hits key_hash) is rethrown.
 */
function nameTaken<T>(write: () => T, holder: () => AppError | undefined): T {
  try {
    return write()
  } catch (err) {
    throw (constraintViolated(err) === 'unique' && holder()) || err
  }
}

/** What an API key looks like; anything else is refused before any hashing or lookup. */
const API_KEY = /^sk_(live|test)_[A-Za-z0-9_-]{20,100}$/

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
  /** Counts this connection's changes to what authentication returns (S3CredentialsService caches by it). */
  private changes = 0
  private readonly engine: Engine

  constructor(
    db: DB | Engine,
    private readonly repo: TenantsRepo,
    private readonly clock: Clock,
    private readonly owned: TenantOwnedRepos,
    private readonly settings: TenantSettings = SPEC_SETTINGS,
  ) {
    this.engine = engineOf(db)
  }

  /**
   * Creates a tenant; the returned key and webhook secret exist nowhere else afterwards.
   * `fixedApiKey`: the key a CI fixture's configuration names (#28) instead of a generated one.
   */
  create(input: CreateTenantInput, fixedApiKey?: string): { tenant: Tenant; apiKey: string } {
    return this.insert(input, fixedApiKey, false)!
  }

  /**
   * The first tenant of a data dir, made only while it has none, in the transaction that inserts
   * it: of several servers starting at once on a new data dir, one makes it and the others get
   * undefined (on PostgreSQL, where two transactions may both see none, the loser's insert meets
   * the unique name and is told so the same way).
   */
  createFirst(input: CreateTenantInput): { tenant: Tenant; apiKey: string } | undefined {
    try {
      return this.insert(input, undefined, true)
    } catch (err) {
      if (err instanceof AppError && err.code === 'CONFLICT' && !this.none()) return undefined
      throw err
    }
  }

  private insert(input: CreateTenantInput, fixedApiKey: string | undefined, onlyFirst: boolean): { tenant: Tenant; apiKey: string } | undefined {
    const { fileTypes } = this.settings
    checkTenantInput(input, fileTypes)
    if (fixedApiKey !== undefined && !API_KEY.test(fixedApiKey))
      throw new AppError('VALIDATION_ERROR', 'An API key is sk_live_ or sk_test_ and 20 to 100 characters A-Z a-z 0-9 _ -')
    const apiKey = fixedApiKey ?? newApiKey(input.keyKind ?? 'live')
    // Default: every type the server supports (`*` when it supports any). The spec's order, no duplicates.
    const allowedFileTypes = fileTypes.normalise(input.allowedFileTypes ?? fileTypes.list)
    const row = {
      id: uuidv7(this.clock.now()),
      name: input.name,
      keyHash: sha256(apiKey),
      keyKind: fixedApiKey?.startsWith('sk_test_') ? ('test' as const) : fixedApiKey !== undefined ? ('live' as const) : (input.keyKind ?? 'live'),
      webhookSecret: newWebhookSecret(),
      quotaBytes: input.quotaBytes ?? this.settings.defaultQuotaBytes,
      allowedFileTypes,
      selfServiceS3Credentials: input.selfServiceS3Credentials ?? true,
      createdAt: this.clock.now(),
    }
    const taken = (name: string) =>
      new AppError('CONFLICT', `A tenant named "${name}" already exists (names are compared ignoring case and Unicode normalisation)`, { field: 'name' })
    let inserted = false
    nameTaken(
      () =>
        this.engine.transaction(() => {
          if (onlyFirst && !this.none()) return
          const same = this.repo.getByName(row.name)
          if (same) throw taken(same.name)
          this.repo.insert(row)
          inserted = true
        }),
      () => {
        const same = this.repo.getByName(row.name)
        return same && taken(same.name)
      },
    )
    return inserted ? { tenant: this.repo.get(row.id)!, apiKey } : undefined
  }

  /** Whether the data dir has no live tenant yet: a CI fixture's first start (#28). */
  none(): boolean {
    return this.repo.page(undefined, 1).length === 0
  }

  /** New key and webhook secret; the old key stops working with this commit. */
  regenerateKey(tenantId: string): { tenant: Tenant; apiKey: string } {
    const apiKey = newApiKey(this.get(tenantId).keyKind)
    const rotated = this.repo.rotate(tenantId, sha256(apiKey), newWebhookSecret())
    this.changed()
    if (!rotated) throw notFound.tenant()
    return { tenant: this.repo.get(tenantId)!, apiKey }
  }

  /**
   * A number that changes whenever this connection changes a tenant's key, settings or existence.
   * Other connections' changes show in `PRAGMA data_version` instead (TenantsRepo.dataVersion).
   */
  authChanges(): number {
    return this.changes
  }

  private changed(): void {
    this.authenticated.clear()
    this.changes++
  }

  /**
   * The tenant owning `apiKey`, or undefined. The lookup is by SHA-256 of the key, so a probe's
   * timing reveals nothing about stored keys; the final comparison is constant-time as well.
   */
  authenticate(apiKey: string): AuthenticatedTenant | undefined {
    if (!API_KEY.test(apiKey)) return undefined
    const version = this.repo.dataVersion()
    if (version !== this.authenticatedAt) {
      this.authenticated.clear()
      this.authenticatedAt = version
    }
    // The one-shot hash straight to base64 costs a third of createHash().update().digest() (#15).
    const cacheKey = hash('sha256', apiKey, 'base64')
    const keyHash = Buffer.from(cacheKey, 'base64')
    // Found by hash in the cache or the table alike, and compared in constant time either way.
    const known = this.authenticated.get(cacheKey)
    if (known) return timingSafeEqual(known.keyHash, keyHash) ? known.tenant : undefined
    const found = this.repo.getByKeyHash(keyHash)
    if (!found || !timingSafeEqual(found.keyHash, keyHash)) return undefined
    const tenant = authenticationView(found.tenant)
    this.authenticated.set(cacheKey, { tenant, keyHash: found.keyHash })
    return tenant
  }

  get(tenantId: string): Tenant {
    const t = isUuid(tenantId) ? this.repo.get(tenantId.toLowerCase()) : undefined
    if (!t) throw notFound.tenant()
    return t
  }

  /** A page of live tenants, newest first, with their usage; `cursor` is an earlier page's `nextCursor`. */
  list(q: { limit: number; cursor?: string | undefined }): { tenants: TenantUsage[]; nextCursor: string | null } {
    const cursor = q.cursor === undefined ? undefined : decodeCursor(q.cursor)
    return this.engine.read(() => {
      const rows = this.repo.page(cursor, q.limit + 1)
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return {
        tenants: page.map((t) => ({ ...t, fileCount: this.repo.fileCount(t.id) })),
        nextCursor: rows.length > q.limit && last ? encodeCursor(last) : null,
      }
    })
  }

  /** One live tenant with its usage. */
  show(tenantId: string): TenantUsage {
    return this.engine.read(() => {
      const t = this.get(tenantId)
      return { ...t, fileCount: this.repo.fileCount(t.id) }
    })
  }

  /** Live tenants using the most bytes, most first, with their file counts; and how many live tenants there are (the admin overview, #31). */
  topByUsage(limit: number): { tenants: TenantUsage[]; total: number } {
    return this.engine.read(() => ({
      tenants: this.repo.topByUsage(limit).map((t) => ({ ...t, fileCount: this.repo.fileCount(t.id) })),
      total: this.repo.liveCount(),
    }))
  }

  /**
   * Changes any of name, quota, allowed types and self-service S3 credentials. A quota below the current usage is allowed:
   * uploads are refused until usage drops under it. Files already stored keep their type.
   */
  update(tenantId: string, input: UpdateTenantInput): TenantUsage {
    const { fileTypes } = this.settings
    checkTenantInput(input, fileTypes)
    const taken = () => new AppError('CONFLICT', `A tenant named "${input.name}" already exists`, { field: 'name' })
    const updated = nameTaken(
      () =>
        this.engine.transaction(() => {
          const t = this.get(tenantId)
          if (input.name !== undefined) {
            const holder = this.repo.getByName(input.name)
            if (holder && holder.id !== t.id) throw taken()
          }
          const allowed = input.allowedFileTypes
          this.repo.update({
            id: t.id,
            name: input.name ?? t.name,
            quotaBytes: input.quotaBytes ?? t.quotaBytes,
            allowedFileTypes: allowed === undefined ? t.allowedFileTypes : fileTypes.normalise(allowed),
            selfServiceS3Credentials: input.selfServiceS3Credentials ?? t.selfServiceS3Credentials,
          })
          return { ...this.repo.get(t.id)!, fileCount: this.repo.fileCount(t.id) }
        }),
      () => {
        const holder = input.name === undefined ? undefined : this.repo.getByName(input.name)
        return holder && holder.id !== tenantId.toLowerCase() ? taken() : undefined
      },
    )
    // Authenticated tenants carry their settings (allowed types): the next request reads them anew.
    this.changed()
    return updated
  }

  /**
   * Deletes a tenant, irreversibly, in one transaction: its key stops matching, its files are
   * soft-deleted (pending uploads end failed, with no event) so the garbage collector purges them
   * and their blobs after the retention like any deleted file, its workspaces are deleted, and
   * its undelivered webhook events are dropped. Tokens (signed and presigned URLs) of a deleted
   * tenant never verify (it has no signing generation any more), so they stop at once too.
   */
  delete(tenantId: string): void {
    const now = this.clock.now()
    this.engine.transaction(() => {
      const t = this.get(tenantId)
      // A locked version must outlive its tenant's deletion too: refused, naming them (#25).
      this.owned.objectLock?.checkTenantDeletable(t.id)
      this.owned.files.softDeleteAllOfTenant(t.id, now)
      this.owned.workspaces.softDeleteAllOfTenant(t.id, now)
      this.owned.outbox.dropPending(t.id)
      // S3 credentials stop with the key; multipart uploads in progress are aborted.
      this.repo.dropS3(t.id)
      // The name goes to a placeholder no live tenant can have (TenantsRepo.deletedName), and the
      // key hash to one of random bytes, which no key hashes to.
      this.repo.markDeleted(t.id, now, this.repo.deletedName(t.id), sha256(randomBytes(32)))
    })
    this.changed()
  }

  /**
   * Removes the rows of deleted tenants whose files have all been purged (the garbage collector
   * calls this after purging files). Returns how many tenants went.
   */
  purgeDeleted(): number {
    if (this.repo.purgeable(1).length === 0) return 0
    // Counted by the run that commits: PostgreSQL's engine may run the function again (#30).
    return this.engine.transaction(() => {
      let purged = 0
      for (const id of this.repo.purgeable(100)) if (this.repo.purge(id)) purged++
      return purged
    })
  }

  quota(tenantId: string): Static<typeof QuotaInfo> {
    const t = this.get(tenantId)
    // An unlimited quota is the largest safe integer: what is available stays a number, and the percentage rounds to 0.
    const available = Math.max(0, t.quotaBytes - t.usedBytes)
    const percent = t.quotaBytes === 0 ? (t.usedBytes > 0 ? 100 : 0) : (t.usedBytes / t.quotaBytes) * 100
    return { quotaBytes: t.quotaBytes, usedBytes: t.usedBytes, availableBytes: available, usagePercent: Math.round(percent * 100) / 100 }
  }
}
