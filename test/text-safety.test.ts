import t from 'tap'
import { admin, createTenant, handshake, makeApp } from './helper'

// #12 item 13: control, bidi and invisible formatting characters are refused in every stored
// string; file names also refuse look-alikes of the separators.

const HOSTILE: [string, string][] = [
  ['NUL', '\u0000'],
  ['CR', '\r'],
  ['LF', '\n'],
  ['ESC', '\u001b'],
  ['C1 CSI', '\u009b'],
  ['LRM', '\u200e'],
  ['RLM', '\u200f'],
  ['RLO', '\u202e'],
  ['LRI', '\u2066'],
  ['PDI', '\u2069'],
  ['ALM', '\u061c'],
  ['ZWSP', '\u200b'],
  ['LINE SEPARATOR', '\u2028'],
  ['PARAGRAPH SEPARATOR', '\u2029'],
  ['BOM', '\ufeff'],
  ['lone surrogate', '\ud800'],
]
const LOOKALIKES: [string, string][] = [
  ['FULLWIDTH SOLIDUS', '\uff0f'],
  ['FULLWIDTH REVERSE SOLIDUS', '\uff3c'],
  ['DIVISION SLASH', '\u2215'],
  ['FRACTION SLASH', '\u2044'],
  ['FULLWIDTH COLON', '\uff1a'],
]
const FINE = ['Äpfel 😀', 'family 👨\u200d👩\u200d👧', 'می\u200cخواهم', 'ελληνικά', '日本語']

t.test('every stored string refuses control, bidi and invisible characters', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  const fields: [
    string,
    (s: string) => Promise<{ statusCode: number; json: () => { error: { code: string; details: { errors: { path: string }[] } } } }>,
    string,
  ][] = [
    ['tenant name', (s) => app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: `T${s}x${Math.random()}` } }), '/name'],
    [
      'workspace name',
      (s) =>
        app.inject({
          method: 'POST',
          url: '/api/v1/workspaces',
          headers: tenant.headers,
          payload: { name: `W${s}x`, slug: `s${Math.random().toString(36).slice(2)}` },
        }),
      '/name',
    ],
    [
      'workspace metadata value',
      (s) =>
        app.inject({
          method: 'POST',
          url: '/api/v1/workspaces',
          headers: tenant.headers,
          payload: { name: 'W', slug: `m${Math.random().toString(36).slice(2)}`, metadata: { a: [{ b: `v${s}` }] } },
        }),
      '/metadata',
    ],
    [
      'workspace metadata key',
      (s) =>
        app.inject({
          method: 'POST',
          url: '/api/v1/workspaces',
          headers: tenant.headers,
          payload: { name: 'W', slug: `k${Math.random().toString(36).slice(2)}`, metadata: { [`k${s}`]: 1 } },
        }),
      '/metadata',
    ],
    ['fileName', (s) => handshake(app, tenant.headers, { fileType: 'image/png', fileName: `a${s}b.png` }), '/fileName'],
    ['context', (s) => handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', context: `c${s}` }), '/context'],
    ['tag key', (s) => handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', tags: { [`k${s}`]: 'v' } }), '/tags'],
    ['tag value', (s) => handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', tags: { k: `v${s}` } }), '/tags/k'],
    [
      'webhookUrl',
      (s) => handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'a.png', webhookUrl: `https://example.com/h${s}ook` }),
      '/webhookUrl',
    ],
  ]
  for (const [field, send, path] of fields) {
    for (const [name, ch] of HOSTILE) {
      const res = await send(ch)
      t.equal(res.statusCode, 400, `${field} with ${name}`)
      if (res.statusCode === 400) {
        t.equal(res.json().error.code, 'VALIDATION_ERROR')
        t.ok(
          res.json().error.details.errors.some((e) => e.path.startsWith(path)),
          `${field} with ${name}: reported at ${path}`,
        )
      }
    }
    for (const ok of FINE) {
      const res = await send(field === 'webhookUrl' ? encodeURIComponent(ok) : ok)
      t.ok(res.statusCode === 200 || res.statusCode === 201, `${field} accepts ${JSON.stringify(ok)} (${res.statusCode})`)
    }
  }
})

t.test('fileName refuses look-alikes of the separators', async (t) => {
  const { app } = await makeApp(t)
  const tenant = await createTenant(app)
  for (const [name, ch] of LOOKALIKES) {
    const res = await handshake(app, tenant.headers, { fileType: 'image/png', fileName: `..${ch}..${ch}etc${ch}passwd.png` })
    t.equal(res.statusCode, 400, name)
  }
  t.equal((await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'invoice 1／2.png', context: 'a／b' })).statusCode, 400, 'in the name only')
  t.equal(
    (await handshake(app, tenant.headers, { fileType: 'image/png', fileName: 'invoice.png', context: 'a／b', tags: { 'x／y': '1／2' } })).statusCode,
    200,
    'elsewhere a fullwidth slash is just text',
  )
})
