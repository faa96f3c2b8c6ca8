import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { AppError } from '../../errors'
import { readiness } from '../../services/health'

/** Liveness and readiness probes; no authentication. */
export async function healthRoutes(app: App, core: Core): Promise<void> {
  app.get('/health', { schema: { tags: ['health'], summary: 'Liveness', response: { 200: Type.Object({ status: Type.Literal('ok') }) } } }, async () => ({
    status: 'ok' as const,
  }))

  app.get(
    '/ready',
    {
      schema: {
        tags: ['health'],
        summary: 'Readiness: the database answers and the data dir accepts a write',
        response: {
          200: Type.Object({ status: Type.Literal('ready'), checks: Type.Object({ database: Type.String(), storage: Type.String() }) }),
          503: Type.Ref('ErrorResponse'),
        },
      },
    },
    async () => {
      const { ready, checks } = readiness(core.db, core.dataDir)
      if (!ready) throw new AppError('NOT_READY', 'Coffer is not ready', { checks })
      return { status: 'ready' as const, checks }
    },
  )
}
