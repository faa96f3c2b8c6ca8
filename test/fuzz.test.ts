// @suites: pg-all
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { createTenant, fileBytes, handshake, makeApp, upload, admin, type Handshake } from './helper'
import type { App } from '../src/http/types'
import type { InjectOptions } from 'fastify'
import { FILE_NAME_PATTERN, isSafeJson } from '../src/lib/text'

// Random and malformed input never yields a 5xx, a hang or a crash: every answer is a 2xx/3xx or
// a 4xx carrying the contract's error envelope.
const RUNS = Number(process.env.COFFER_FUZZ_RUNS ?? 150)
// Replay a reported failure with COFFER_FUZZ_SEED=<seed from the report>.
const SEED = process.env.COFFER_FUZZ_SEED === undefined ? {} : { seed: Number(process.env.COFFER_FUZZ_SEED) }

async function expectSane(t: Test, app: App, req: InjectOptions): Promise<boolean> {
  return (await saneResponse(t, app, req)) !== undefined
}

/** The response when it is sane (see above); undefined, after failing the test, when it is not. */
async function saneResponse(t: Test, app: App, req: InjectOptions): Promise<Awaited<ReturnType<App['inject']>> | undefined> {
  const res = await Promise.race([
    app.inject(req),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`hang: ${JSON.stringify(req).slice(0, 300)}`)), 5000)),
  ])
  if (res.statusCode >= 500) {
    t.fail(`${res.statusCode} for ${JSON.stringify(req).slice(0, 400)}: ${res.body.slice(0, 300)}`)
    return undefined
  }
  if (res.statusCode >= 400 && (req as { method?: string }).method !== 'HEAD') {
    const body = res.json() as { error?: { code?: unknown; message?: unknown; details?: unknown } }
    if (typeof body.error?.code !== 'string' || typeof body.error.message !== 'string' || typeof body.error.details !== 'object') {
      t.fail(`no error envelope for ${JSON.stringify(req).slice(0, 300)}: ${res.body.slice(0, 200)}`)
      return undefined
    }
  }
  return res
}

const text = fc.string({ unit: 'binary', maxLength: 300 })
const jsonish = fc.oneof(fc.json({ maxDepth: 3 }), text, fc.constant('{"a":'), fc.constant('\u0000'), fc.constant(''))
const anyValue = fc.anything({ maxDepth: 3, withNullPrototype: false })

