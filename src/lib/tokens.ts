import { randomBytes, timingSafeEqual } from 'node:crypto'
import { deriveKey, hmacHex } from './secrets'

export type TokenPurpose = 'upload' | 'download'

/**
 * A tenant's current signing generation, or undefined when the tenant does not exist (any more).
 * Regenerating the tenant's key bumps it (TenantsRepo.rotate); a tenant that is gone verifies nothing.
 */
export type SigningGenerationOf = (tenantId: string) => number | undefined

/**
 * HMAC-SHA256 tokens for presigned uploads and signed downloads. The message is
 * `<purpose>\n<fileId>\n<expires>` (contract: Downloads), so a token is bound to one purpose, one
 * file and one expiry; the key is derived per tenant and per signing generation from the server
 * secret (HKDF), so one tenant's tokens say nothing about another's, and every token made before
 * a key regeneration stops verifying at once (#12).
 */
export class TokenSigner {
  private readonly keys = new Map<string, Buffer>()
  /** Verifications for a missing file or tenant compute an HMAC all the same, against this key. */
  private readonly dummyKey = randomBytes(32)

  constructor(
    private readonly serverSecret: Buffer,
    private readonly generationOf: SigningGenerationOf,
  ) {}

  /** Signs for the tenant's current generation; throws if the tenant does not exist. */
  sign(purpose: TokenPurpose, tenantId: string, fileId: string, expires: number): string {
    const key = this.keyFor(tenantId)
    if (!key) throw new Error(`cannot sign for tenant ${tenantId}: it does not exist`)
    return hmacHex(key, message(purpose, fileId, expires))
  }

  /**
   * Constant-time check of a presented token; malformed input is simply invalid. `tenantId` is
   * undefined when the file does not exist: the HMAC is then computed against a dummy key, so
   * the answer takes as long for a missing id as for an existing one (#12).
   */
  verify(purpose: TokenPurpose, tenantId: string | undefined, fileId: string, expires: number, token: string): boolean {
    const key = (tenantId === undefined ? undefined : this.keyFor(tenantId)) ?? this.dummyKey
    const expected = Buffer.from(hmacHex(key, message(purpose, fileId, expires)), 'hex')
    const wellFormed = /^[0-9a-f]{64}$/.test(token)
    const equal = timingSafeEqual(expected, wellFormed ? Buffer.from(token, 'hex') : Buffer.alloc(32))
    return equal && wellFormed && key !== this.dummyKey
  }

  private keyFor(tenantId: string): Buffer | undefined {
    const generation = this.generationOf(tenantId)
    if (generation === undefined) return undefined
    const cacheKey = `${tenantId}/${generation}`
    let key = this.keys.get(cacheKey)
    if (!key) {
      // Generation 0 keeps the original derivation, so URLs issued before generations existed still verify.
      key = deriveKey(this.serverSecret, 'signing', generation === 0 ? tenantId : `${tenantId}/${generation}`)
      this.keys.set(cacheKey, key)
    }
    return key
  }
}

const message = (purpose: TokenPurpose, fileId: string, expires: number) => `${purpose}\n${fileId}\n${expires}`
