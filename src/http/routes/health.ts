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
        summary: 'Readiness: the database answers, the data dir accepts a write, and a remote blob store (S3) answers',
        response: {
          200: Type.Object({
            status: Type.Literal('ready'),
            checks: Type.Object({ database: Type.String(), storage: Type.String(), blobStore: Type.Optional(Type.String()) }),
          }),
          503: Type.Ref('ErrorResponse'),
        },
      },
    },
    async () => {
      const { ready, checks } = await readiness(core.db, core.dataDir, core.store)
      if (!ready) throw new AppError('NOT_READY', 'Coffer is not ready', { checks })
      return { status: 'ready' as const, checks }
    },
  )
}
