import fs from 'node:fs'
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, randomBytes, type KeyObject } from 'node:crypto'

/**
 * Keys of an encrypted data dir (#27), as envelope encryption: the master key the operator holds
 * (COFFER_ENCRYPTION_KEY_FILE or COFFER_ENCRYPTION_KEY, never in the data dir) wraps one random
 * data-dir key, stored wrapped in the database (table encryption). Every key Coffer uses derives
 * from the data-dir key with HKDF-SHA256 (RFC 5869), one `info` per purpose. Rotating the master
 * key re-wraps the data-dir key (`coffer rotate-key`): no blob is rewritten.
 */
export const MASTER_KEY_BYTES = 32

/** The master key a setting names: 64 hex digits or the base64 of 32 bytes (surrounding blanks ignored). */
export function parseMasterKey(text: string): Buffer | undefined {
  const s = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(s)) return Buffer.from(s, 'hex')
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(s)) {
    const b = Buffer.from(s, 'base64')
    if (b.length === MASTER_KEY_BYTES) return b
  }
  return undefined
}

/** The master key from the settings, or undefined when encryption is not configured. Throws a message naming the setting. */
export function loadMasterKey(settings: { encryptionKeyFile?: string | undefined; encryptionKey?: string | undefined }): Buffer | undefined {
  if (settings.encryptionKey !== undefined) {
    const k = parseMasterKey(settings.encryptionKey)
    if (!k) throw new Error('COFFER_ENCRYPTION_KEY must be 64 hex digits or the base64 of 32 bytes')
    return k
  }
  if (settings.encryptionKeyFile === undefined) return undefined
  let text: string
  try {
    text = fs.readFileSync(settings.encryptionKeyFile, 'utf8')
  } catch (err) {
    throw new Error(`COFFER_ENCRYPTION_KEY_FILE ${settings.encryptionKeyFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`, {
      cause: err,
    })
  }
  const k = parseMasterKey(text)
  if (!k) throw new Error(`COFFER_ENCRYPTION_KEY_FILE ${settings.encryptionKeyFile} must hold 64 hex digits or the base64 of 32 bytes`)
  return k
}

const WRAP_AAD = Buffer.from('coffer data-dir key v1')

function kek(master: Buffer, salt: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', master, salt, 'coffer key-encryption key v1', 32))
}

/**
 * What a wrapping is of, authenticated with it: the data-dir key's (the default), or the SSE-S3
 * key's, so that neither wrapping can be passed off as the other.
 */
export const SSE_S3_WRAP_AAD = Buffer.from('coffer sse-s3 key v1')

/** salt (16) | nonce (12) | AES-256-GCM(data-dir key) (32) | tag (16): the GCM tag is the key check value. */
export function wrapKey(master: Buffer, dataDirKey: Buffer, aad: Buffer = WRAP_AAD): Buffer {
  const salt = randomBytes(16)
  const iv = randomBytes(12)
  const c = createCipheriv('aes-256-gcm', kek(master, salt), iv)
  c.setAAD(aad)
  const body = Buffer.concat([c.update(dataDirKey), c.final()])
  return Buffer.concat([salt, iv, body, c.getAuthTag()])
}

/** The data-dir key, or undefined when `master` is not the key it was wrapped with. */
export function unwrapKey(master: Buffer, wrapped: Buffer, aad: Buffer = WRAP_AAD): Buffer | undefined {
  if (wrapped.length !== 16 + 12 + 32 + 16) return undefined
  const d = createDecipheriv('aes-256-gcm', kek(master, wrapped.subarray(0, 16)), wrapped.subarray(16, 28))
  d.setAAD(aad)
  d.setAuthTag(wrapped.subarray(60))
  try {
    return Buffer.concat([d.update(wrapped.subarray(28, 60)), d.final()])
  } catch {
    return undefined
  }
}

/**
 * The keys derived from a data-dir key. They are KeyObjects, made once: Node 24 makes one from a
 * Buffer key on every createHmac and hkdfSync (~16 µs a call on the bench VM, three times the HMAC
 * of a blob name), which every read and write of a blob paid (#27). A KeyObject also shows no key
 * bytes when inspected or logged, where a Buffer shows them all.
 */
export class BlobKeys {
  /** Seals blob content (lib/chunked-aead.ts). */
  readonly dataKey: KeyObject
  /** Names the key in every blob header: a blob sealed under another data-dir key is told apart. */
  readonly keyId: number
  private readonly nameKey: KeyObject

  constructor(dataDirKey: Buffer) {
    const derive = (info: string, bytes: number) => new Uint8Array(hkdfSync('sha256', dataDirKey, Buffer.alloc(0), info, bytes))
    this.dataKey = createSecretKey(derive('coffer blob data key v1', 32))
    this.nameKey = createSecretKey(derive('coffer blob name key v1', 32))
    this.keyId = Buffer.from(derive('coffer blob key id v1', 4)).readUInt32BE(0)
  }

  /**
   * The name content is stored under: HMAC-SHA256 of its SHA-256 under the name key. Equal content
   * still has one name (dedup, content addressing), but whoever reads the store cannot test it for
   * a file they know (its plain SHA-256 is not there).
   */
  nameOf(sha256: string): string {
    return createHmac('sha256', this.nameKey).update(sha256).digest('hex')
  }

  /** The data key a header's key id names (only this data dir's). */
  readonly dataKeys = (keyId: number): KeyObject | undefined => (keyId === this.keyId ? this.dataKey : undefined)
}
