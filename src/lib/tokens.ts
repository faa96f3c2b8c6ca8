import { timingSafeEqual } from 'node:crypto'
import { deriveKey, hmacHex } from './secrets'

export type TokenPurpose = 'upload' | 'download'

/**
 * HMAC-SHA256 tokens for presigned uploads and signed downloads. The message is
 * `<purpose>\n<fileId>\n<expires>` (contract: Downloads), so a token is bound to one purpose, one
 * file and one expiry; the key is derived per tenant from the server secret (HKDF), so one
 * tenant's tokens say nothing about another's. A deleted tenant verifies nothing (#13): `isLive`
 * is asked at every verification, so a deletion by another process (the CLI) counts at once.
 */
export class TokenSigner {
  private readonly keys = new Map<string, Buffer>()

  constructor(
    private readonly serverSecret: Buffer,
    private readonly isLive: (tenantId: string) => boolean,
  ) {}

  sign(purpose: TokenPurpose, tenantId: string, fileId: string, expires: number): string {
    return hmacHex(this.keyFor(tenantId), `${purpose}\n${fileId}\n${expires}`)
  }

  /** Constant-time check of a presented token; malformed input is simply invalid. */
  verify(purpose: TokenPurpose, tenantId: string, fileId: string, expires: number, token: string): boolean {
    if (!/^[0-9a-f]{64}$/.test(token) || !this.isLive(tenantId)) return false
    const expected = Buffer.from(this.sign(purpose, tenantId, fileId, expires), 'hex')
    return timingSafeEqual(expected, Buffer.from(token, 'hex'))
  }

  private keyFor(tenantId: string): Buffer {
    let key = this.keys.get(tenantId)
    if (!key) {
      key = deriveKey(this.serverSecret, 'signing', tenantId)
      this.keys.set(tenantId, key)
    }
    return key
  }
}
