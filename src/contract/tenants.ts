import { Type, type Static } from '@sinclair/typebox'
import { FileTypeSchema, IsoTime, NO_CONTROL, NO_CONTROL_MESSAGE, Uuid } from './common'
import { FILE_TYPES } from '../lib/file-types'
import type { AuthenticatedTenant, Tenant } from '../db/repos/tenants'
import { isoTime } from '../lib/clock'

export const TenantName = Type.String({ minLength: 1, maxLength: 100, pattern: NO_CONTROL, 'x-message': NO_CONTROL_MESSAGE })

export const CreateTenantBody = Type.Object(
  {
    name: TenantName,
    quotaBytes: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
    allowedFileTypes: Type.Optional(Type.Array(FileTypeSchema, { minItems: 1, maxItems: FILE_TYPES.length * 4 })),
  },
  { additionalProperties: false },
)
export type CreateTenantBody = Static<typeof CreateTenantBody>

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

/** A tenant in an operator's listing (`coffer tenant list`): usage, never a key or secret. */
export function tenantSummaryView(t: Tenant) {
  return {
    id: t.id,
    name: t.name,
    quotaBytes: t.quotaBytes,
    usedBytes: t.usedBytes,
    allowedFileTypes: t.allowedFileTypes,
    createdAt: isoTime(t.createdAt),
  }
}
