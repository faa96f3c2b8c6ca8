import { AppError } from '../errors'
import type { FileRecord, FilesRepo } from '../db/repos/files'
import type { Clock } from '../lib/clock'
import { isUuid } from '../lib/ids'
import type { TokenPurpose, TokenSigner } from '../lib/tokens'

/** What a signed URL carries besides its path: expiry (epoch ms) and token. Fronts build the URL. */
export interface Grant {
  expires: number
  token: string
}

const MESSAGES: Record<TokenPurpose, { missing: string; invalid: string; expired: string }> = {
  upload: {
    missing: 'Missing upload URL parameters (expires, token)',
    invalid: 'Invalid upload URL',
    expired: 'Upload URL expired; request a new upload',
  },
  download: {
    missing: 'Missing Authorization header or signed URL parameters (expires, token)',
    invalid: 'Invalid signed URL',
    expired: 'Signed URL expired',
  },
}

/**
 * Grants and checks the tokens of presigned uploads and signed downloads: the one place a token
 * presented by a client is verified. Any defect (tampered id, expiry or signature, another
 * file's or another purpose's token) is UNAUTHORIZED, said the same way whatever the defect.
 */
export class SignedUrls {
  constructor(
    private readonly signer: TokenSigner,
    private readonly files: FilesRepo,
    private readonly clock: Clock,
  ) {}

  grant(purpose: TokenPurpose, file: { id: string; tenantId: string }, expires: number): Grant {
    return { expires, token: this.signer.sign(purpose, file.tenantId, file.id, expires) }
  }

  /**
   * The file row (any state) an authentic token names, and whether the grant has expired. The
   * caller decides what a deleted, settled or expired file answers, in the order its flow needs.
   */
  verify(
    purpose: TokenPurpose,
    fileId: string,
    expiresRaw: string | undefined,
    token: string | undefined,
  ): { file: FileRecord; expires: number; expired: boolean } {
    const text = MESSAGES[purpose]
    if (expiresRaw === undefined || token === undefined) throw new AppError('UNAUTHORIZED', text.missing)
    if (!/^\d{1,15}$/.test(expiresRaw) || !isUuid(fileId)) throw new AppError('UNAUTHORIZED', text.invalid)
    const expires = Number(expiresRaw)
    const id = fileId.toLowerCase()
    const file = this.files.get(id)
    // Verified against a dummy key when the file is missing: as slow as for an existing id (#12 item 6).
    if (!this.signer.verify(purpose, file?.tenantId, id, expires, token) || !file) throw new AppError('UNAUTHORIZED', text.invalid)
    return { file, expires, expired: expires <= this.clock.now() }
  }

  /**
   * The tenant whose valid signature a token carries for this file (any state, expired or not),
   * or undefined when it proves nothing; never throws. For per-tenant accounting (rate limits),
   * which charges a tenant only once a token proved it (#12 item 2).
   */
  signerOf(purpose: TokenPurpose, fileId: string, expiresRaw: string | undefined, token: string | undefined): string | undefined {
    if (expiresRaw === undefined || token === undefined || !/^\d{1,15}$/.test(expiresRaw) || !isUuid(fileId)) return undefined
    const id = fileId.toLowerCase()
    const file = this.files.get(id)
    return this.signer.verify(purpose, file?.tenantId, id, Number(expiresRaw), token) ? file?.tenantId : undefined
  }

  expiredError(purpose: TokenPurpose): AppError {
    return new AppError('UNAUTHORIZED', MESSAGES[purpose].expired)
  }
}
