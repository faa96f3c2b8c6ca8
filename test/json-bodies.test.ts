// @suites: pg-all
import t from 'tap'
import { createTenant, makeApp, upload } from './helper'

const json = { 'content-type': 'application/json' }
const nested = (depth: number, leaf = '1') => '['.repeat(depth - 1) + leaf + ']'.repeat(depth - 1)

t.test('deeply nested JSON is a 400 before anything is written (#12 item 5)', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const headers = { ...tenant.headers, ...json }
  // ~4,400 levels in under 16 KiB: refused by depth, not by size.
  for (const depth of [4400, 10_000]) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers, payload: `{"name":"W","slug":"w","metadata":{"a":${nested(depth)}}}` })
    t.equal(res.statusCode, 400, `metadata ${depth} levels deep`)
    t.equal(res.json().error.code, 'VALIDATION_ERROR')
  }
  t.same((await app.inject({ url: '/api/v1/workspaces', headers: tenant.headers })).json().workspaces, [], 'no workspace was created')
  const ok = await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers, payload: { name: 'W', slug: 'w', metadata: { a: 1 } } })
  t.equal(ok.statusCode, 201, 'a retry with sane metadata creates it: nothing was half-written')

  // The metadata bound itself: 32 levels (the object included) pass, 33 do not.
  const deep = (levels: number) => JSON.parse('{"a":'.repeat(levels) + '1' + '}'.repeat(levels)) as object
  const at32 = await app.inject({ method: 'PATCH', url: `/api/v1/workspaces/${ok.json().id}`, headers, payload: { metadata: deep(32) } })
  t.equal(at32.statusCode, 200, '32 levels are accepted')
  const at33 = await app.inject({ method: 'PATCH', url: `/api/v1/workspaces/${ok.json().id}`, headers, payload: { metadata: deep(33) } })
  t.equal(at33.statusCode, 400)
  t.same(at33.json().error.details.errors, [{ path: '/metadata', message: 'must nest at most 32 levels' }])
  t.same((await app.inject({ url: `/api/v1/workspaces/${ok.json().id}`, headers: tenant.headers })).json().metadata, deep(32), 'unchanged')

  // Deep JSON anywhere in any body: an unknown field, the whole body, 1 MiB of brackets.
  for (const [label, payload] of [
    ['unknown field', `{"fileType":"image/png","fileName":"a.png","x":${nested(5000)}}`],
    ['tags', `{"fileType":"image/png","fileName":"a.png","tags":{"a":${nested(5000, '"x"')}}}`],
    ['the body', nested(100_000)],
    ['unclosed brackets', '['.repeat(1024 * 1024 - 10)],
  ] as const) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/upload/request', headers, payload })
    t.equal(res.statusCode, 400, label)
    t.equal(res.json().error.code, 'VALIDATION_ERROR', label)
  }
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/api/v1/upload/request',
        headers,
        payload: `{"fileType":"image/png","fileName":"a.png","tags":{"k":"[[[{{\\"]]"}}`,
      })
    ).statusCode,
    200,
    'brackets inside strings do not count',
  )
})

t.test('an empty body with a JSON Content-Type on a route that takes no body is no body (#12 item 15)', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const headers = { ...tenant.headers, ...json }
  const r = await upload(app, tenant.headers)
  // What the Storage Brain SDK's deleteFile sends.
  const del = await app.inject({ method: 'DELETE', url: `/api/v1/files/${r.fileId}`, headers, payload: '' })
  t.equal(del.statusCode, 200, del.body)
  t.same(del.json(), { success: true })
  const ws = (await app.inject({ method: 'POST', url: '/api/v1/workspaces', headers, payload: { name: 'W', slug: 'w' } })).json()
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/workspaces/${ws.id}`, headers, payload: '' })).statusCode, 200)
  t.equal((await app.inject({ url: '/api/v1/files', headers, payload: '' })).statusCode, 200, 'a GET with the same headers too')
  const needsBody = await app.inject({ method: 'POST', url: '/api/v1/upload/request', headers, payload: '' })
  t.equal(needsBody.statusCode, 400, 'a route that takes a body still needs one')
  t.equal(needsBody.json().error.message, 'Body must be a JSON object')
  const garbage = await app.inject({ method: 'DELETE', url: `/api/v1/files/${r.fileId}`, headers, payload: '{' })
  t.equal(garbage.statusCode, 400, 'a non-empty body that is not JSON is still refused')
})
