import { Type, type Static } from '@sinclair/typebox'
import { FileTypeSchema, IsoTime, NO_CONTROL, NO_CONTROL_MESSAGE, Uuid } from './common'
import { FILE_TYPES } from '../lib/file-types'
import type { AuthenticatedTenant, Tenant } from '../db/repos/tenants'
import { isoTime } from '../lib/clock'

/** Whether a tenant manages its own S3 credentials through the tenant API and the console (#31). */
export const SelfServiceS3Credentials = Type.Boolean({
  description: 'Whether the tenant may create, list and revoke its own S3 credentials (/api/v1/tenant/s3-credentials); default true',
  'x-message': 'must be true or false',
})

export const TenantName = Type.String({ minLength: 1, maxLength: 100, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE })

export const CreateTenantBody = Type.Object(
  {
    name: TenantName,
    quotaBytes: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
    allowedFileTypes: Type.Optional(Type.Array(FileTypeSchema, { minItems: 1, maxItems: FILE_TYPES.length * 4 })),
    selfServiceS3Credentials: Type.Optional(SelfServiceS3Credentials),
  },
  { additionalProperties: false },
)
export type CreateTenantBody = Static<typeof CreateTenantBody>

export const UpdateTenantBody = Type.Object(
  {
    name: Type.Optional(TenantName),
    quotaBytes: Type.Optional(
      Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'May be below the current usage: uploads are then refused until usage drops' }),
    ),
    allowedFileTypes: Type.Optional(
      Type.Array(FileTypeSchema, { minItems: 1, maxItems: FILE_TYPES.length * 4, description: 'Files already stored keep their type' }),
    ),
    selfServiceS3Credentials: Type.Optional(SelfServiceS3Credentials),
  },
  { additionalProperties: false, minProperties: 1, 'x-message': 'must set at least one of name, quotaBytes, allowedFileTypes, selfServiceS3Credentials' },
)

/** A tenant as the admin API lists it: settings and usage, never a key or secret. */
export const TenantSummary = Type.Object({
  id: Uuid,
  name: Type.String(),
  quotaBytes: Type.Integer(),
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
  quotaBytes: Type.Integer(),
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
  quotaBytes: Type.Integer(),
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
