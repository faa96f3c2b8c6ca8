// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { DiskBlobStore } from '../src/blobs/disk-blob-store'
import { EncryptedBlobStore } from '../src/blobs/encrypted-blob-store'
import type { StageGuard } from '../src/blobs/blob-store'
import { BlobKeys } from '../src/lib/encryption-keys'
import { sealedSize } from '../src/lib/chunked-aead'
import { tempDir } from './helper'

const guard = (maxBytes: number): StageGuard => ({ maxBytes, onOverflow: () => new Error('too large') })

function disk(t: Test): DiskBlobStore {
  const dir = tempDir(t)
  fs.mkdirSync(path.join(dir, 'blobs'))
  fs.mkdirSync(path.join(dir, 'tmp'))
  return new DiskBlobStore(path.join(dir, 'blobs'), path.join(dir, 'tmp'))
}

t.test('a disk stage told the caller hashes does not hash, and still stages every byte (#27)', async (t) => {
  const store = disk(t)
  const content = randomBytes(300 * 1024 + 5)
  const staged = await store.stage(Readable.from([content]), { ...guard(1 << 30), unhashed: true })
  t.equal(staged.sha256, '', 'no SHA-256 was computed')
  t.equal(staged.size, content.length)
  t.same(fs.readFileSync(staged.tmpPath), content)
  const hashed = await store.stage(Readable.from([content]), guard(1 << 30))
  t.equal(hashed.sha256, createHash('sha256').update(content).digest('hex'), 'without the option it hashes as before')
})

t.test('the encrypted store hashes the plaintext once: its inner store is told not to hash the sealed bytes (#27)', async (t) => {
  const inner = disk(t)
  const asked: StageGuard[] = []
  const stage = inner.stage.bind(inner)
  inner.stage = (source, g) => {
    asked.push(g)
    return stage(source, g)
  }
  const records = { sizeOf: () => undefined, hashes: () => [], plainRemaining: () => false }
  const store = new EncryptedBlobStore(inner, new BlobKeys(randomBytes(32)), records)
  const content = randomBytes(200 * 1024 + 11)
  const staged = await store.stage(Readable.from([content]), guard(1 << 30))
  t.equal(asked.length, 1)
  t.equal(asked[0]!.unhashed, true)
  t.equal(staged.sha256, createHash('sha256').update(content).digest('hex'), "the plaintext's SHA-256")
  t.equal(staged.size, content.length)
  await store.place(staged)
  const opened = await store.open(staged.sha256)
  t.equal(opened.length, content.length)
  const parts: Buffer[] = []
  for await (const b of opened.body as Readable) parts.push(b as Buffer)
  t.same(Buffer.concat(parts), content, 'placed under its name and read back')
  t.equal(fs.statSync(staged.tmpPath).size, sealedSize(content.length))
})
