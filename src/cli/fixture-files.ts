import fs from 'node:fs'
import path from 'node:path'
import { OperatorError } from './startup-errors'

/**
 * The files a CI fixture writes for its pipeline (#28): `--json-file` (the JSON line) and
 * `--write-env` (NAME=value lines). Both are written whole or not at all (temp file, fsync,
 * rename), mode 0600 since they hold keys, once the instance is ready, so whoever sees one can
 * use everything it names.
 */

/** Characters that stand unquoted both in a GitHub Actions env file and in a shell assignment (no ~, $, quotes, spaces, globs that matter). */
const UNQUOTED = /^[A-Za-z0-9+/=._:@%,[\]-]*$/

/** `NAME=value` lines: `>> "$GITHUB_ENV"` as they are, or `set -a; . FILE; set +a` in a shell. */
export function envLines(vars: Record<string, string | number | undefined>): string {
  let out = ''
  for (const [name, value] of Object.entries(vars)) {
    if (value === undefined) continue
    const text = String(value)
    // Values come from validated settings (keys, URLs); one that would need quoting is refused
    // rather than written in a form one of the two readers would take differently.
    if (!UNQUOTED.test(text)) throw new OperatorError(`--write-env: the value of ${name} has characters an env file cannot hold unquoted`)
    out += `${name}=${text}\n`
  }
  return out
}

/** The S3 side of a client's environment: where to send requests and the key pair that signs them. */
export interface ClientS3 {
  endpoint: string
  region: string
  accessKeyId: string
  secretAccessKey: string
}

/** The name of the rclone remote the environment configures: `rclone lsf coffer:BUCKET`. */
export const RCLONE_REMOTE = 'coffer'

/**
 * The variables that point clients at a server: COFFER_URL and COFFER_API_KEY for the coffer
 * client commands; AWS_* for the AWS SDKs and CLI; RCLONE_CONFIG_COFFER_* for rclone, which reads
 * a remote's whole configuration from its environment, so `rclone lsf coffer:BUCKET` works with
 * no rclone.conf.
 */
export function clientEnv(o: { url: string; apiKey: string; s3?: ClientS3; pid?: number }): Record<string, string | number | undefined> {
  const { s3 } = o
  const rclone = `RCLONE_CONFIG_${RCLONE_REMOTE.toUpperCase()}`
  const aws = s3
    ? {
        AWS_ACCESS_KEY_ID: s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
        // AWS_REGION for the SDKs, AWS_DEFAULT_REGION for botocore (the AWS CLI, boto3).
        AWS_REGION: s3.region,
        AWS_DEFAULT_REGION: s3.region,
        AWS_ENDPOINT_URL: s3.endpoint,
        AWS_ENDPOINT_URL_S3: s3.endpoint,
        [`${rclone}_TYPE`]: 's3',
        // Other: a generic S3 server, which rclone addresses by path (bucket in the path, not the host name).
        [`${rclone}_PROVIDER`]: 'Other',
        [`${rclone}_ACCESS_KEY_ID`]: s3.accessKeyId,
        [`${rclone}_SECRET_ACCESS_KEY`]: s3.secretAccessKey,
        [`${rclone}_ENDPOINT`]: s3.endpoint,
        [`${rclone}_REGION`]: s3.region,
        [`${rclone}_FORCE_PATH_STYLE`]: 'true',
      }
    : {}
  // COFFER_PID: `coffer wait FILE --pid PID` knows the file is this process's, not an earlier run's.
  return { ...aws, COFFER_URL: o.url, COFFER_API_KEY: o.apiKey, ...(o.pid !== undefined ? { COFFER_PID: o.pid } : {}) }
}

/** Checks now, before the server starts, that `file` can be written (its directory exists and is writable). */
export function checkWritable(flag: string, file: string): string {
  const abs = path.resolve(file)
  try {
    fs.accessSync(path.dirname(abs), fs.constants.W_OK)
  } catch (err) {
    throw new OperatorError(`${flag} ${file}: its directory ${path.dirname(abs)} does not exist or cannot be written`, { cause: err })
  }
  if (fs.statSync(abs, { throwIfNoEntry: false })?.isDirectory()) throw new OperatorError(`${flag} ${file}: a directory is in the way`)
  return abs
}

/** Removes a file an earlier run left, so nothing reads it as this run's (it is written again once ready). */
export function removeStale(file: string): void {
  fs.rmSync(file, { force: true })
}

/** Writes `text` to `file` atomically with mode 0600. */
export function writeAtomic(flag: string, file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`
  try {
    const fd = fs.openSync(tmp, 'w', 0o600)
    try {
      fs.writeFileSync(fd, text)
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    fs.renameSync(tmp, file)
  } catch (err) {
    fs.rmSync(tmp, { force: true })
    throw new OperatorError(`cannot write ${flag} ${file}: ${(err as Error).message}`, { cause: err })
  }
}
