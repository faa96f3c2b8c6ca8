// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { createLogger } from '../src/lib/logger'
import { buildApp } from '../src/app'
import { buildS3App } from '../src/s3/server'

// Both fronts start without evaluating ajv or fast-json-stringify, which only a request that
// validates a body or serializes a response with a schema needs (src/http/compilers.ts, #28).
// Few imports on purpose: this file checks what the modules above load, in this process.

/** Whether a package's main module has been evaluated in this process (Fastify's error serializer requires fast-json-stringify/lib/serializer.js alone, which is small). */
const loaded = (name: string) => require.resolve(name) in require.cache
const COMPILERS = ['ajv', 'ajv-formats', 'fast-json-stringify', '@fastify/ajv-compiler', '@fastify/fast-json-stringify-compiler']
const ADMIN_KEY = 'lazy-compilers-admin-key-0123456789'

t.test('ajv and fast-json-stringify are loaded by the first request that needs them, not at start', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-lazy-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const config = loadConfig({ COFFER_ADMIN_API_KEY: ADMIN_KEY, COFFER_LOG_LEVEL: 'silent' }, { 'data-dir': dir })
  const logger = createLogger('silent')
  const core = createCore(config, { log: logger })
  const app = await buildApp(core, { logger })
  const s3 = await buildS3App(core, { logger })
  t.teardown(async () => {
    await app.close()
    await s3.close()
    core.close()
  })
  await app.ready()
  await s3.ready()
  t.equal((await s3.inject({ url: '/' })).statusCode, 200, 'an anonymous ListBuckets: the empty list')
  for (const name of COMPILERS) t.notOk(loaded(name), `${name} not loaded by two ready fronts and an S3 answer`)
  // /health's answer has a response schema: its serializer is the first one compiled.
  const health = await app.inject({ url: '/health' })
  t.equal(health.statusCode, 200)
  t.match(health.json(), { status: 'ok' })
  t.ok(loaded('fast-json-stringify'), 'fast-json-stringify loaded by the first response with a schema')

  const headers = { authorization: `Bearer ${ADMIN_KEY}` }
  const refused = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers, payload: { name: 5 } })
  t.equal(refused.statusCode, 400)
  t.equal(refused.json().error.code, 'VALIDATION_ERROR', 'the body is validated as before')
  t.match(refused.json().error.details.errors, [{ path: '/name' }])
  t.ok(loaded('ajv-formats'), 'ajv and its formats loaded by the first validation')

  const created = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers, payload: { name: 'lazy' } })
  t.equal(created.statusCode, 201)
  t.match(created.json(), { id: String, name: 'lazy', apiKey: /^sk_live_/ }, 'serialized by its response schema')
})
