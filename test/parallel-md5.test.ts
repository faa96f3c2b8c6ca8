// @suites: sqlite
// The MD5 thread of large S3 bodies (lib/parallel-md5.ts): the bytes waiting for it are bounded for
// all bodies together, not per body, and once idle it gives its memory back (#29).
import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { md5ThreadState, ParallelMd5 } from '../src/lib/parallel-md5'

const MIB = 1024 * 1024

t.test('eight large bodies at once keep at most ~16 MiB waiting for the thread, and hash right', async (t) => {
  const bodies = Array.from({ length: 8 }, () => randomBytes(24 * MIB))
  let peak = 0
  const hashes = await Promise.all(
    bodies.map(async (body) => {
      const md5 = new ParallelMd5()
      for (let off = 0; off < body.length; off += 64 * 1024) {
        const wait = md5.update(body.subarray(off, off + 64 * 1024))
        peak = Math.max(peak, md5ThreadState().totalInFlight)
        if (wait) await wait
        // Let the other bodies have their turn, as sockets would.
        await new Promise((r) => setImmediate(r))
      }
      return md5.digest()
    }),
  )
  t.same(
    hashes,
    bodies.map((b) => createHash('md5').update(b).digest('hex')),
    'every digest is right',
  )
  // Each body may send one batch past the limit before it waits: 16 MiB + 8 x 1 MiB.
  t.ok(peak <= 24 * MIB, `at most 24 MiB in flight (peak ${peak / MIB} MiB); per body, it was 8 x 8 MiB`)
  t.equal(md5ThreadState().totalInFlight, 0, 'nothing counted once done')
})

t.test('a dropped body stops counting, so the others are not held back', async (t) => {
  const md5 = new ParallelMd5()
  const body = randomBytes(12 * MIB)
  for (let off = 0; off < body.length; off += MIB) void md5.update(body.subarray(off, off + MIB))
  t.ok(md5ThreadState().totalInFlight > 0)
  md5.drop()
  t.equal(md5ThreadState().totalInFlight, 0)
})

t.test('idle for ten seconds, the thread stops and its buffers go; the next large body starts it again', async (t) => {
  const body = randomBytes(4 * MIB)
  const hash = async () => {
    const md5 = new ParallelMd5()
    for (let off = 0; off < body.length; off += MIB) await md5.update(body.subarray(off, off + MIB))
    return md5.digest()
  }
  await hash()
  t.ok(md5ThreadState().running, 'running after a large body')
  t.ok(md5ThreadState().pooledBuffers > 0, 'its batch buffers pooled for the next one')
  await new Promise((r) => setTimeout(r, 10_500))
  t.notOk(md5ThreadState().running, 'stopped once idle')
  t.equal(md5ThreadState().pooledBuffers, 0, 'no buffers kept')
  t.equal(await hash(), createHash('md5').update(body).digest('hex'), 'started again for the next body')
  t.ok(md5ThreadState().running)
})
