// @suites: pg-all
// #24: names from S3 meet the API's rules. Keys that the handshake would refuse as file names become
// safe names in the API, in `coffer ls` and in the files `coffer download` writes, while S3 keeps
// the real key; active content types written through S3 are never shown inline on the API's origin.
import fs from 'node:fs'
import path from 'node:path'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { BUNDLE, buildBundle } from './process-helper'
import { sqliteOnly, tempDir } from './helper'
import { makeS3, pattern, type S3Context } from './s3-helper'
import { isFileName } from '../src/lib/text'
import { MIGRATIONS } from '../src/db/migrations'

buildBundle()

const run = promisify(execFile)

/** `coffer ARGS` (the built bundle) in `cwd` against the context's API, asynchronously: the server is in this process. */
async function coffer(ctx: S3Context, url: string, args: string[], cwd: string) {
  try {
    const r = await run(process.execPath, [BUNDLE, ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? '', COFFER_URL: url, COFFER_API_KEY: ctx.tenant.apiKey },
      encoding: 'buffer',
      timeout: 30_000,
    })
    return { status: 0, stdout: r.stdout, stderr: r.stderr.toString('utf8') }
  } catch (err) {
    const e = err as { code: number; stdout: Buffer; stderr: Buffer }
    return { status: e.code, stdout: e.stdout, stderr: e.stderr.toString('utf8') }
  }
}

async function listen(ctx: S3Context): Promise<string> {
  await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const addr = ctx.app.server.address()
  return `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`
}

async function bucketFiles(ctx: S3Context, slug: string) {
  const ws = (await ctx.app.inject({ method: 'GET', url: '/api/v1/workspaces', headers: ctx.tenant.headers })).json().workspaces as {
    id: string
    slug: string
  }[]
  const id = ws.find((w) => w.slug === slug)!.id
  const res = await ctx.app.inject({ method: 'GET', url: `/api/v1/files?workspaceId=${id}&limit=100`, headers: ctx.tenant.headers })
  return res.json().files as { id: string; originalName: string; fileType: string }[]
}

/** The keys of the issue, with the name the API shows for each (`<id>` where no segment is left). */
const NASTY: [string, string][] = [
  ['x\u0001\u001b[31mred\r\nX-Evil: 1', 'x__[31mred__X-Evil_ 1'],
  ['/', '<id>'],
  ['a/.', 'a'],
  ['..\\..\\win.ini', 'win.ini'],
  ['invoice\u202efdp.exe', 'invoice_fdp.exe'],
]

// eslint-disable-next-line no-control-regex -- the point: none of these may reach a terminal raw
const RAW_UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]/

t.test('nasty keys: safe names in the API, in coffer ls and in the files coffer download writes; S3 keeps the key', async (t) => {
  const ctx = await makeS3(t)
  const url = await listen(ctx)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'names' }))
  const bodies = new Map<string, Buffer>()
  for (const [i, [key]] of NASTY.entries()) {
    const body = pattern(100 + i, i + 1)
    bodies.set(key, body)
    await ctx.client.send(new PutObjectCommand({ Bucket: 'names', Key: key, Body: body }))
  }
  for (const [key] of NASTY) {
    const head = await ctx.client.send(new HeadObjectCommand({ Bucket: 'names', Key: key }))
    t.equal(head.ContentLength, bodies.get(key)!.length, `S3 still answers the real key ${JSON.stringify(key)}`)
  }

  const files = await bucketFiles(ctx, 'names')
  t.equal(files.length, NASTY.length)
  const byKey = new Map<string, { id: string; originalName: string }>()
  for (const [key, name] of NASTY) {
    const object = ctx.core.db.pluck('SELECT id FROM files WHERE object_key = ? AND deleted_at IS NULL').get(key) as string
    const f = files.find((x) => x.id === object)!
    byKey.set(key, f)
    t.equal(f.originalName, name === '<id>' ? f.id : name, `GET /files names ${JSON.stringify(key)} safely`)
    t.ok(isFileName(f.originalName), 'a name the handshake accepts')
  }

  const ls = await coffer(ctx, url, ['ls'], tempDir(t))
  t.equal(ls.status, 0, ls.stderr)
  const out = ls.stdout.toString('utf8')
  t.notMatch(out, RAW_UNSAFE, 'coffer ls writes no raw control or bidi character')
  t.equal(out.trimEnd().split('\n').length, 1 + NASTY.length, 'a header and one row per file: no forged row')
  for (const [, name] of NASTY.filter(([, n]) => n !== '<id>')) t.match(out, name)

  const json = await coffer(ctx, url, ['ls', '--json'], tempDir(t))
  t.notMatch(json.stdout.toString('utf8'), RAW_UNSAFE, 'nor coffer ls --json')

  const dir = tempDir(t)
  for (const [key, name] of NASTY) {
    const f = byKey.get(key)!
    const r = await coffer(ctx, url, ['download', f.id], dir)
    t.equal(r.status, 0, r.stderr)
    t.notMatch(r.stderr, RAW_UNSAFE)
    const expected = name === '<id>' ? f.id : name
    t.ok(fs.readFileSync(path.join(dir, expected)).equals(bodies.get(key)!), `coffer download writes ${JSON.stringify(expected)}`)
  }
  const written = fs.readdirSync(dir)
  t.equal(written.length, NASTY.length, 'each file in the directory itself, nothing elsewhere')
  for (const name of written) t.ok(isFileName(name), `${JSON.stringify(name)} is a safe file name`)
  t.notOk(fs.existsSync(path.join(dir, '..', 'win.ini')))
})

