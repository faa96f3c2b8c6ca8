// @suites: pg-all
import t from 'tap'
import fc from 'fast-check'
import { isDeepStrictEqual } from 'node:util'
import type { FastifySchema } from 'fastify'
import { admin, createTenant, handshake, makeApp } from './helper'
import { nameOfKey } from '../src/s3/objects'
import { isFileName, terminalJson, toFileName } from '../src/lib/text'
import { HandshakeBody } from '../src/contract/files'
import { validatorCompiler } from '../src/http/validation'

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

// #24: names made from S3 keys (and from a server's Content-Disposition, by the CLI) are names the
// handshake itself accepts, whatever the key holds.

/** The handshake's own body validator, as the route runs it. */
const handshakeValid = validatorCompiler({ schema: HandshakeBody as FastifySchema, method: 'POST', url: '/api/v1/upload/request', httpPart: 'body' }) as (
  body: unknown,
) => boolean
const accepted = (fileName: string) => handshakeValid({ fileType: 'image/png', fileName })

const ID = '01890000-0000-7000-8000-0000000000ab'
const KEYS: [string, string][] = [
  ['x\u0001\u001b[31mred\r\nX-Evil: 1', 'x__[31mred__X-Evil_ 1'],
  ['/', ID],
  ['a/.', 'a'],
  ['..\\..\\win.ini', 'win.ini'],
  ['invoice\u202efdp.exe', 'invoice_fdp.exe'],
  ['..', ID],
  ['a/b/..', 'b'],
  ['///', ID],
  ['reports/2026/q1.csv', 'q1.csv'],
  ['dir/', 'dir'],
  ['photo <1>?.png', 'photo _1__.png'],
  ['a\uff0fb\u2215c', 'a_b_c'],
  ['zero\u200bwidth\ufeff', 'zero_width_'],
  ['Äpfel 😀 family 👨\u200d👩\u200d👧', 'Äpfel 😀 family 👨\u200d👩\u200d👧'],
]

t.test('nameOfKey: the nasty keys of #24 become names the handshake accepts', async (t) => {
  for (const [key, name] of KEYS) {
    t.equal(nameOfKey(key, ID), name, JSON.stringify(key))
    t.ok(accepted(nameOfKey(key, ID)), `${JSON.stringify(key)}: accepted by the handshake`)
    t.ok(isFileName(nameOfKey(key, ID)))
  }
  for (const [key] of KEYS.slice(0, 5)) t.notOk(accepted(key), `${JSON.stringify(key)} itself is refused: the test is not vacuous`)
  // Cut to 255 characters as the handshake counts them (code points), never inside a surrogate pair.
  const long = `${'a'.repeat(254)}😀😀`
  t.equal(nameOfKey(long, ID), `${'a'.repeat(254)}😀`)
  t.ok(accepted(nameOfKey(long, ID)))
  t.notOk(accepted(long))
  t.equal(nameOfKey('b'.repeat(300), ID), 'b'.repeat(255))
  t.equal(nameOfKey('😀'.repeat(255), ID), '😀'.repeat(255), 'a name the handshake accepts stays whole')
  // A fallback that is no name either: the steps again, then "object".
  t.equal(toFileName('/', '../x\u0007'), 'x_')
  t.equal(toFileName('..', '/'), 'object')
})

/** Keys as S3 may carry them: any code point, lone surrogates, and the characters that matter here. */
const hostileKey = fc
  .array(
    fc.oneof(
      fc.string({ unit: 'binary', maxLength: 8 }),
      fc.constantFrom(
        '/',
        '\\',
        '.',
        '..',
        ':',
        '*',
        '\u0000',
        '\u001b',
        '\r',
        '\n',
        '\u009b',
        '\u202e',
        '\u2066',
        '\u200b',
        '\ufeff',
        '\uff0f',
        '\ud800',
        '\udc00',
        '😀',
      ),
    ),
    { maxLength: 40 },
  )
  .map((parts) => parts.join(''))
  .chain((k) => fc.oneof(fc.constant(k), fc.constant(k.repeat(20))))

t.test('nameOfKey: any key gives a name the handshake accepts, and a name stays itself', async (t) => {
  fc.assert(
    fc.property(hostileKey, (key) => {
      const name = nameOfKey(key, ID)
      return accepted(name) && isFileName(name) && toFileName(name, ID) === name
    }),
    { numRuns: Number(process.env.COFFER_FUZZ_RUNS ?? 2000) },
  )
  fc.assert(
    fc.property(
      hostileKey.filter((k) => accepted(k)),
      (name) => nameOfKey(name, ID) === name && nameOfKey(`some/prefix/${name}`, ID) === name,
    ),
    { numRuns: 500 },
  )
  t.pass('properties held')
})

t.test('terminalJson: the same JSON value, with nothing raw that drives a terminal', async (t) => {
  const value = { name: 'a\u001b[2J\u009b\u202e\u2066\u200b\u007f\ud800b', fine: 'Äpfel 😀 👨\u200d👩', n: 1 }
  const out = terminalJson(value)
  t.same(JSON.parse(out), value)
  // eslint-disable-next-line no-control-regex -- the point: none may appear
  t.notMatch(out, /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200b]/)
  t.match(out, 'Äpfel 😀 👨\u200d👩')
  fc.assert(
    fc.property(fc.jsonValue({ stringUnit: 'binary' }), (v) => isDeepStrictEqual(JSON.parse(terminalJson(v)), JSON.parse(JSON.stringify(v)))),
    { numRuns: 200 },
  )
})
