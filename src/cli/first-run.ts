import path from 'node:path'
import type { Logger } from 'pino'
import type { Server } from '../server'
import { clientEnv, envLines, writeAtomic } from './fixture-files'
import { println } from './io'
import { shellWord } from '../lib/shell-word'

/**
 * The first start of a server nobody can use yet: no tenant, and no admin key to create one. It
 * makes itself usable without a second command: it creates the tenant "default" (and an S3 key
 * pair for it when the S3 listener runs) and writes them to `<data-dir>/first-run.env`, mode 0600,
 * as NAME=value lines that a shell, the AWS CLI and rclone read. A person at a terminal sees them
 * once, in a short banner; the log (JSON under systemd, or a file) only names the file, never a key.
 */

/** The file the first start writes its credentials to, in the data dir. */
export const FIRST_RUN_FILE = 'first-run.env'

export interface FirstRun {
  file: string
  tenantId: string
  apiKey: string
  consoleUrl: string
  s3?: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string }
}

/** Whether this server has no way in: no admin key, and no tenant whose key someone could hold. */
export function needsFirstRun(server: Server): boolean {
  return server.core.config.adminApiKey === undefined && server.core.tenants.none()
}

/**
 * Creates the first tenant and writes its credentials file; undefined when another server made one
 * in the meantime (its own start shows it). A file that cannot be written takes
 * the tenant back with it: a tenant whose key nobody saw would lock the next start out the same way.
 */
export function firstRun(server: Server, logger: Logger): FirstRun | undefined {
  const { core } = server
  const file = path.resolve(core.config.dataDir, FIRST_RUN_FILE)
  // Another server starting on the same new data dir (or database) may have made it first.
  const made = core.tenants.createFirst({ name: 'default' })
  if (made === undefined) return undefined
  const { tenant, apiKey } = made
  try {
    const pair = server.s3 ? core.s3Credentials.create(tenant.id) : undefined
    const s3 = server.s3 && pair ? { endpoint: server.s3.url, region: core.config.s3Region, ...pair } : undefined
    const header =
      `# Written by coffer at the first start of this data dir: the tenant "default" (${tenant.id}).\n` +
      `# Its keys are not stored anywhere else readable: keep them, then delete this file.\n` +
      `# Use them from a shell: set -a; . ${shellWord(file)}; set +a\n`
    writeAtomic('first-run', file, header + envLines({ ...clientEnv({ url: server.url, apiKey, ...(s3 ? { s3 } : {}) }), COFFER_TENANT_ID: tenant.id }))
    logger.info(
      { tenantId: tenant.id, file },
      `first start: created the tenant "default"; its API key${s3 ? ' and S3 credentials are' : ' is'} in ${file} (readable by this user only)`,
    )
    return {
      file,
      tenantId: tenant.id,
      apiKey,
      consoleUrl: `${server.url}/console/`,
      ...(s3 ? { s3: { endpoint: s3.endpoint, region: s3.region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } } : {}),
    }
  } catch (err) {
    core.tenants.delete(tenant.id)
    throw err
  }
}

/** The banner a person at the terminal reads once: where the console and the S3 endpoint are, and how to sign in. */
export function printBanner(out: NodeJS.WritableStream, f: FirstRun): void {
  const lines = [
    '',
    '  Coffer is ready. This is the first start of this data dir: it made the tenant "default".',
    '',
    `  Console       ${f.consoleUrl}`,
    `  API key       ${f.apiKey}`,
    '                (paste it into the console to sign in)',
    ...(f.s3
      ? [`  S3 endpoint   ${f.s3.endpoint}   (region ${f.s3.region})`, `  Access key    ${f.s3.accessKeyId}`, `  Secret key    ${f.s3.secretAccessKey}`]
      : []),
    '',
    `  Shown only this once. Saved in ${f.file} (readable by you only):`,
    `  set -a; . ${shellWord(f.file)}; set +a   then coffer ls, aws s3 ls, rclone lsf coffer: work`,
    '',
  ]
  for (const line of lines) println(out, line)
}