t.test('fuzz', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const done = await upload(app, tenant.headers, { bytes: fileBytes('image/png', 2000) })
  const ws = (await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers: tenant.headers, payload: { name: 'W', slug: 'w' } })).json()
  const pending = (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'p.png' })).json() as Handshake
  // A second tenant's id: regenerate-key may rotate it without locking the fuzzing tenant out.
  const other = await createTenant(app)
  const ids = [done.fileId, ws.id, pending.fileId, other.id, 'nope', '', '%00', '..%2F..', 'a'.repeat(2000), '01890000-0000-7000-8000-000000000000']
  const idArb = fc.oneof(fc.constantFrom(...ids), fc.string({ maxLength: 80 }).map(encodeURIComponent))

  await t.test('JSON bodies of any shape on every endpoint that takes one', async (t) => {
    const targets: [string, string, Record<string, string>][] = [
      ['POST', '/api/v1/upload/request', tenant.headers],
      ['POST', '/api/v1/workspaces', tenant.headers],
      ['PATCH', `/api/v1/workspaces/${ws.id}`, tenant.headers],
      ['POST', '/api/v1/admin/tenants', admin],
    ]
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...targets),
        fc.oneof(
          anyValue.map((v) => JSON.stringify(v) ?? 'null'),
          jsonish,
        ),
        fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'application/json;;;', ''),
        async ([method, url, headers], payload, contentType) =>
          expectSane(t, app, { method: method, url, headers: { ...headers, ...(contentType ? { 'content-type': contentType } : {}) }, payload }),
      ),
      { numRuns: RUNS * 2, ...SEED },
    )
  })

  await t.test('handshake bodies built from the right fields with wrong values', async (t) => {
    const field = fc.record(
      {
        fileType: fc.oneof(fc.constantFrom('image/png', 'application/pdf', 'text/html'), text, anyValue),
        fileName: fc.oneof(text, anyValue, fc.constantFrom('..', '.', 'a/b', 'ok.png')),
        fileSizeBytes: fc.oneof(fc.integer(), fc.double(), fc.bigInt().map(String), anyValue),
        context: fc.oneof(text, anyValue),
        tags: fc.oneof(fc.dictionary(text, text, { maxKeys: 60 }), anyValue),
        webhookUrl: fc.oneof(fc.webUrl(), text, anyValue, fc.constantFrom('http://[::1]/', 'http://0x7f.1/', 'javascript:alert(1)')),
        workspaceId: fc.oneof(fc.uuid(), text, fc.constant(ws.id)),
      },
      { requiredKeys: [] },
    )
    await fc.assert(
      fc.asyncProperty(field, fc.option(idArb), async (body, wsHeader) =>
        expectSane(t, app, {
          method: 'POST',
          url: '/api/v1/upload/request',
          headers: { ...tenant.headers, ...(wsHeader ? { 'x-workspace-id': decodeURIComponent(wsHeader) } : {}) },
          payload: body,
        }),
      ),
      { numRuns: RUNS, ...SEED },
    )
  })

  await t.test('path ids on every route', async (t) => {
    const routes = [
      ['GET', (id: string) => `/api/v1/files/${id}`],
      ['DELETE', (id: string) => `/api/v1/files/${id}`],
      ['GET', (id: string) => `/api/v1/files/${id}/download`],
      ['HEAD', (id: string) => `/api/v1/files/${id}/download`],
      ['GET', (id: string) => `/api/v1/files/${id}/signed-url`],
      ['GET', (id: string) => `/api/v1/workspaces/${id}`],
      ['PATCH', (id: string) => `/api/v1/workspaces/${id}`],
      ['DELETE', (id: string) => `/api/v1/workspaces/${id}`],
      ['PUT', (id: string) => `/api/v1/upload/${id}?expires=1&token=00`],
      ['POST', (id: string) => `/api/v1/admin/tenants/${id}/regenerate-key`],
      ['POST', (id: string) => `/api/v1/webhooks/deliveries/${id}/retry`],
    ] as const
    // U+0000, which PostgreSQL's text cannot hold (#30): a 4xx on either database, never a 500.
    for (const [method, url] of routes) {
      const headers = url('x').includes('/admin/') ? admin : tenant.headers
      const res = await app.inject({ method, url: url('%00'), headers, ...(method === 'PATCH' ? { payload: { name: 'x' } } : {}) })
      t.ok(res.statusCode >= 400 && res.statusCode < 500, `${method} ${url('%00')}: ${res.statusCode} ${res.body}`)
    }
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), idArb, async ([method, url], id) => {
        const headers = url('x').includes('/admin/') ? admin : tenant.headers
        return expectSane(t, app, { method, url: url(id), headers, ...(method === 'PATCH' ? { payload: { name: 'x' } } : {}) })
      }),
      { numRuns: RUNS * 2, ...SEED },
    )
  })

  await t.test('query strings', async (t) => {
    const key = fc.oneof(
      fc.constantFrom('limit', 'cursor', 'context', 'fileType', 'workspaceId', 'expiresIn', 'expires', 'token', 'disposition'),
      fc.string({ maxLength: 10 }),
    )
    const value = fc.oneof(text, fc.integer().map(String), fc.constantFrom('', '0', '-1', '1e3', '100', '101', 'NaN', '%', '%ZZ', 'abc'))
    const query = fc
      .array(fc.tuple(key, value), { maxLength: 6 })
      .map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'))
    const raw = fc.string({ maxLength: 60 }) // not encoded at all: malformed percent-escapes and such
    const paths = ['/api/v1/files', `/api/v1/files/${done.fileId}/signed-url`, `/api/v1/files/${done.fileId}/download`, '/api/v1/workspaces', '/health']
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), fc.oneof(query, raw), fc.boolean(), async (p, q, withAuth) =>
        expectSane(t, app, { method: 'GET', url: `${p}?${q}`, headers: withAuth ? tenant.headers : {} }),
      ),
      { numRuns: RUNS * 2, ...SEED },
    )
  })

  await t.test('headers: authorization, workspace, content-type, range, conditionals, request id', async (t) => {
    const headerValue = fc.oneof(
      text.map((s) => s.replace(/[\r\n\0]/g, '')),
      fc.constantFrom(
        'Bearer',
        'Bearer ',
        `Bearer ${tenant.apiKey} extra`,
        'bearer  ' + tenant.apiKey,
        'Basic abc',
        'bytes=0-',
        'bytes=-0',
        'bytes=99999999999999999999-',
        'bytes=1-2,3-4',
        '*',
        'W/"x"',
      ),
    )
    const names = fc.constantFrom(
      'authorization',
      'x-workspace-id',
      'content-type',
      'range',
      'if-none-match',
      'if-range',
      'x-request-id',
      'accept',
      'x-forwarded-host',
      'x-forwarded-proto',
      'host',
    )
    const urls = [
      '/api/v1/files',
      `/api/v1/files/${done.fileId}/download`,
      `/api/v1/files/${done.fileId}`,
      '/api/v1/tenant/info',
      '/api/v1/workspaces',
      `/api/v1/files/${done.fileId}/signed-url`,
    ]
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...urls), fc.dictionary(names, headerValue, { maxKeys: 4 }), fc.boolean(), async (url, headers, keepAuth) =>
        expectSane(t, app, { method: 'GET', url, headers: { ...(keepAuth ? tenant.headers : {}), ...headers } }),
      ),
      { numRuns: RUNS * 2, ...SEED },
    )
  })

  await t.test('token parsers: presigned PUTs and signed downloads with random expires/token', async (t) => {
    const tok = fc.oneof(fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), maxLength: 80 }), text, fc.constant('0'.repeat(64)))
    const exp = fc.oneof(fc.integer().map(String), fc.bigInt().map(String), text, fc.constant('99999999999999999999'))
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(pending.fileId, done.fileId, 'x'), exp, tok, fc.uint8Array({ maxLength: 64 }), async (id, e, k, body) => {
        const q = `expires=${encodeURIComponent(e)}&token=${encodeURIComponent(k)}`
        const put = await expectSane(t, app, {
          method: 'PUT',
          url: `/api/v1/upload/${id}?${q}`,
          headers: { 'content-type': 'image/png' },
          payload: Buffer.from(body),
        })
        const get = await expectSane(t, app, { method: 'GET', url: `/api/v1/files/${id}/download?${q}` })
        return put && get
      }),
      { numRuns: RUNS, ...SEED },
    )
  })

  await t.test('raw PUT bodies of random bytes, types and lengths', async (t) => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 2048 }),
        fc.constantFrom('image/png', 'image/jpeg', 'application/pdf', 'image/avif', 'image/webp', 'image/gif'),
        fc.option(fc.string({ maxLength: 40 })),
        async (body, type, contentType) => {
          const hs = await app.inject({ method: 'POST', url: '/api/v1/upload/request', headers: tenant.headers, payload: { fileType: type, fileName: 'f' } })
          if (hs.statusCode !== 200) throw new Error(`handshake failed: ${hs.statusCode} ${hs.body}`)
          const url = (hs.json() as Handshake).presignedUrl
          return expectSane(t, app, {
            method: 'PUT',
            url,
            headers: contentType === null ? {} : { 'content-type': contentType.replace(/[\r\n\0]/g, '') },
            payload: Buffer.from(body),
          })
        },
      ),
      { numRuns: RUNS, ...SEED },
    )
  })

  await t.test('nested JSON of any depth, balanced or not, in every body and free-form field (#12)', async (t) => {
    const nested = fc
      .record({
        depth: fc.integer({ min: 1, max: 20_000 }),
        open: fc.constantFrom('[', '{"a":', '[{"b":'),
        balanced: fc.boolean(),
        leaf: fc.constantFrom('1', '"x"', 'null', '{}', '[]', '"[[{"'),
      })
      .map(
        ({ depth, open, balanced, leaf }) =>
          open.repeat(depth) +
          leaf +
          (balanced
            ? [...open]
                .reverse()
                .map((c) => (c === '[' ? ']' : c === '{' ? '}' : ''))
                .join('')
                .repeat(depth)
            : ''),
      )
    const places: [string, (id: number) => string, (v: string, id: number) => string, Record<string, string>][] = [
      ['POST', () => '/api/v1/workspaces', (v, id) => `{"name":"W","slug":"n${id}","metadata":{"m":${v}}}`, tenant.headers],
      ['PATCH', () => `/api/v1/workspaces/${ws.id}`, (v) => `{"metadata":${v}}`, tenant.headers],
      ['POST', () => '/api/v1/upload/request', (v) => `{"fileType":"image/png","fileName":"a.png","tags":${v}}`, tenant.headers],
      ['POST', () => '/api/v1/upload/request', (v) => `{"fileType":"image/png","fileName":"a.png","unknown":${v}}`, tenant.headers],
      ['POST', () => '/api/v1/admin/tenants', (v) => v, admin],
    ]
    let n = 0
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...places), nested, async ([method, url, body, headers], v) => {
        const id = n++
        return expectSane(t, app, { method: method as 'POST', url: url(id), headers: { ...headers, 'content-type': 'application/json' }, payload: body(v, id) })
      }),
      { numRuns: RUNS, ...SEED },
    )
  })

  await t.test('Unicode-hostile strings in every stored string: refused, or stored without a hostile character (#12)', async (t) => {
    const hostileChar = fc.constantFrom(
      ...['\u0000', '\u0007', '\u001b', '\r', '\n', '\t', '\u007f', '\u0085', '\u009b', '\u061c', '\u180e', '\u200b', '\u200c', '\u200d', '\u200e', '\u200f'],
      ...[
        '\u2028',
        '\u2029',
        '\u202a',
        '\u202e',
        '\u2060',
        '\u2066',
        '\u2069',
        '\ufeff',
        '\ufff9',
        '\ufffe',
        '\uffff',
        '\ud800',
        '\udfff',
        '\uff0f',
        '\uff3c',
        '\u2215',
      ],
      ...['\u0301', '😀', '👨\u200d👩', 'Ä', 'A\u0308', 'ς', 'Σ', 'İ', 'ß', '/', '\\', '..', '"', '%00', '\u{e0041}'],
    )
    const hostile = fc.array(fc.oneof(hostileChar, fc.string({ maxLength: 3 })), { minLength: 1, maxLength: 12 }).map((a) => a.join(''))
    let n = 0
    const requests: ((h: string, h2: string) => InjectOptions)[] = [
      (h) => ({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: `${h}${n++}` } }),
      (h, h2) => ({
        method: 'POST',
        url: '/api/v1/workspaces',
        headers: tenant.headers,
        payload: { name: h, slug: `u${n++}`, metadata: { [h2]: [h, { k: h2 }] } },
      }),
      (h, h2) => ({ method: 'PATCH', url: `/api/v1/workspaces/${ws.id}`, headers: tenant.headers, payload: { name: h2, metadata: { m: h } } }),
      (h, h2) => ({
        method: 'POST',
        url: '/api/v1/upload/request',
        headers: tenant.headers,
        payload: { fileType: 'image/png', fileName: h, context: h2, tags: { [h2]: h } },
      }),
      (h) => ({
        method: 'POST',
        url: '/api/v1/upload/request',
        headers: tenant.headers,
        payload: { fileType: 'image/png', fileName: 'a.png', webhookUrl: `https://example.com/${h}` },
      }),
    ]
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...requests), hostile, hostile, async (make, h, h2) => {
        const res = await saneResponse(t, app, make(h, h2))
        if (!res) return false
        if (res.statusCode >= 300) return true
        // Accepted: what was stored (read back) holds no hostile character.
        const fileId = (res.json() as { fileId?: string }).fileId
        const stored = fileId ? (await app.inject({ url: `/api/v1/files/${fileId}`, headers: tenant.headers })).json() : res.json()
        // Only the stored strings go into a failure message: the tenant's response also holds its key.
        const { name: sName, originalName, context, tags, metadata } = stored as Record<string, unknown>
        const strings = { name: sName, originalName, context, tags, metadata }
        if (!isSafeJson(strings)) return (t.fail(`stored a hostile character: ${JSON.stringify(strings).slice(0, 300)}`), false)
        const name = (stored as { originalName?: string }).originalName
        if (name !== undefined && !new RegExp(FILE_NAME_PATTERN, 'u').test(name))
          return (t.fail(`stored a file name with a separator: ${JSON.stringify(name)}`), false)
        return true
      }),
      { numRuns: RUNS * 2, ...SEED },
    )
  })

  t.equal((await app.inject({ url: '/api/v1/tenant/info', headers: tenant.headers })).statusCode, 200, 'the fuzzing tenant stayed authenticated throughout')
})
