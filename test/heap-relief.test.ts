// @suites: sqlite
// Once a load is over, one full collection gives back the heap and the dead Buffers' memory (#29).
import t from 'tap'
import { idleCollectionCount, noteStreamed } from '../src/lib/heap-relief'

t.test('after streaming stops for an interval, one full collection frees what the load left', async (t) => {
  const before = idleCollectionCount()
  // A load: chunks streamed and dropped, as request bodies are; their memory is off the V8 heap.
  for (let i = 0; i < 200; i++) {
    const chunk = Buffer.alloc(256 * 1024, i)
    noteStreamed(chunk.length / 64)
  }
  const external = () => process.memoryUsage().external + process.memoryUsage().arrayBuffers
  const loaded = external()
  await new Promise((r) => setTimeout(r, 11_000))
  t.equal(idleCollectionCount(), before + 1, 'one collection once idle')
  t.ok(external() < loaded - 20 * 1024 * 1024, `the dead chunks are freed (${(loaded / 1e6).toFixed(0)} → ${(external() / 1e6).toFixed(0)} MB)`)
  await new Promise((r) => setTimeout(r, 6_000))
  t.equal(idleCollectionCount(), before + 1, 'and no more while nothing streams')
})
