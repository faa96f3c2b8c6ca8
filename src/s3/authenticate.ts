import { S3Error } from './errors'
import { verifySigV2, type SigV2Request } from './sigv2'
import { verifySigV4, type Verified, type VerifyOptions } from './sigv4'

export interface AuthenticateOptions<P> extends VerifyOptions<P> {
  /** COFFER_S3_SIGV2: whether Signature Version 2 (header and presigned) is accepted. */
  sigV2: boolean
}

/** The Authorization header's value, found without building the header map the verifier builds. */
function authorizationOf(rawHeaders: string[]): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!
    if (name.length === 13 && name.toLowerCase() === 'authorization') return rawHeaders[i + 1]!.trim()
  }
  return undefined
}

const V2_QUERY = /[?&]Signature=/
const V4_QUERY = /[?&]X-Amz-Algorithm=/

/**
 * Verifies an S3 request's signature, SigV4 or SigV2, whichever it carries. With SigV2 turned off,
 * a SigV2 request is answered as AWS answers one in a region that only takes SigV4 (400
 * InvalidRequest, "… Please use AWS4-HMAC-SHA256."): s3cmd reads that answer and signs again with
 * SigV4 by itself (#24; README, S3).
 */
export function authenticate<P>(req: SigV2Request, opts: AuthenticateOptions<P>): Verified<P> {
  const authorization = authorizationOf(req.rawHeaders)
  const v2 = authorization !== undefined ? /^AWS /.test(authorization) : V2_QUERY.test(req.url) && !V4_QUERY.test(req.url)
  if (!v2) return verifySigV4(req, opts)
  if (!opts.sigV2) throw new S3Error('InvalidRequest', 'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.')
  return verifySigV2(req, opts)
}
