import path from 'node:path'

/** Where every test process mirrors its log lines (pino JSON), for the scan after the run. */
export const TEST_LOG_DIR = path.join(__dirname, '..', '..', '.tap', 'coffer-logs')

/** What a credential looks like in a log line. */
const PATTERNS: [string, RegExp][] = [
  ['tenant API key', /sk_(?:live|test)_[A-Za-z0-9_-]{20,}/],
  ['webhook secret', /whsec_[A-Za-z0-9+/]{20,}/],
  ['signed URL or upload token', /token=(?!\[REDACTED\])[0-9a-fA-F]{16,}/],
  // The name percent-encoded (`%74oken=`): the query parser still reads it as the token (#12).
  ['signed URL token under an encoded name', /[?&][^=&\s"]*%[0-9a-fA-F]{2}[^=&\s"]*=(?!\[REDACTED\])[0-9a-fA-F]{64}/],
  ['admin key used by the tests', /[a-z]+-admin-key-[0-9a-z]{6,}/],
  ['Authorization header value', /Bearer\s+[A-Za-z0-9._~+/-]{8,}/],
  ['S3 secret of the Ceph fixture', /cofferS3secret[0-9a-f]{8,}/],
  ['S3 secret access key', /"?secretAccessKey"?\s*[:=]\s*"?(?!\[REDACTED\])[A-Za-z0-9+/]{40}/],
  ['S3 presigned URL signature', /X-Amz-Signature=(?!\[REDACTED\])[0-9a-f]{16,}/i],
  ['S3 SigV2 presigned URL signature', /[?&]Signature=(?!\[REDACTED\])[A-Za-z0-9%+/]{20,}/],
  ['SigV2 Authorization header', /AWS [A-Za-z0-9._-]{3,128}:[A-Za-z0-9+/]{27}=/],
  ['SigV4 Authorization header', /Credential=[A-Za-z0-9._-]{3,128}\/[^,]*,\s*SignedHeaders=[^,]*,\s*Signature=[0-9a-f]{16,}/],
]

/** The kinds of credential found in `line`; empty when it is clean. */
export function findSecrets(line: string): string[] {
  return PATTERNS.filter(([, re]) => re.test(line)).map(([name]) => name)
}