t.test(
  'rows written before the fix are renamed by the migration',
  {
    skip: sqliteOnly(
      "SQLite's migration 'file names the handshake would refuse are made safe', on its connection's own functions; PostgreSQL's schema begins after it",
    ),
  },
  async (t) => {
    const ctx = await makeS3(t)
    await ctx.client.send(new CreateBucketCommand({ Bucket: 'legacy' }))
    for (const [key] of NASTY) await ctx.client.send(new PutObjectCommand({ Bucket: 'legacy', Key: key, Body: 'x' }))
    // What the code before #24 stored: the key's last non-empty segment as it came.
    const legacy = (key: string) =>
      key
        .split('/')
        .filter((s) => s !== '')
        .at(-1) ?? key
    const setName = ctx.core.sqlite!.prepare('UPDATE files SET original_name = ? WHERE object_key = ?')
    for (const [key] of NASTY) setName.run(legacy(key), key)
    t.ok(
      (await bucketFiles(ctx, 'legacy')).some((f) => !isFileName(f.originalName)),
      'the legacy rows hold names the handshake refuses',
    )
    // The migration's statement, on the connection the server opened (which registers its functions).
    ctx.core.sqlite!.exec(MIGRATIONS.find((m) => m.name === 'file names the handshake would refuse are made safe')!.sql)
    for (const f of await bucketFiles(ctx, 'legacy')) t.ok(isFileName(f.originalName), `${JSON.stringify(f.originalName)} is safe after the migration`)
    const names = (await bucketFiles(ctx, 'legacy')).map((f) => f.originalName)
    for (const [, name] of NASTY.filter(([, n]) => n !== '<id>')) t.ok(names.includes(name), `${name}: the name a write makes today`)
  },
)

t.test('active content written through S3 is an attachment from the API, inline or signed; passive types stay inline', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'pages' }))
  const objects: [string, string, 'attachment' | 'inline'][] = [
    ['page.html', 'text/html', 'attachment'],
    ['page2.html', 'TEXT/HTML; charset=utf-8', 'attachment'],
    ['pic.svg', 'image/svg+xml', 'attachment'],
    ['doc.xhtml', 'application/xhtml+xml', 'attachment'],
    ['feed.xml', 'text/xml', 'attachment'],
    ['app.js', 'text/javascript', 'attachment'],
    ['photo.png', 'image/png', 'inline'],
    ['notes.txt', 'text/plain; charset=utf-8', 'inline'],
  ]
  const body = '<html><script>alert(document.domain)</script></html>'
  for (const [key, type] of objects) await ctx.client.send(new PutObjectCommand({ Bucket: 'pages', Key: key, Body: body, ContentType: type }))
  // A type list whose last entry a browser would take (WHATWG Fetch): the S3 front refuses to store
  // it today (a 500 of its own), so the row is given it directly, as whatever the record holds.
  await ctx.client.send(new PutObjectCommand({ Bucket: 'pages', Key: 'trick.png', Body: body, ContentType: 'image/png' }))
  ctx.core.db.prepare('UPDATE files SET file_type = ? WHERE object_key = ?').run('image/png, text/html', 'trick.png')
  objects.push(['trick.png', 'image/png, text/html', 'attachment'])
  const files = await bucketFiles(ctx, 'pages')
  for (const [key, type, expected] of objects) {
    const f = files.find((x) => x.originalName === key)!
    t.equal(f.fileType, type, `${key}: the stored type`)
    const inline = await ctx.app.inject({ method: 'GET', url: `/api/v1/files/${f.id}/download?disposition=inline`, headers: ctx.tenant.headers })
    const signed = (await ctx.app.inject({ method: 'GET', url: `/api/v1/files/${f.id}/signed-url`, headers: ctx.tenant.headers })).json().url as string
    const { pathname, search } = new URL(signed)
    const viaSigned = await ctx.app.inject({ method: 'GET', url: `${pathname}${search}&disposition=inline` })
    const viaSignedPlain = await ctx.app.inject({ method: 'GET', url: `${pathname}${search}` })
    for (const [how, res] of [
      ['key, ?disposition=inline', inline],
      ['signed URL, &disposition=inline', viaSigned],
    ] as const) {
      t.equal(res.statusCode, 200, `${key} by ${how}`)
      t.match(res.headers['content-disposition'], new RegExp(`^${expected}; filename="`), `${key} (${type}) by ${how}: ${expected}`)
      t.equal(res.headers['x-content-type-options'], 'nosniff')
      t.equal(res.headers['content-security-policy'], "default-src 'none'; sandbox")
      t.equal(res.body, body)
    }
    t.match(viaSignedPlain.headers['content-disposition'], /^attachment; /, `${key}: a signed URL is an attachment by default`)
  }
  // The S3 front keeps serving the stored type, as S3 does (its listener is not the API's origin).
  const got = await ctx.client.send(new GetObjectCommand({ Bucket: 'pages', Key: 'page.html' }))
  t.equal(got.ContentType, 'text/html')
  await got.Body?.transformToString()
})
