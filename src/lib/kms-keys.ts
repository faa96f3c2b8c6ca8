import fs from 'node:fs'
import { parseMasterKey } from './encryption-keys'

/**
 * Coffer's own key ring for SSE-KMS (#27), in the manner of Ceph RGW's testing KMS backend
 * (`rgw crypt s3 kms backend = testing` with `rgw crypt s3 kms encryption keys`): named keys of 32
 * bytes held in the server's configuration (COFFER_KMS_KEYS_FILE), never in the data dir. An
 * external KMS (HashiCorp Vault's transit engine) is a next step, not built: the ring's interface
 * (a key by name) is what it would implement.
 */
export class KmsKeyRing {
  constructor(
    private readonly keys: ReadonlyMap<string, Buffer>,
    /** The key an aws:kms request without a key id gets (COFFER_KMS_DEFAULT_KEY; AWS's aws/s3 key). */
    readonly defaultKeyId: string | undefined,
  ) {}

  /** The 32-byte key of that name, or undefined when the ring has none (the request is refused). */
  key(id: string): Buffer | undefined {
    return this.keys.get(id)
  }

  get size(): number {
    return this.keys.size
  }
}

/** A key id as AWS takes one: an id, an alias or an ARN; here printable ASCII without blanks, at most 256 characters. */
const KEY_ID = /^[\x21-\x7e]{1,256}$/

/**
 * The ring in a file's text: a JSON object `{"name": "key", …}`, or lines `name=key` (blank lines
 * and `#` comments skipped), each key 64 hex digits or the base64 of 32 bytes. Throws a message
 * naming the line (never the key).
 */
export function parseKmsKeys(text: string): Map<string, Buffer> {
  const entries: [string, string][] = []
  const trimmed = text.trim()
  if (trimmed.startsWith('{')) {
    let doc: unknown
    try {
      doc = JSON.parse(trimmed)
    } catch {
      throw new Error('is not valid JSON')
    }
    for (const [name, value] of Object.entries(doc as Record<string, unknown>)) {
      if (typeof value !== 'string') throw new Error(`key ${JSON.stringify(name)} is not a string`)
      entries.push([name, value])
    }
  } else {
    text.split(/\r?\n/).forEach((line, i) => {
      const l = line.trim()
      if (l === '' || l.startsWith('#')) return
      const eq = l.indexOf('=')
      if (eq <= 0) throw new Error(`line ${i + 1} is not name=key`)
      entries.push([l.slice(0, eq).trim(), l.slice(eq + 1).trim()])
    })
  }
  const out = new Map<string, Buffer>()
  for (const [name, value] of entries) {
    if (!KEY_ID.test(name)) throw new Error(`key name ${JSON.stringify(name.slice(0, 40))} must be 1-256 printable characters without blanks`)
    if (out.has(name)) throw new Error(`key ${JSON.stringify(name)} is given twice`)
    const key = parseMasterKey(value)
    if (!key) throw new Error(`key ${JSON.stringify(name)} must be 64 hex digits or the base64 of 32 bytes`)
    out.set(name, key)
  }
  return out
}

/** The ring the settings name; an empty one when COFFER_KMS_KEYS_FILE is unset. Throws a message naming the setting. */
export function loadKmsKeys(settings: { kmsKeysFile?: string | undefined; kmsDefaultKey?: string | undefined }): KmsKeyRing {
  let keys = new Map<string, Buffer>()
  if (settings.kmsKeysFile !== undefined) {
    let text: string
    try {
      text = fs.readFileSync(settings.kmsKeysFile, 'utf8')
    } catch (err) {
      throw new Error(`COFFER_KMS_KEYS_FILE ${settings.kmsKeysFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`, { cause: err })
    }
    try {
      keys = parseKmsKeys(text)
    } catch (err) {
      throw new Error(`COFFER_KMS_KEYS_FILE ${settings.kmsKeysFile}: ${(err as Error).message}`, { cause: err })
    }
  }
  const def = settings.kmsDefaultKey
  if (def !== undefined && !keys.has(def)) throw new Error(`COFFER_KMS_DEFAULT_KEY ${JSON.stringify(def)} is not a key of COFFER_KMS_KEYS_FILE`)
  return new KmsKeyRing(keys, def)
}
