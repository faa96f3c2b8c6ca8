import { Type } from '@sinclair/typebox'
import type { App } from '../types'
import type { Core } from '../../core'
import { AppError } from '../../errors'
import { databaseReport, databaseStatus, readiness } from '../../services/health'

/** Which database and its state (services/health.ts DatabaseReport), in /ready's body and the probes' 503 (#30). */
const Database = Type.Object({
  kind: Type.Union([Type.Literal('sqlite'), Type.Literal('postgres')], { description: "The metadata database: the data dir's SQLite file or PostgreSQL" }),
  status: Type.String({ description: '`ok`, or the failed check (`unavailable: 08006` when the connection is lost or refused)' }),
})

/** What the probes read: the core's (Core fits), or a test's, whose `db` is an engine on either database. */
export type HealthDeps = Pick<Core, 'dataDir' | 'store' | 'db'>

/** Liveness and readiness probes; no authentication. */
export async function healthRoutes(app: App, core: HealthDeps): Promise<void> {
  app.get(
    '/health',
    {
      schema: {
        tags: ['health'],
        summary: 'Liveness: the process answers and its database does (503 with Retry-After while it does not)',
        // The spec's body, exactly (the API's Health section): which database and its state are /ready's,
        // and the 503's details.
        response: { 200: Type.Object({ status: Type.Literal('ok') }), 503: Type.Ref('ErrorResponse') },
      },
    },
    async () => {
      // A node whose PostgreSQL is gone can serve nothing (#30): the balancer is told to go
      // elsewhere and when to look again; the bridge reconnects by itself once it is back.
      const status = databaseStatus(core.db)
      if (!status.ok)
        throw new AppError('DATABASE_UNAVAILABLE', 'The database is unavailable; retry later', {
          checks: { database: status.check },
          database: databaseReport(core.db, status),
        })
      return { status: 'ok' as const }
    },
  )

  app.get(
    '/ready',
    {
      schema: {
        tags: ['health'],
        summary: 'Readiness: the database answers, the data dir accepts a write, and a remote blob store (S3) answers',
        response: {
          200: Type.Object({
            status: Type.Literal('ready'),
            database: Database,
            checks: Type.Object({ database: Type.String(), storage: Type.String(), blobStore: Type.Optional(Type.String()) }),
          }),
          503: Type.Ref('ErrorResponse'),
        },
      },
    },
    async () => {
      const { ready, database, checks } = await readiness(core.db, core.dataDir, core.store)
      if (!ready) throw new AppError('NOT_READY', 'Coffer is not ready', { checks, database })
      return { status: 'ready' as const, database, checks }
    },
  )
}
