// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { ensureDataDir, loadSecret } from '../src/lib/data-dir'
import { tempDir } from './helper'
import { contentDisposition, dispositionFor, showsInline } from '../src/lib/content-disposition'
import { httpDateMs, ifMatch, parseRange } from '../src/http/range'
import { redactUrl } from '../src/lib/logger'
import { isoFormatter, isoTime } from '../src/lib/clock'
import { crc32c } from '../src/lib/crc32c'
import { Crc32c } from '@aws-crypto/crc32c'
import { randomBytes } from 'node:crypto'

t.test('contentDisposition neutralises quotes, backslashes, CR and LF in the fallback and encodes filename*', async (t) => {
  const v = contentDisposition('a"b\\c\r\nSet-Cookie: x=1.pdf')
  t.notMatch(v, /[\r\n]/)
  t.equal(v, `attachment; filename="a_b_c__Set-Cookie: x=1.pdf"; filename*=UTF-8''a%22b%5Cc%0D%0ASet-Cookie%3A%20x%3D1.pdf`)
  t.equal(contentDisposition('日本.png', 'inline'), `inline; filename="__.png"; filename*=UTF-8''%E6%97%A5%E6%9C%AC.png`)
  t.equal(contentDisposition(''), `attachment; filename="download"; filename*=UTF-8''`)
})

t.test('showsInline: only types that run nothing may be inline (#24)', async (t) => {
  const inline = [
    'image/png',
    'image/jpeg',
    'IMAGE/WEBP',
    'image/gif; x=1',
    ' image/avif ',
    'audio/mpeg',
    'video/mp4',
    'application/pdf',
    'text/plain',
    'text/plain; charset=utf-8',
  ]
  const attachment = [
    'text/html',
    'TEXT/HTML; charset=utf-8',
    'application/xhtml+xml',
    'image/svg+xml',
    'image/svg',
    'text/xml',
    'application/xml',
    'application/rss+xml',
    'application/vnd.foo+xml',
    'text/xsl',
    'text/javascript',
    'application/javascript',
    'application/ecmascript',
    'application/x-javascript',
    'text/css',
    'application/wasm',
    'multipart/x-mixed-replace; boundary=x',
    'message/rfc822',
    'application/octet-stream',
    'application/json',
    'text/csv',
    'image/png, text/html',
    'image/png; a="b,text/html"',
    'image/png;,text/html',
    'image/png text/html',
    'image/',
    '/png',
    'image',
    '',
    'image/png\u0000',
  ]
  for (const type of inline) t.ok(showsInline(type), `${JSON.stringify(type)} may be inline`)
  for (const type of attachment) t.notOk(showsInline(type), `${JSON.stringify(type)} is always an attachment`)
  t.equal(dispositionFor('a.png', 'image/png', 'inline'), `inline; filename="a.png"; filename*=UTF-8''a.png`)
  t.equal(dispositionFor('a.html', 'text/html', 'inline'), `attachment; filename="a.html"; filename*=UTF-8''a.html`)
  t.equal(dispositionFor('a.png', 'image/png'), `attachment; filename="a.png"; filename*=UTF-8''a.png`, 'attachment unless asked')
})

t.test('parseRange', async (t) => {
  t.same(parseRange(undefined, 10), { kind: 'full' })
  t.same(parseRange('bytes=2-4', 10), { kind: 'partial', start: 2, end: 4 })
  t.same(parseRange('bytes=8-', 10), { kind: 'partial', start: 8, end: 9 })
  t.same(parseRange('bytes=-3', 10), { kind: 'partial', start: 7, end: 9 })
  t.same(parseRange('bytes=10-', 10), { kind: 'unsatisfiable' })
  t.same(parseRange('bytes=-0', 10), { kind: 'unsatisfiable' })
  t.same(parseRange('bytes=1-2,4-5', 10), { kind: 'full' })
  t.same(parseRange('bytes=5-1', 10), { kind: 'full' })
  t.same(parseRange('bytes=-', 10), { kind: 'full' })
})

t.test('ifMatch compares strongly; httpDateMs reads HTTP-dates to the second', async (t) => {
  t.ok(ifMatch('"a"', '"a"'))
  t.notOk(ifMatch('W/"a"', '"a"'), 'a weak tag never matches If-Match')
  t.ok(ifMatch('"b", "a"', '"a"'))
  t.ok(ifMatch('*', '"a"'))
  t.notOk(ifMatch('"b"', '"a"'))
  t.equal(httpDateMs('Thu, 01 Jan 2026 00:00:01 GMT'), Date.UTC(2026, 0, 1, 0, 0, 1))
  t.ok(Number.isNaN(httpDateMs('yesterday')))
})

t.test('redactUrl hides credential query values', async (t) => {
  t.equal(redactUrl('/api/v1/upload/x?expires=1&token=abc'), '/api/v1/upload/x?expires=1&token=[REDACTED]')
  t.equal(redactUrl('/d?token=abc&x=1&apiKey=k'), '/d?token=[REDACTED]&x=1&apiKey=[REDACTED]')
  t.equal(redactUrl('/health'), '/health')
})

