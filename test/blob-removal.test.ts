// @suites: sqlite
// Removing a blob inside a write transaction (#29): a large file leaves its path at once and is
// unlinked in the thread pool, not on the event loop while the transaction holds the write lock
// (a 1 GiB multipart completion releases 128 parts of 8 MiB, ~5 ms of unlink each).
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { BlobNotFoundError } from '../src/blobs/blob-store'
import { DiskBlobStore, UNLINK_IN_PLACE_BYTES } from '../src/blobs/disk-blob-store'
import { blobPath } from '../src/blobs/layout'
import { tempDir } from './helper'

function setup(t: Parameters<typeof tempDir>[0]) {
  const dir = tempDir(t)
  const tmp = path.join(dir, 'tmp')
  fs.mkdirSync(tmp)
  return { store: new DiskBlobStore(path.join(dir, 'blobs'), tmp), tmp, root: path.join(dir, 'blobs') }
}

async function stored(store: DiskBlobStore, bytes: Buffer) {
  const staged = await store.stage(Readable.from([bytes]), { maxBytes: bytes.length, onOverflow: () => new Error('too large') })
  await store.place(staged)
  return staged
}

/** Counts the synchronous unlinks of `file` while `fn` runs. */
function syncUnlinksOf(file: string, fn: () => void): number {
  let count = 0
  const { rmSync, unlinkSync } = fs
  fs.rmSync = (p, ...rest) => {
    if (p === file) count++
    return rmSync(p, ...rest)
  }
  fs.unlinkSync = (p) => {
    if (p === file) count++
    return unlinkSync(p)
  }
  try {
    fn()
  } finally {
    fs.rmSync = rmSync
    fs.unlinkSync = unlinkSync
  }
  return count
}

t.test('a large blob leaves its path at once and is unlinked off the event loop', async (t) => {
  const { store, tmp, root } = setup(t)
  const bytes = randomBytes(UNLINK_IN_PLACE_BYTES + 4096)
  const staged = await stored(store, bytes)
  await store.discard(staged)
  const file = blobPath(root, staged.sha256)
  t.ok(fs.existsSync(file))
  t.equal(
    syncUnlinksOf(file, () => store.removeSync(staged.sha256)),
    0,
    'no synchronous unlink of the blob file',
  )
  t.notOk(fs.existsSync(file), 'gone from its path when removeSync returns')
  await t.rejects(store.open(staged.sha256), BlobNotFoundError)
  t.equal(await store.hash(staged.sha256), undefined)
  await store.removalsDone()
  t.same(fs.readdirSync(tmp), [], 'and its bytes are gone from tmp/ once unlinked')
})

t.test('a small blob is unlinked where it is', async (t) => {
  const { store, tmp, root } = setup(t)
  const staged = await stored(store, randomBytes(64 * 1024))
  await store.discard(staged)
  const file = blobPath(root, staged.sha256)
  t.equal(
    syncUnlinksOf(file, () => store.removeSync(staged.sha256)),
    1,
  )
  t.notOk(fs.existsSync(file))
  t.same(fs.readdirSync(tmp), [], 'nothing handed to the thread pool')
})

t.test('content committed again after a removal is placed anew, whole, and stays', async (t) => {
  const { store, root } = setup(t)
  const bytes = randomBytes(3 * 1024 * 1024)
  const first = await stored(store, bytes)
  await store.discard(first)
  // The same content staged again while the collector removes the blob (the order the write
  // transaction guarantees: removal, then the commit that re-places it).
  const again = await store.stage(Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]), { maxBytes: bytes.length, onOverflow: () => new Error('x') })
  store.removeSync(first.sha256)
  store.ensurePlaced(again)
  await store.discard(again)
  await store.removalsDone()
  const file = blobPath(root, first.sha256)
  t.equal(createHash('sha256').update(fs.readFileSync(file)).digest('hex'), first.sha256, 'the re-placed blob is whole')
  t.equal(await store.hash(first.sha256), first.sha256)
})

t.test('removing a blob that is not there is a no-op', async (t) => {
  const { store, tmp } = setup(t)
  store.removeSync('a'.repeat(64))
  await store.removalsDone()
  t.same(fs.readdirSync(tmp), [])
})
