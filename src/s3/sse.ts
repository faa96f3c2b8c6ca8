import { createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { KmsKeyRing } from '../lib/kms-keys'
import type { StoredSse } from '../db/repos/objects'
import { S3Error } from './errors'
import type { ObjectKey } from './sealed-objects'

/**
 * SSE-C, SSE-KMS and SSE-S3 without a master key (#27): which key an object is sealed under, from
 * a request's headers, and what is stored to find it again. The customer's key is never stored
 * nor logged: what is stored is a salted HMAC of it, which verifies a key a read brings and
 * reveals nothing of it. An SSE-KMS object stores its key's name in Coffer's key ring
 * (lib/kms-keys.ts); an SSE-S3 one is sealed under Coffer's own SSE-S3 key (services/encryption.ts).
 */
export type { StoredSse }

/** Coffer's own SSE-S3 key (services/encryption.ts SseS3Keys). */
export interface SseS3KeySource {
  /** Whether an object asking for SSE-S3 is sealed on its own (no master key); else the data dir seals it. */
  readonly perObject: boolean
  /** The key; made on the first write that needs it (`make`) without a master key. */
  key(make?: boolean): Buffer
}

/** The server's keys an object can be sealed under: the KMS key ring and the SSE-S3 key. */
export interface ServerKeys {
  kms: KmsKeyRing
  sseS3: SseS3KeySource
}

/** A key to seal with or open with, and what the object stores of it. */
export interface SseKey extends ObjectKey {
  stored: StoredSse
  /** SSE-C: the base64 MD5 of the customer's key, which answers echo (x-amz-server-side-encryption-customer-key-MD5). */
  keyMd5?: string
}

export const CUSTOMER = 'x-amz-server-side-encryption-customer-'
export const COPY_SOURCE_CUSTOMER = 'x-amz-copy-source-server-side-encryption-customer-'

/** Header ids written in each sealed segment: a C object opened as KMS (or the reverse) fails authentication. */
const C_KEY_ID = 0x53534543
const KMS_KEY_ID = 0x4b4d5331
const S3_KEY_ID = 0x53534533

const one = (request: Pick<FastifyRequest, 'headers'>, name: string): string | undefined => {
  const v = request.headers[name]
  return Array.isArray(v) ? v.join(',') : v
}

/** Whether a request carries any of the customer key's headers under `prefix`. */
export function hasCustomerHeaders(request: Pick<FastifyRequest, 'headers'>, prefix = CUSTOMER): boolean {
  return Object.keys(request.headers).some((h) => h.startsWith(prefix))
}

/**
 * The customer's key of a request (`prefix`: the object's or the copy source's headers), checked
 * as AWS checks it: the algorithm AES256, a key of 256 bits in base64, its MD5; any of the three
 * without the others is 400. Undefined when none is sent.
 */
export function customerKey(request: Pick<FastifyRequest, 'headers'>, prefix = CUSTOMER): { key: Buffer; md5: string } | undefined {
  const algorithm = one(request, `${prefix}algorithm`)
  const key = one(request, `${prefix}key`)
  const md5 = one(request, `${prefix}key-md5`)
  if (algorithm === undefined && key === undefined && md5 === undefined) return undefined
  if (algorithm === undefined) {
    throw new S3Error('InvalidArgument', 'Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm.')
  }
  if (algorithm !== 'AES256')
    throw new S3Error('InvalidEncryptionAlgorithmError', 'The Encryption request you specified is not valid. Supported value: AES256.')
  if (key === undefined) {
    throw new S3Error('InvalidArgument', 'Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key.')
  }
  const raw = /^[A-Za-z0-9+/]{43}=$/.test(key.trim()) ? Buffer.from(key.trim(), 'base64') : Buffer.alloc(0)
  if (raw.length !== 32) throw new S3Error('InvalidArgument', 'The secret key was invalid for the specified algorithm.')
  const actual = createHash('md5').update(raw).digest('base64')
  if (md5 === undefined) {
    throw new S3Error(
      'InvalidArgument',
      'Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key.',
    )
  }
  if (md5.trim() !== actual) throw new S3Error('InvalidArgument', 'The calculated MD5 hash of the key did not match the hash that was provided.')
  return { key: raw, md5: actual }
}

/** The sealing key of a customer's key, and (new) what the object stores to verify it later. */
function customerSseKey(c: { key: Buffer; md5: string }, verifier: string): SseKey {
  return {
    dataKey: Buffer.from(hkdfSync('sha256', c.key, Buffer.alloc(0), 'coffer sse-c object key v1', 32)),
    keyId: C_KEY_ID,
    stored: { type: 'C', verifier },
    keyMd5: c.md5,
  }
}

/** salt (16) | HMAC-SHA256(salt, key): verifies a key without being one, nor its MD5 (which AWS echoes and would identify it). */
function newVerifier(key: Buffer): string {
  const salt = randomBytes(16)
  return Buffer.concat([salt, createHmac('sha256', salt).update(key).digest()]).toString('base64')
}

function verifies(verifier: string, key: Buffer): boolean {
  const v = Buffer.from(verifier, 'base64')
  if (v.length !== 48) return false
  return timingSafeEqual(v.subarray(16), createHmac('sha256', v.subarray(0, 16)).update(key).digest())
}

/**
 * The sealing key of the ring's key `keyId`: `tenantId` chooses it for a new object (undefined when
 * the ring has no such key or that tenant may not use it, alike); without a tenant it opens an
 * object stored under it (undefined when the ring no longer holds it). Each front refuses in its own shape.
 */
export function kmsKey(ring: KmsKeyRing, keyId: string, tenantId?: string): SseKey | undefined {
  const key = tenantId === undefined ? ring.openKey(keyId) : ring.sealKey(keyId, tenantId)
  if (!key) return undefined
  return {
    dataKey: Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'coffer sse-kms object key v1', 32)),
    keyId: KMS_KEY_ID,
    stored: { type: 'KMS', keyId },
  }
}

