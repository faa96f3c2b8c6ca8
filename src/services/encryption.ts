import { randomBytes } from 'node:crypto'
import type { DB } from '../db/database'
import { constraintViolated, engineOf, type Engine } from '../db/engine'
import { BlobsRepo } from '../db/repos/blobs'
import { EncryptionRepo } from '../db/repos/encryption'
import { EncryptedBlobStore } from '../blobs/encrypted-blob-store'
import type { BlobStore } from '../blobs/blob-store'
import { BlobKeys, SSE_S3_WRAP_AAD, unwrapKey, wrapKey } from '../lib/encryption-keys'

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
export function openEncryption(db: DB | Engine, master: Buffer | undefined, now: number): { keys: BlobKeys; repo: EncryptionRepo } | undefined {
  const engine = engineOf(db)
  const repo = new EncryptionRepo(engine)
  const row = repo.get()
  if (!row) {
    if (!master) return undefined
    const dataDirKey = randomBytes(32)
    const keys = new BlobKeys(dataDirKey)
    const raced = () => new EncryptionKeyError('another process turned encryption on at the same time; start again')
    try {
      engine.transaction(() => {
        if (repo.get()) throw raced()
        repo.insert(wrapKey(master, dataDirKey), keys.keyId, new BlobsRepo(engine).stats().count > 0, now)
        // An SSE-S3 key made while there was no master key is wrapped by it from now on.
        wrapSseS3Key(repo, master)
      })
    } catch (err) {
      // Another node's row, committed after this transaction's check (PostgreSQL, #30): the same refusal.
      throw constraintViolated(err) === 'unique' ? raced() : err
    }
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
  // Kept as it is by a process that ran without the key at the same time (refused since): wrapped now.
  if (repo.sseS3Key()?.wrapped === false) engine.transaction(() => wrapSseS3Key(repo, master))
  return { keys: new BlobKeys(dataDirKey), repo }
}

/** Wraps the SSE-S3 key under `master` if it is kept as it is (inside the caller's transaction). */
function wrapSseS3Key(repo: EncryptionRepo, master: Buffer): void {
  const row = repo.sseS3Key()
  if (row && !row.wrapped) repo.wrapSseS3Key(wrapKey(master, row.key, SSE_S3_WRAP_AAD))
}

/**
 * Coffer's own SSE-S3 key (#27), as Amazon holds the key of SSE-S3: without a master key, an
 * object asking for AES256 (the request, or its bucket's default) is sealed on its own under a key
 * derived from it (s3/sse.ts), since the data dir does not seal it. Made at random on first need
 * and kept in the database (encryption row 2): it protects the blob store (disk or S3-compatible)
 * against whoever has the blobs and not the database, not a data dir taken whole (the master key
 * outside it is what does). With a master key the data dir seals every object already, so new
 * SSE-S3 objects are not sealed again; the key (wrapped by then) still opens those sealed before.
 */
export class SseS3Keys {
  private cached: Buffer | undefined
  private readonly engine: Engine

  constructor(
    db: DB | Engine,
    private readonly master: Buffer | undefined,
    private readonly now: () => number,
  ) {
    this.engine = engineOf(db)
  }

  /** Whether an object asking for SSE-S3 is sealed on its own: there is no master key to seal the data dir. */
  get perObject(): boolean {
    return this.master === undefined
  }

  /**
   * The key; made (and kept) on the first write that needs it (`make`) when there is no master key.
   * Throws when it cannot be had (a read never makes one: what it would open was sealed under another).
   */
  key(make = false): Buffer {
    if (this.cached) return this.cached
    const repo = new EncryptionRepo(this.engine)
    let row = repo.sseS3Key()
    if (!row && !this.master && make) {
      // Two processes making one at once keep the first one made, which both then read.
      const key = randomBytes(32)
      this.engine.transaction(() => repo.insertSseS3Key(key, this.now()))
      row = repo.sseS3Key()
    }
    if (!row) throw new EncryptionKeyError('an object is sealed under the SSE-S3 key, and this data dir has none')
    if (!row.wrapped) return (this.cached = row.key)
    const key = this.master ? unwrapKey(this.master, row.key, SSE_S3_WRAP_AAD) : undefined
    if (!key) throw new EncryptionKeyError('the SSE-S3 key is wrapped under a master key the server does not have')
    return (this.cached = key)
  }
}

/** `store` sealing everything it stores under `keys`, with what it needs of the database. */
export function encryptedStore(db: DB | Engine, store: BlobStore, keys: BlobKeys, repo: EncryptionRepo): EncryptedBlobStore {
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
    createdSince: (since) => blobs.createdSince(since),
    // Read again only until it is false: once sealed, never in the clear again.
    plainRemaining: () => plainRemaining && (plainRemaining = repo.get()?.plainRemaining ?? false),
  })
}

/**
 * Master key rotation (`coffer rotate-key`): the data-dir key (and the SSE-S3 key, if there is
 * one) wrapped under the new master key, in place of the old wrapping. Blobs are untouched: their
 * keys derive from those keys.
 */
export function rotateMasterKey(db: DB | Engine, oldMaster: Buffer, newMaster: Buffer): void {
  const repo = new EncryptionRepo(db)
  engineOf(db).transaction(() => {
    const row = repo.get()
    if (!row) throw new EncryptionKeyError('this data dir is not encrypted: there is no key to rotate')
    const dataDirKey = unwrapKey(oldMaster, row.wrappedKey)
    if (!dataDirKey) throw new EncryptionKeyError("the current master key is not this data dir's")
    repo.rewrap(wrapKey(newMaster, dataDirKey))
    const sseS3 = repo.sseS3Key()
    if (sseS3?.wrapped) {
      const key = unwrapKey(oldMaster, sseS3.key, SSE_S3_WRAP_AAD)
      if (!key) throw new EncryptionKeyError("the SSE-S3 key is not wrapped under this data dir's master key")
      repo.wrapSseS3Key(wrapKey(newMaster, key, SSE_S3_WRAP_AAD))
    } else if (sseS3) repo.wrapSseS3Key(wrapKey(newMaster, sseS3.key, SSE_S3_WRAP_AAD))
  })
}
