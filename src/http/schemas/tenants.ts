import { Type, type Static } from '@sinclair/typebox'
import { FileTypeSchema, IsoTime, NO_CONTROL, NO_CONTROL_MESSAGE, Uuid } from './common'
import { FILE_TYPES } from '../../lib/file-types'

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
