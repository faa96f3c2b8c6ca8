import fs from 'node:fs'
import { parseMasterKey } from './encryption-keys'

/** One key of the ring: its 32 bytes, and the tenants that may seal objects under it (absent: every tenant). */
export interface KmsEntry {
  readonly key: Buffer
  readonly tenants?: ReadonlySet<string>
}

/**
 * Coffer's own key ring for SSE-KMS (#27), in the manner of Ceph RGW's testing KMS backend
 * (`rgw crypt s3 kms backend = testing` with `rgw crypt s3 kms encryption keys`): named keys of 32
 * bytes held in the server's configuration (COFFER_KMS_KEYS_FILE), never in the data dir. An entry
 * may name the tenants (by id) allowed to seal new objects under it, as an AWS key policy names
 * the accounts that may use a key; an entry without a list stays open to every tenant, as rings
 * written before the lists existed are. A key a tenant may not use is, to that tenant, exactly a
 * key the ring does not hold: same answer, so that names do not leak between tenants. An external
 * KMS (HashiCorp Vault's transit engine) is a next step, not built: the ring's interface (a key by
 * name) is what it would implement.
 */
export class KmsKeyRing {
  constructor(
    private readonly keys: ReadonlyMap<string, KmsEntry>,
    /** The key an aws:kms request without a key id gets (COFFER_KMS_DEFAULT_KEY; AWS's aws/s3 key). */
    readonly defaultKeyId: string | undefined,
  ) {}

  /**
   * The 32-byte key of that name for sealing a new object (or setting a bucket default) of
   * `tenantId`; undefined when the ring has no such key or the tenant may not use it (both refused alike).
   */
  sealKey(id: string, tenantId: string): Buffer | undefined {
    const entry = this.keys.get(id)
    if (!entry || (entry.tenants !== undefined && !entry.tenants.has(tenantId))) return undefined
    return entry.key
  }

  /** The default key's name for `tenantId`: undefined when there is none, or that tenant may not use it. */
  defaultKeyFor(tenantId: string): string | undefined {
    const id = this.defaultKeyId
    return id !== undefined && this.sealKey(id, tenantId) ? id : undefined
  }

  /**
   * The 32-byte key that opens an object stored under that name, or undefined when the ring no
   * longer holds it. Not limited by the tenant list: the list governs which key a tenant may
   * choose for new objects; an object already sealed opens under the key it records.
   */
  openKey(id: string): Buffer | undefined {
    return this.keys.get(id)?.key
  }

  get size(): number {
    return this.keys.size
  }
}

/** A key id as AWS takes one: an id, an alias or an ARN; here printable ASCII without blanks, at most 256 characters. */
const KEY_ID = /^[\x21-\x7e]{1,256}$/

/** A tenant id in a ring entry's list (tenant ids are printable ASCII without blanks or commas). */
const TENANT_ID = /^[\x21-\x2b\x2d-\x7e]{1,128}$/

/**
 * The ring in a file's text: a JSON object `{"name": "key", …}` or `{"name": {"key": "key",
 * "tenants": ["tenant id", …]}, …}`, or lines `name=key` or `name=key tenants=id,id` (blank lines
 * and `#` comments skipped), each key 64 hex digits or the base64 of 32 bytes. Throws a message
 * naming the line (never the key).
 */
export function parseKmsKeys(text: string): Map<string, KmsEntry> {
  const entries: { name: string; value: string; tenants?: string[]; where: string }[] = []
  const trimmed = text.trim()
  if (trimmed.startsWith('{')) {
    let doc: unknown
    try {
      doc = JSON.parse(trimmed)
    } catch {
      throw new Error('is not valid JSON')
    }
    for (const [name, value] of Object.entries(doc as Record<string, unknown>)) {
      const where = `key ${JSON.stringify(name)}`
      if (typeof value === 'string') {
        entries.push({ name, value, where })
        continue
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${where} is not a string nor an object`)
      const { key, tenants, ...rest } = value as Record<string, unknown>
      if (Object.keys(rest).length > 0) throw new Error(`${where} has an unknown field ${JSON.stringify(Object.keys(rest)[0])} (key, tenants)`)
      if (typeof key !== 'string') throw new Error(`${where} has no key string`)
      if (tenants !== undefined && (!Array.isArray(tenants) || tenants.some((id) => typeof id !== 'string'))) {
        throw new Error(`${where}: tenants must be a list of tenant ids`)
      }
      entries.push({ name, value: key, ...(tenants !== undefined ? { tenants: tenants as string[] } : {}), where })
    }
  } else {
    text.split(/\r?\n/).forEach((line, i) => {
      const l = line.trim()
      if (l === '' || l.startsWith('#')) return
      const eq = l.indexOf('=')
      if (eq <= 0) throw new Error(`line ${i + 1} is not name=key`)
      const [value = '', ...options] = l
        .slice(eq + 1)
        .trim()
        .split(/\s+/)
      let tenants: string[] | undefined
      for (const o of options) {
        if (!o.startsWith('tenants=') || tenants !== undefined) throw new Error(`line ${i + 1}: after the key only tenants=id,id may follow`)
        tenants = o.slice('tenants='.length).split(',')
      }
      entries.push({ name: l.slice(0, eq).trim(), value, ...(tenants !== undefined ? { tenants } : {}), where: `line ${i + 1}` })
    })
  }
  const out = new Map<string, KmsEntry>()
  for (const { name, value, tenants, where } of entries) {
    if (!KEY_ID.test(name)) throw new Error(`key name ${JSON.stringify(name.slice(0, 40))} must be 1-256 printable characters without blanks`)
    if (out.has(name)) throw new Error(`key ${JSON.stringify(name)} is given twice`)
    const key = parseMasterKey(value)
    if (!key) throw new Error(`key ${JSON.stringify(name)} must be 64 hex digits or the base64 of 32 bytes`)
    if (tenants !== undefined) {
      // An empty list would read as "nobody" to one operator and "everybody" to another: refused.
      if (tenants.length === 0 || tenants.some((id) => !TENANT_ID.test(id))) {
        throw new Error(`${where}: the tenants of key ${JSON.stringify(name)} must be one or more tenant ids (printable, no blanks nor commas)`)
      }
    }
    out.set(name, { key, ...(tenants !== undefined ? { tenants: new Set(tenants) } : {}) })
  }
  return out
}

/** The ring the settings name; an empty one when COFFER_KMS_KEYS_FILE is unset. Throws a message naming the setting. */
export function loadKmsKeys(settings: { kmsKeysFile?: string | undefined; kmsDefaultKey?: string | undefined }): KmsKeyRing {
  let keys = new Map<string, KmsEntry>()
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
