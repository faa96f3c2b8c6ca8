import { Type, type Static } from '@sinclair/typebox'
import { IsoTime, NO_CONTROL, NO_CONTROL_MESSAGE, Uuid } from './common'
import { ANY_TYPE, MIME_TYPE, UNLIMITED_QUOTA } from '../lib/file-types'
import type { AuthenticatedTenant, Tenant } from '../db/repos/tenants'
import { isoTime } from '../lib/clock'

/** Whether a tenant manages its own S3 credentials through the tenant API and the console (#31). */
export const SelfServiceS3Credentials = Type.Boolean({
  description: 'Whether the tenant may create, list and revoke its own S3 credentials (/api/v1/tenant/s3-credentials); default true',
  'x-message': 'must be true or false',
})

/**
 * A tenant's allowed types: MIME types the server supports (the spec's six unless COFFER_FILE_TYPES
 * widens them), or `*` for any the server supports. The service checks them against the server's set.
 */
const AllowedFileTypes = (description: string) =>
  Type.Array(
    Type.String({
      pattern: `^(\\${ANY_TYPE}|${MIME_TYPE.source.slice(1, -1)})$`,
      'x-message': 'must be a lower-case MIME type (type/subtype) or *',
    }),
    { minItems: 1, maxItems: 1000, description },
  )

/**
 * A quota as the admin API takes it: bytes, or `"unlimited"` (null too, as a workspace's quota takes
 * it), stored as the largest safe integer. Answers always give a number of bytes.
 */
const QuotaInput = (description: string) =>
  Type.Union([Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.Literal('unlimited'), Type.Null()], {
    description,
    'x-message': 'must be an integer of at least 0, or "unlimited"',
  })

/** A quota of the admin API's body in bytes (`unlimited` and null: UNLIMITED_QUOTA). */
export const quotaBytesOf = (q: number | 'unlimited' | null | undefined): number | undefined =>
  q === undefined ? undefined : q === null || q === 'unlimited' ? UNLIMITED_QUOTA : q

const QUOTA_OUT = `Bytes; ${UNLIMITED_QUOTA} (the largest safe integer) when unlimited`

export const TenantName = Type.String({ minLength: 1, maxLength: 100, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE })

export const CreateTenantBody = Type.Object(
  {
    name: TenantName,
    quotaBytes: Type.Optional(QuotaInput('Bytes, or "unlimited"; default: the server\'s default quota (COFFER_DEFAULT_QUOTA_BYTES, else 524288000)')),
    allowedFileTypes: Type.Optional(AllowedFileTypes('Default: every type the server supports')),
    selfServiceS3Credentials: Type.Optional(SelfServiceS3Credentials),
  },
  { additionalProperties: false },
)
export type CreateTenantBody = Static<typeof CreateTenantBody>

export const UpdateTenantBody = Type.Object(
  {
    name: Type.Optional(TenantName),
    quotaBytes: Type.Optional(QuotaInput('Bytes, or "unlimited"; may be below the current usage: uploads are then refused until usage drops')),
    allowedFileTypes: Type.Optional(AllowedFileTypes('Files already stored keep their type')),
    selfServiceS3Credentials: Type.Optional(SelfServiceS3Credentials),
  },
  { additionalProperties: false, minProperties: 1, 'x-message': 'must set at least one of name, quotaBytes, allowedFileTypes, selfServiceS3Credentials' },
)

/** A tenant as the admin API lists it: settings and usage, never a key or secret. */
export const TenantSummary = Type.Object({
  id: Uuid,
  name: Type.String(),
  quotaBytes: Type.Integer({ description: QUOTA_OUT }),
  usedBytes: Type.Integer({ description: 'Bytes of completed files plus reservations of pending uploads' }),
  fileCount: Type.Integer({ description: 'Files not deleted, whatever their processingStatus' }),
  allowedFileTypes: Type.Array(Type.String()),
  selfServiceS3Credentials: Type.Boolean({ description: 'Whether the tenant manages its own S3 credentials' }),
  createdAt: IsoTime,
})

export const TenantListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
)

export const TenantList = Type.Object({
  tenants: Type.Array(TenantSummary, { description: 'Newest first' }),
  nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'null on the last page' }),
})

export const CreatedTenant = Type.Object({
  id: Uuid,
  name: Type.String(),
  apiKey: Type.String({ description: 'Returned only here and at key regeneration' }),
  webhookSecret: Type.String({ description: 'Standard Webhooks signing secret (whsec_…)' }),
  quotaBytes: Type.Integer({ description: QUOTA_OUT }),
  allowedFileTypes: Type.Array(Type.String()),
  createdAt: IsoTime,
})

export const RegeneratedKey = Type.Object({
  tenantId: Uuid,
  apiKey: Type.String(),
  webhookSecret: Type.String(),
  message: Type.String(),
})

export const TenantInfo = Type.Object({
  id: Uuid,
  name: Type.String(),
  allowedFileTypes: Type.Array(Type.String()),
  createdAt: IsoTime,
  quotaBytes: Type.Integer(),
  webhookSecret: Type.String(),
})

export const QuotaInfo = Type.Object({
  quotaBytes: Type.Integer({ description: QUOTA_OUT }),
  usedBytes: Type.Integer(),
  availableBytes: Type.Integer(),
  usagePercent: Type.Number(),
})

/** A just-created tenant as the admin API and the CLI show it: the only time its key is shown. */
export function createdTenantView(tenant: Tenant, apiKey: string): Static<typeof CreatedTenant> {
  return {
    id: tenant.id,
    name: tenant.name,
    apiKey,
    webhookSecret: tenant.webhookSecret,
    quotaBytes: tenant.quotaBytes,
    allowedFileTypes: tenant.allowedFileTypes,
    createdAt: isoTime(tenant.createdAt),
  }
}

/** The calling tenant's own profile (`GET /tenant/info`). */
export function tenantInfoView(t: AuthenticatedTenant): Static<typeof TenantInfo> {
  return {
    id: t.id,
    name: t.name,
    allowedFileTypes: t.allowedFileTypes,
    createdAt: isoTime(t.createdAt),
    quotaBytes: t.quotaBytes,
    webhookSecret: t.webhookSecret,
  }
}

/** A tenant as the admin API and `coffer tenant show|list` give it: usage, never a key or secret. */
export function tenantSummaryView(t: Tenant & { fileCount: number }): Static<typeof TenantSummary> {
  return {
    id: t.id,
    name: t.name,
    quotaBytes: t.quotaBytes,
    usedBytes: t.usedBytes,
    fileCount: t.fileCount,
    allowedFileTypes: t.allowedFileTypes,
    selfServiceS3Credentials: t.selfServiceS3Credentials,
    createdAt: isoTime(t.createdAt),
  }
}
