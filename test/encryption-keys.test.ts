// @suites: sqlite
import t from 'tap'
import { inspect } from 'node:util'
import { createHmac, hkdfSync, randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { SealStream, openBuffer, sealBuffer } from '../src/lib/chunked-aead'
import { BlobKeys } from '../src/lib/encryption-keys'

/** The keys BlobKeys derives, as bytes, the way they were derived before they were KeyObjects. */
function derived(dataDirKey: Buffer, info: string, bytes = 32): Buffer {
  return Buffer.from(hkdfSync('sha256', dataDirKey, Buffer.alloc(0), info, bytes))
}

t.test('the derived keys do not show when the keys are inspected or serialised (#27)', async (t) => {
  const dataDirKey = randomBytes(32)
  const keys = new BlobKeys(dataDirKey)
  const secrets = [derived(dataDirKey, 'coffer blob data key v1'), derived(dataDirKey, 'coffer blob name key v1')]
  const shown = [inspect(keys, { depth: Infinity, showHidden: true }), JSON.stringify(keys)]
  for (const text of shown) {
    for (const key of secrets) {
      // A Buffer is shown as "<Buffer 1f 2e …>" and serialised as {"type":"Buffer","data":[31,46,…]}.
      const spaced = [...key.subarray(0, 8)].map((b) => b.toString(16).padStart(2, '0')).join(' ')
      const listed = [...key.subarray(0, 8)].join(',')
      t.notOk(text.includes(spaced) || text.includes(listed) || text.includes(key.toString('hex')), `no key bytes in ${text.slice(0, 60)}…`)
    }
  }
})

t.test('the keys as KeyObjects seal, open and name exactly as the same keys as bytes did (stored blobs stay readable)', async (t) => {
  const dataDirKey = randomBytes(32)
  const keys = new BlobKeys(dataDirKey)
  const dataKey = derived(dataDirKey, 'coffer blob data key v1')
  const keyId = derived(dataDirKey, 'coffer blob key id v1', 4).readUInt32BE(0)
  t.equal(keys.keyId, keyId)
  const sha = 'ab'.repeat(32)
  t.equal(keys.nameOf(sha), createHmac('sha256', derived(dataDirKey, 'coffer blob name key v1')).update(sha).digest('hex'), 'the same stored name')

  const plain = randomBytes(200 * 1024 + 7)
  // Sealed with the bytes (as before), opened with the KeyObject (as now), and the other way round.
  t.same(openBuffer(sealBuffer(plain, dataKey, keyId), keys.dataKeys), plain)
  const parts: Buffer[] = []
  for await (const b of Readable.from([plain]).pipe(new SealStream(keys.dataKey, keys.keyId))) parts.push(b as Buffer)
  t.same(
    openBuffer(Buffer.concat(parts), (id) => (id === keyId ? dataKey : undefined)),
    plain,
  )
  // Another data-dir key's KeyObject does not open it.
  t.throws(() => openBuffer(sealBuffer(plain, dataKey, keyId), () => new BlobKeys(randomBytes(32)).dataKey))
})
