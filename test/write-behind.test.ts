// @suites: sqlite
// Write-behind: a staging file is flushed while the body still streams, one flush at a time, and
// a failed flush fails the upload even if the final fsync would not report it again.
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import { WriteBehind } from '../src/blobs/write-behind'
import { DiskBlobStore, WRITE_BEHIND_BYTES } from '../src/blobs/disk-blob-store'
import { fileBytes, tempDir } from './helper'

const MIB = 1024 * 1024

function fakeFile() {
  const calls: { release: () => void; fail: (err: Error) => void }[] = []
  return {
    calls,
    datasync: () => new Promise<void>((resolve, reject) => void calls.push({ release: resolve, fail: reject })),
  }
}

t.test('flushes every N bytes written, never two at once', async (t) => {
  const file = fakeFile()
  const behind = new WriteBehind(file, 8 * MIB)
  behind.written(1 * MIB)
  t.equal(file.calls.length, 0, 'nothing to flush yet')
  behind.written(8 * MIB)
  t.equal(file.calls.length, 1, 'the first 8 MiB start flushing')
  behind.written(17 * MIB)
  t.equal(file.calls.length, 1, 'no second flush while one runs')
  file.calls[0]!.release()
  await new Promise((r) => setImmediate(r))
  behind.written(17 * MIB)
  t.equal(file.calls.length, 2, 'the next one starts once it has finished')
  let finished = false
  const finish = behind.finish().then(() => (finished = true))
  await new Promise((r) => setImmediate(r))
  t.notOk(finished, 'finish waits for the flush in progress')
  file.calls[1]!.release()
  await finish
  t.ok(finished)
})

t.test('a failed flush is thrown by finish, and no flush follows it', async (t) => {
  const file = fakeFile()
  const behind = new WriteBehind(file, MIB)
  behind.written(MIB)
  file.calls[0]!.fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }))
  await new Promise((r) => setImmediate(r))
  behind.written(10 * MIB)
  t.equal(file.calls.length, 1)
  await t.rejects(behind.finish(), { code: 'EIO' })
})

t.test('the disk store stages a body several write-behind steps long intact', async (t) => {
  const dir = tempDir(t)
  fs.mkdirSync(path.join(dir, 'tmp'))
  const store = new DiskBlobStore(path.join(dir, 'blobs'), path.join(dir, 'tmp'))
  const bytes = fileBytes('image/png', 2 * WRITE_BEHIND_BYTES + 12345)
  const chunks = Array.from({ length: Math.ceil(bytes.length / (256 * 1024)) }, (_, i) => bytes.subarray(i * 256 * 1024, (i + 1) * 256 * 1024))
  const staged = await store.stage(Readable.from(chunks), { maxBytes: bytes.length, onOverflow: () => new Error('too large') })
  t.equal(staged.size, bytes.length)
  t.equal(staged.sha256, createHash('sha256').update(bytes).digest('hex'))
  t.ok(fs.readFileSync(staged.tmpPath).equals(bytes), 'the staged file holds exactly the body')
  await store.discard(staged)
})