t.test('the server secret: a process racing its creation reads the complete secret', async (t) => {
  const d = ensureDataDir(tempDir(t))
  const writeSync = fs.writeSync
  t.teardown(() => {
    fs.writeSync = writeSync
  })
  let racer: Buffer | undefined
  // While this process writes the secret, "another process" starts on the same data dir.
  fs.writeSync = ((...args: Parameters<typeof writeSync>) => {
    fs.writeSync = writeSync
    racer = loadSecret(d, undefined)
    return writeSync(...args)
  }) as typeof writeSync
  const mine = loadSecret(d, undefined)
  t.equal(racer?.length, 32)
  t.same(mine, racer, 'both use the same secret')
  t.same(loadSecret(d, undefined), mine, 'and so does every later start')
  t.same(
    fs.readdirSync(d.root).filter((n) => n.startsWith('secret.')),
    [],
    'no temporary file left',
  )
})

t.test('the server secret: a crash while generating it leaves no damaged secret behind', async (t) => {
  const d = ensureDataDir(tempDir(t))
  const fsyncSync = fs.fsyncSync
  t.teardown(() => {
    fs.fsyncSync = fsyncSync
  })
  fs.fsyncSync = () => {
    throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' })
  }
  t.throws(() => loadSecret(d, undefined), /EIO/)
  fs.fsyncSync = fsyncSync
  t.notOk(fs.existsSync(d.secret), 'no secret file was published')
  const secret = loadSecret(d, undefined)
  t.equal(secret.length, 32, 'the next start generates one')
  t.equal(fs.statSync(d.secret).mode & 0o777, 0o600)
  t.equal(fs.readFileSync(d.secret, 'utf8'), secret.toString('hex'))
  t.same(loadSecret(d, 'configured-secret'), Buffer.from('configured-secret'), 'COFFER_SECRET wins')
  t.ok(path.isAbsolute(d.secret))
})

t.test('isoTime writes exactly what Date#toISOString writes, for every kind of instant', async (t) => {
  const fmt = isoFormatter()
  const check = (ms: number) => {
    const want = new Date(ms).toISOString()
    // Twice: the first formats the second, the second comes from the one-second cache.
    if (fmt(ms) !== want || fmt(ms) !== want || isoTime(ms) !== want) t.fail(`${ms}: ${fmt(ms)} / ${isoTime(ms)}, want ${want}`)
  }
  const edges = [
    0,
    999,
    1000,
    Date.UTC(1970, 11, 31, 23, 59, 59, 999),
    Date.UTC(2000, 1, 29, 12, 0, 0, 5),
    Date.UTC(2000, 2, 1),
    Date.UTC(2100, 1, 28, 23, 59, 59, 999),
    Date.UTC(2100, 2, 1),
    Date.UTC(2400, 1, 29),
    Date.UTC(2026, 10, 23, 17, 2, 42, 952),
    Date.UTC(9999, 11, 31, 23, 59, 59, 999),
    // The slow path: six-digit and negative years, before the epoch, fractions, out of range.
    Date.UTC(10000, 0, 1),
    -1,
    Date.UTC(1969, 6, 20, 20, 17, 40),
    Date.UTC(-50, 0, 1),
    1.5,
  ]
  for (const ms of edges) check(ms)
  // Every month boundary of four centuries, and random instants over the whole fast range.
  for (let y = 1970; y < 2370; y++)
    for (let m = 0; m < 12; m++) {
      check(Date.UTC(y, m, 1))
      check(Date.UTC(y, m, 1) - 1)
    }
  for (let i = 0; i < 200_000; i++) check(Math.floor(Math.random() * Date.UTC(10000, 0, 1)))
  // Consecutive milliseconds across a second, minute, day and year boundary.
  for (let ms = Date.UTC(2026, 11, 31, 23, 59, 59, 0); ms < Date.UTC(2027, 0, 1, 0, 0, 1); ms++) check(ms)
  t.throws(() => isoTime(Number.NaN), RangeError, 'an invalid time throws as toISOString does')
  t.pass('all formatted as toISOString does')
})

t.test("crc32c: the check value, and @aws-crypto/crc32c's result for any length and any split into pieces", async (t) => {
  // The catalogue's check value of CRC-32C ("123456789"), and of nothing.
  t.equal(crc32c(Buffer.from('123456789')), 0xe3069283)
  t.equal(crc32c(Buffer.alloc(0)), 0)
  for (const length of [1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 65536 + 3]) {
    const data = randomBytes(length)
    const reference = new Crc32c().update(data).digest()
    t.equal(crc32c(data), reference, `${length} bytes at once`)
    // Continued piece by piece from the previous value, at uneven (unaligned) cuts.
    let value = 0
    for (let at = 0, step = 1; at < length; at += step, step = (step * 3 + 1) % 29 || 1) value = crc32c(data.subarray(at, at + step), value)
    t.equal(value, reference, `${length} bytes in pieces`)
  }
})