/** The sealing key of Coffer's SSE-S3 key (`make`: for a write, which makes the key if there is none yet). */
function sseS3Key(source: SseS3KeySource, make = false): SseKey {
  return {
    dataKey: Buffer.from(hkdfSync('sha256', source.key(make), Buffer.alloc(0), 'coffer sse-s3 object key v1', 32)),
    keyId: S3_KEY_ID,
    stored: { type: 'S3' },
  }
}

/** The key an SSE-S3 write seals its object under: Coffer's SSE-S3 key without a master key; undefined with one (the data dir seals it). */
function sseS3WriteKey(source: SseS3KeySource): SseKey | undefined {
  return source.perObject ? sseS3Key(source, true) : undefined
}

/**
 * The key that opens an object stored with `stored` sealed under a key the server holds (SSE-KMS,
 * SSE-S3); undefined when the ring no longer holds its KMS key (each front refuses in its own
 * shape). An SSE-C object's key is only in the request that brings it (readKey).
 */
export function serverKey(keys: ServerKeys, stored: Exclude<StoredSse, { type: 'C' }>): SseKey | undefined {
  const key = stored.type === 'KMS' ? kmsKey(keys.kms, stored.keyId) : sseS3Key(keys.sseS3)
  return key && { ...key, stored }
}

/** The 400 of a key id that is unknown, or that the tenant may not use: one answer for both, so names do not leak. */
export const unknownKmsKey = (keyId: string): S3Error =>
  new S3Error('InvalidArgument', `Invalid keyId ${keyId}: no such key in Coffer's key ring (COFFER_KMS_KEYS_FILE)`)

function kmsSseKey(ring: KmsKeyRing, keyId: string, tenantId?: string): SseKey {
  const key = kmsKey(ring, keyId, tenantId)
  if (!key) throw unknownKmsKey(keyId)
  return key
}

/**
 * A bucket's (workspace's) default encryption, as PutBucketEncryption sets it (#27): here, beside
 * writeKey which applies it, so that the service storing it (services/bucket-encryption.ts)
 * imports this module and not the other way round.
 */
export type BucketEncryption =
  /** SSE-S3: Coffer's own keys (the encrypted data dir, else the SSE-S3 key). */
  | { algorithm: 'AES256' }
  /** SSE-KMS with a key of Coffer's key ring; `keyId` absent: the ring's default key at each write. */
  | { algorithm: 'aws:kms'; keyId?: string }

/**
 * The key a write seals its object under: the request's (customer key, aws:kms with its key id or
 * the ring's default, AES256), else the bucket's default encryption; a KMS key only when the
 * bucket owner's tenant `tenantId` may use it; undefined for none of those
 * (plain), and for SSE-S3 when there is a master key (the data dir's own sealing is SSE-S3 then).
 * checkSseHeader (ops/encryption.ts) has already refused the combinations AWS refuses.
 */
