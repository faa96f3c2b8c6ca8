import { randomUUID } from 'node:crypto'
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Core } from './core'
import type { App } from './http/types'
import { registerErrorHandling, sendError } from './http/error-handler'
import { AppError } from './errors'
import { validatorCompiler } from './http/validation'
import { compilersFactory } from './http/compilers'
import { ErrorResponse } from './contract/common'
import { tenantAuth } from './http/auth'
import { healthRoutes } from './http/routes/health'
import { adminRoutes } from './http/routes/admin'
import { tenantRoutes } from './http/routes/tenant'
import { uploadContentRoutes, uploadRequestRoutes } from './http/routes/upload'
import { downloadRoutes, filesRoutes } from './http/routes/files'
import { fileVersionsRoutes } from './http/routes/file-versions'
import { workspacesRoutes } from './http/routes/workspaces'
import { workspaceObjectsRoutes } from './http/routes/workspace-objects'
import { webhooksRoutes } from './http/routes/webhooks'
import { registerRateLimit } from './http/rate-limit'
import { registerJsonBody } from './http/json-body'
import { clientErrorHandler } from './http/client-error'
import { registerRequestLifecycle, type Front } from './http/request-lifecycle'
import { lazyRequestLogger } from './http/lazy-request-logger'
import { documentSecurity, registerOpenApi } from './http/openapi'
import { metricsRoutes } from './http/routes/metrics'
import { docsRoutes } from './http/routes/docs'
import { bundledConsole, consoleRoutes } from './http/routes/console'
import { s3CredentialRoutes, tenantS3CredentialRoutes } from './http/routes/s3-credentials'
import { overviewRoutes } from './http/routes/overview'

export interface BuildAppOptions {
  logger: FastifyBaseLogger
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** The JSON API as the request lifecycle sees it (request-lifecycle.ts). */
const apiFront: Front = {
  name: 'api',
  stamp: (request, reply) => void reply.header('x-request-id', request.id),
  // The template (`/api/v1/files/:fileId`), never the URL: bounded, and free of ids and tokens.
  route: (request) => request.routeOptions.url ?? 'unmatched',
  tenantId: (request) => request.tenant?.id,
}

/** Builds the HTTP application on a core. Never listens: main.ts does, tests use inject(). */
export async function buildApp(core: Core, opts: BuildAppOptions): Promise<App> {
  const app = Fastify({
    loggerInstance: opts.logger,
    // One line per request, written by the onResponse hook below, instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    // request.log is made on first use: most requests never log through it (lazy-request-logger.ts).
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: 1024 * 1024,
    // A whole request (a 100 MiB upload on a slow link included) must arrive within an hour, and
    // a connection that moves no byte for five minutes is dropped: a client cannot hold an upload
    // (and its reservation) open forever. Node's defaults would disable the first.
    requestTimeout: 60 * 60_000,
    connectionTimeout: 5 * 60_000,
    trustProxy: core.config.trustProxy,
    // Accept a caller's X-Request-Id when it is sane, so a request can be followed across systems.
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    routerOptions: { maxParamLength: 1000 },
    // Errors the router raises before any route runs (a malformed URL, an over-long path segment)
    // get the contract's envelope too.
    frameworkErrors: (error, request, reply) => {
      const appErr =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new AppError('NOT_FOUND', 'Not found: a path segment is longer than any id')
          : new AppError('VALIDATION_ERROR', 'The URL is malformed', { errors: [{ path: '/url', message: 'is not a valid URL' }] })
      apiFront.stamp(request, reply)
      void sendError(reply, appErr)
    },
    // Requests Node's parser refuses (malformed, headers too large) get the envelope too.
    clientErrorHandler,
    // Requests arriving during close are refused by request-lifecycle.ts, in the contract's error shape.
    return503OnClosing: false,
    // Validators and serializers compiled on first use, their modules loaded then (compilers.ts).
    schemaController: { compilersFactory },
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.setValidatorCompiler(validatorCompiler)
  // The API speaks JSON only; a text/plain body is answered as a wrong Content-Type, not as a wrong shape.
  app.removeContentTypeParser('text/plain')
  registerJsonBody(app)
  app.addSchema(ErrorResponse)
  app.decorateRequest('tenant', null)
  registerErrorHandling(app)
  await registerOpenApi(app)
  // One onRequest and one onResponse hook for every request: request id, in-flight tracking,
  // shutdown refusal, metrics and the access log (request-lifecycle.ts).
  registerRequestLifecycle(app, core.metrics, opts.logger, apiFront)

  await registerRateLimit(app, core)
  await app.register(async (scope) => healthRoutes(scope, core))
  await app.register(async (scope) => metricsRoutes(scope, core))
  await app.register(async (scope) => docsRoutes(scope))
  // The web console, when this is the bundle that carries it (tests building the app from the
  // sources have none, and get the JSON 404 at /console).
  const consoleAssets = bundledConsole()
  if (consoleAssets) await app.register(async (scope) => consoleRoutes(scope, consoleAssets))
  await app.register(async (scope) => {
    scope.addHook('onRoute', documentSecurity('adminKey'))
    await adminRoutes(scope, core)
    await s3CredentialRoutes(scope, core)
    await overviewRoutes(scope, core)
  })
  // Token-authorised routes (presigned PUT, signed download) do their own authentication.
  await app.register(async (scope) => {
    scope.addHook('onRoute', documentSecurity('signedToken'))
    await uploadContentRoutes(scope, core)
  })
  await app.register(async (scope) => {
    scope.addHook('onRoute', documentSecurity('tenantKey', 'signedToken'))
    await downloadRoutes(scope, core)
  })
  await app.register(async (scope) => {
    scope.addHook('onRoute', documentSecurity('tenantKey'))
    scope.addHook('onRequest', tenantAuth(core.tenants))
    await tenantRoutes(scope, core)
    await uploadRequestRoutes(scope, core)
    await filesRoutes(scope, core)
    await fileVersionsRoutes(scope, core)
    await workspacesRoutes(scope, core)
    await workspaceObjectsRoutes(scope, core)
    await webhooksRoutes(scope, core)
    await tenantS3CredentialRoutes(scope, core)
  })
  return app
}
