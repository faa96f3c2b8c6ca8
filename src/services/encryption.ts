import { randomBytes } from 'node:crypto'
import type { DB } from '../db/database'
import { BlobsRepo } from '../db/repos/blobs'
import { EncryptionRepo } from '../db/repos/encryption'
import { EncryptedBlobStore } from '../blobs/encrypted-blob-store'
import type { BlobStore } from '../blobs/blob-store'
import { BlobKeys, unwrapKey, wrapKey } from '../lib/encryption-keys'

/** Encryption cannot start as configured: a missing or wrong master key (refused loudly at start). */
export class EncryptionKeyError extends Error {
  override name = 'EncryptionKeyError'
}

/**
 * The data dir's encryption at start (#27). A data dir with a wrapped key needs the master key
 * that opens it: without one, or with another, nothing starts (serving it would fail every read,
 * or worse, write content the real key cannot open). The first start with a master key creates
 * the data-dir key; content stored before then stays readable in the clear until
 * `coffer encrypt-blobs` seals it. Undefined: the data dir is not encrypted.
 */
export function openEncryption(db: DB, master: Buffer | undefined, now: number): { keys: BlobKeys; repo: EncryptionRepo } | undefined {
  const repo = new EncryptionRepo(db)
  const row = repo.get()
  if (!row) {
    if (!master) return undefined
    const dataDirKey = randomBytes(32)
    const keys = new BlobKeys(dataDirKey)
    db.transaction(() => {
      if (repo.get()) throw new EncryptionKeyError('another process turned encryption on at the same time; start again')
      repo.insert(wrapKey(master, dataDirKey), keys.keyId, new BlobsRepo(db).stats().count > 0, now)
    }).immediate()
    return { keys, repo }
  }
  if (!master) {
    throw new EncryptionKeyError('this data dir is encrypted: set COFFER_ENCRYPTION_KEY_FILE (or COFFER_ENCRYPTION_KEY) to its master key')
  }
  const dataDirKey = unwrapKey(master, row.wrappedKey)
  if (!dataDirKey)
    throw new EncryptionKeyError(
      "the configured master key (COFFER_ENCRYPTION_KEY_FILE or COFFER_ENCRYPTION_KEY) is not this data dir's: it does not open the data-dir key",
    )
  return { keys: new BlobKeys(dataDirKey), repo }
}

/** `store` sealing everything it stores under `keys`, with what it needs of the database. */
export function encryptedStore(db: DB, store: BlobStore, keys: BlobKeys, repo: EncryptionRepo): EncryptedBlobStore {
  const blobs = new BlobsRepo(db)
  let plainRemaining = repo.get()?.plainRemaining ?? false
  return new EncryptedBlobStore(store, keys, {
    sizeOf: (sha) => blobs.sizeOf(sha),
    *hashes() {
      for (let after = ''; ;) {
        const shas = blobs.shasAfter(after, 1000)
        yield* shas
        if (shas.length < 1000) return
        after = shas.at(-1)!
      }
    },
    // Read again only until it is false: once sealed, never in the clear again.
    plainRemaining: () => plainRemaining && (plainRemaining = repo.get()?.plainRemaining ?? false),
  })
}

/**
 * Master key rotation (`coffer rotate-key`): the data-dir key wrapped under the new master key,
 * in place of the old wrapping. Blobs are untouched: their keys derive from the data-dir key.
 */
export function rotateMasterKey(db: DB, oldMaster: Buffer, newMaster: Buffer): void {
  const repo = new EncryptionRepo(db)
  db.transaction(() => {
    const row = repo.get()
    if (!row) throw new EncryptionKeyError('this data dir is not encrypted: there is no key to rotate')
    const dataDirKey = unwrapKey(oldMaster, row.wrappedKey)
    if (!dataDirKey) throw new EncryptionKeyError("the current master key is not this data dir's")
    repo.rewrap(wrapKey(newMaster, dataDirKey))
  }).immediate()
}