export function writeKey(
  request: Pick<FastifyRequest, 'headers'>,
  keys: ServerKeys,
  bucketDefault: BucketEncryption | undefined,
  tenantId: string,
  prefix = CUSTOMER,
): SseKey | undefined {
  const c = customerKey(request, prefix)
  if (c) return customerSseKey(c, newVerifier(c.key))
  const sse = prefix === CUSTOMER ? one(request, 'x-amz-server-side-encryption') : undefined
  if (sse === 'aws:kms') return kmsSseKey(keys.kms, kmsKeyIdOf(request, keys.kms, tenantId), tenantId)
  if (sse === 'AES256') return sseS3WriteKey(keys.sseS3)
  if (sse !== undefined) return undefined
  return defaultKey(keys, bucketDefault, tenantId)
}

/** The key a write asking for nothing seals its object under: its bucket's default encryption's (S3 writes, API uploads). */
export function defaultKey(keys: ServerKeys, bucketDefault: BucketEncryption | undefined, tenantId: string): SseKey | undefined {
  if (bucketDefault?.algorithm === 'aws:kms') return kmsSseKey(keys.kms, bucketDefault.keyId ?? defaultKmsKey(keys.kms, tenantId), tenantId)
  if (bucketDefault?.algorithm === 'AES256') return sseS3WriteKey(keys.sseS3)
  return undefined
}

/** The ring's default key for the tenant; a default that tenant may not use is answered as no default at all. */
function defaultKmsKey(ring: KmsKeyRing, tenantId: string): string {
  const id = ring.defaultKeyFor(tenantId)
  if (id === undefined) {
    throw new S3Error(
      'InvalidArgument',
      'Server Side Encryption with KMS needs a key id: none was given and Coffer has no default key (COFFER_KMS_DEFAULT_KEY)',
    )
  }
  return id
}

/** The aws:kms key id a request names, or the ring's default for the tenant. */
export function kmsKeyIdOf(request: Pick<FastifyRequest, 'headers'>, ring: KmsKeyRing, tenantId: string): string {
  const id = one(request, 'x-amz-server-side-encryption-aws-kms-key-id')?.trim()
  return id === undefined || id === '' ? defaultKmsKey(ring, tenantId) : id
}

/**
 * The key that opens an object stored with `stored` (undefined: the object has none of its own),
 * from the request's headers under `prefix` (a GET's, or a copy's source's), refused as AWS and
 * ceph/s3-tests expect: an SSE-C object without the key, or with another key, is 400; customer key
 * headers for an object that is not SSE-C are 400 too.
 */
export function readKey(request: Pick<FastifyRequest, 'headers'>, stored: StoredSse | undefined, keys: ServerKeys, prefix = CUSTOMER): SseKey | undefined {
  const c = customerKey(request, prefix)
  if (stored?.type !== 'C') {
    if (c) throw new S3Error('InvalidArgument', 'The encryption parameters are not applicable to this object.')
    if (stored?.type === 'KMS') return { ...kmsSseKey(keys.kms, stored.keyId), stored }
    if (stored?.type === 'S3') return { ...sseS3Key(keys.sseS3), stored }
    return undefined
  }
  if (!c) {
    throw new S3Error(
      'InvalidRequest',
      'The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.',
    )
  }
  if (!verifies(stored.verifier, c.key)) {
    throw new S3Error('InvalidArgument', 'The provided encryption parameters did not match the ones used originally.')
  }
  return { ...customerSseKey(c, stored.verifier), stored }
}

/** The headers an answer about an object sealed under `key` carries (AWS: the algorithm and key MD5, aws:kms and its key id, or AES256). */
export function reportKey(reply: FastifyReply, key: Pick<SseKey, 'stored' | 'keyMd5'> | undefined): void {
  if (!key) return
  if (key.stored.type === 'S3') {
    reply.header('x-amz-server-side-encryption', 'AES256')
    return
  }
  if (key.stored.type === 'C') {
    reply.header(`${CUSTOMER}algorithm`, 'AES256')
    if (key.keyMd5 !== undefined) reply.header(`${CUSTOMER}key-md5`, key.keyMd5)
    return
  }
  reply.header('x-amz-server-side-encryption', 'aws:kms')
  reply.header('x-amz-server-side-encryption-aws-kms-key-id', key.stored.keyId)
}

/** The segments of an object of `size` bytes stored with `stored`. */
export function segmentsOf(stored: StoredSse, size: number): number[] {
  return stored.segments ?? [size]
}
