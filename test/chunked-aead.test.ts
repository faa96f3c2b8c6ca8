// @suites: sqlite
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { Writable } from 'node:stream'
import {
  BlobAuthenticationError,
  CHUNK_BYTES,
  HEADER_BYTES,
  OpenStream,
  SealStream,
  TAG_BYTES,
  openBuffer,
  plainSizeOf,
  sealBuffer,
  sealedSize,
  sealedSpan,
} from '../src/lib/chunked-aead'

const KEY = randomBytes(32)
const KEY_ID = 0x1234abcd
const keys = (id: number) => (id === KEY_ID ? KEY : undefined)

async function collect(source: Readable, ...through: NodeJS.ReadWriteStream[]): Promise<Buffer> {
  const out: Buffer[] = []
  await pipeline(
    source,
    ...(through as [NodeJS.ReadWriteStream]),
    new Writable({
      write(chunk: Buffer, _e, cb) {
        out.push(chunk)
        cb()
      },
    }),
  )
  return Buffer.concat(out)
}

/** `buf` in pieces of irregular sizes, as a socket delivers it. */
function pieces(buf: Buffer): Readable {
  const parts: Buffer[] = []
  for (let i = 0, step = 1; i < buf.length; i += step, step = (step * 7 + 13) % 70_000) parts.push(buf.subarray(i, i + step))
  return Readable.from(parts)
}

const sizes = [0, 1, 100, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 3 * CHUNK_BYTES, 3 * CHUNK_BYTES + 517]

t.test('streamed and whole-buffer sealing both round-trip, at every size near a chunk boundary (#27)', async (t) => {
  for (const n of sizes) {
    const plain = randomBytes(n)
    const sealed = await collect(pieces(plain), new SealStream(KEY, KEY_ID))
    t.equal(sealed.length, sealedSize(n), `sealed size of ${n}`)
    t.equal(plainSizeOf(sealed.length), n, `plain size back from ${sealed.length}`)
    t.same(await collect(pieces(sealed), new OpenStream(keys)), plain, `stream round trip of ${n}`)
    t.same(openBuffer(sealed, keys), plain, `buffer open of ${n}`)
    t.same(openBuffer(sealBuffer(plain, KEY, KEY_ID), keys), plain, `sealBuffer round trip of ${n}`)
  }
})

t.test('the same content sealed twice differs (a fresh salt, hence key, per blob)', async (t) => {
  const plain = Buffer.alloc(1000, 7)
  const a = sealBuffer(plain, KEY, KEY_ID)
  const b = sealBuffer(plain, KEY, KEY_ID)
  t.not(a.subarray(HEADER_BYTES).toString('hex'), b.subarray(HEADER_BYTES).toString('hex'))
  t.equal(a.indexOf(plain.subarray(0, 64)), -1, 'no plaintext in the sealed form')
})

t.test('a range decrypts only the chunks it overlaps and returns exactly its bytes', async (t) => {
  const n = 5 * CHUNK_BYTES + 123
  const plain = randomBytes(n)
  const sealed = sealBuffer(plain, KEY, KEY_ID)
  const ranges: [number, number][] = [
    [0, 0],
    [0, n - 1],
    [CHUNK_BYTES - 1, CHUNK_BYTES],
    [2 * CHUNK_BYTES + 5, 2 * CHUNK_BYTES + 9],
    [3 * CHUNK_BYTES, n - 1],
    [n - 1, n - 1],
    [4 * CHUNK_BYTES + 1, 5 * CHUNK_BYTES],
  ]
  for (const [start, end] of ranges) {
    const span = sealedSpan(n, start, end)
    t.ok(span.end - span.start + 1 <= (span.last - span.first + 1) * (CHUNK_BYTES + TAG_BYTES), 'no more than the chunks needed')
    const header = sealed.subarray(0, HEADER_BYTES)
    const part = sealed.subarray(span.start, span.end + 1)
    const opts = { header, first: span.first, finalIndex: span.finalIndex, skip: span.skip, length: span.length }
    t.same(openBuffer(part, keys, opts), plain.subarray(start, end + 1), `buffer range ${start}-${end}`)
    t.same(await collect(pieces(part), new OpenStream(keys, opts)), plain.subarray(start, end + 1), `stream range ${start}-${end}`)
  }
  // An exact multiple of the chunk size: the last full chunk is the final one.
  const m = 2 * CHUNK_BYTES
  const p2 = randomBytes(m)
  const s2 = sealBuffer(p2, KEY, KEY_ID)
  const span = sealedSpan(m, CHUNK_BYTES + 10, m - 1)
  const opts = { header: s2.subarray(0, HEADER_BYTES), first: span.first, finalIndex: span.finalIndex, skip: span.skip, length: span.length }
  t.same(openBuffer(s2.subarray(span.start, span.end + 1), keys, opts), p2.subarray(CHUNK_BYTES + 10))
})

