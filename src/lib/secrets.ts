import { createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'

/** Tenant API key: `sk_live_` (or `sk_test_`) + 32 random bytes, base64url. */
export function newApiKey(kind: 'live' | 'test' = 'live'): string {
  return `sk_${kind}_${randomBytes(32).toString('base64url')}`
}

/** Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`
}

export function sha256(data: string | Buffer): Buffer {
  return createHash('sha256').update(data).digest()
}

/**
 * Constant-time equality of two strings. Both sides are hashed first so that the comparison
 * time depends on neither the contents nor the lengths of the inputs.
 */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b))
}

export function hmacHex(key: Buffer, message: string): string {
  return createHmac('sha256', key).update(message).digest('hex')
}

/** A 32-byte key for one purpose and one tenant, derived from the server secret (RFC 5869). */
export function deriveKey(serverSecret: Buffer, purpose: string, tenantId: string): Buffer {
  return Buffer.from(hkdfSync('sha256', serverSecret, Buffer.alloc(0), `coffer/${purpose}/${tenantId}`, 32))
}