t.test('a flipped byte, truncation, reordering, a chunk from another blob and an unknown key all fail', async (t) => {
  const n = 3 * CHUNK_BYTES + 10
  const plain = randomBytes(n)
  const sealed = sealBuffer(plain, KEY, KEY_ID)
  const fails = (label: string, bytes: Buffer, k = keys) => {
    t.throws(() => openBuffer(bytes, k), BlobAuthenticationError, `${label} (buffer)`)
    return t.rejects(collect(pieces(bytes), new OpenStream(k)), BlobAuthenticationError, `${label} (stream)`)
  }
  for (const at of [0, 5, 8, HEADER_BYTES, HEADER_BYTES + 2 * CHUNK_BYTES, sealed.length - 1]) {
    const flipped = Buffer.from(sealed)
    flipped[at]! ^= 0x01
    await fails(`byte ${at} flipped`, flipped)
  }
  const C = CHUNK_BYTES + TAG_BYTES
  await fails('cut at a chunk boundary', sealed.subarray(0, HEADER_BYTES + 2 * C))
  await fails('cut to the header', sealed.subarray(0, HEADER_BYTES))
  await fails('cut inside the header', sealed.subarray(0, 20))
  await fails('cut inside the last chunk', sealed.subarray(0, sealed.length - 3))
  const swapped = Buffer.concat([
    sealed.subarray(0, HEADER_BYTES),
    sealed.subarray(HEADER_BYTES + C, HEADER_BYTES + 2 * C),
    sealed.subarray(HEADER_BYTES, HEADER_BYTES + C),
    sealed.subarray(HEADER_BYTES + 2 * C),
  ])
  await fails('two chunks swapped', swapped)
  const other = sealBuffer(randomBytes(n), KEY, KEY_ID)
  const mixed = Buffer.concat([
    sealed.subarray(0, HEADER_BYTES + C),
    other.subarray(HEADER_BYTES + C, HEADER_BYTES + 2 * C),
    sealed.subarray(HEADER_BYTES + 2 * C),
  ])
  await fails('a chunk from another blob at the same index', mixed)
  await fails('an appended chunk', Buffer.concat([sealed, other.subarray(HEADER_BYTES, HEADER_BYTES + C)]))
  await fails('no key for its key id', sealed, () => undefined)
  await fails('another key under the same id', sealed, (id) => (id === KEY_ID ? randomBytes(32) : undefined))
  // A range that ends in the middle but whose stream is cut short fails too.
  const span = sealedSpan(n, CHUNK_BYTES, n - 1)
  const opts = { header: sealed.subarray(0, HEADER_BYTES), first: span.first, finalIndex: span.finalIndex, skip: span.skip, length: span.length }
  t.throws(() => openBuffer(sealed.subarray(span.start, span.start + C), keys, opts), BlobAuthenticationError, 'a range cut short')
})

t.test('sealing and opening stream: output flows long before the input ends, and little is held', async (t) => {
  const total = 64 * 1024 * 1024
  let produced = 0
  const source = new Readable({
    read() {
      if (produced >= total) return void this.push(null)
      produced += 1024 * 1024
      this.push(Buffer.alloc(1024 * 1024, produced & 0xff))
    },
  })
  const seal = new SealStream(KEY, KEY_ID)
  const opener = new OpenStream(keys)
  let plainBytes = 0
  let producedAtFirstOutput = -1
  let held = 0
  await pipeline(
    source,
    seal,
    opener,
    new Writable({
      write(chunk: Buffer, _e, cb) {
        if (producedAtFirstOutput < 0) producedAtFirstOutput = produced
        plainBytes += chunk.length
        held = Math.max(held, seal.readableLength + seal.writableLength + opener.readableLength + opener.writableLength)
        cb()
      },
    }),
  )
  t.equal(plainBytes, total)
  t.ok(producedAtFirstOutput <= 4 * 1024 * 1024, `the first plaintext came out after ${producedAtFirstOutput} bytes were produced`)
  t.ok(held <= 4 * 1024 * 1024, `at most ${held} bytes were held in the streams`)
})
