import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { loadConfig, type Config } from '../config'
import type { Server } from '../server'
import { println, UsageError } from './io'

/** A throwaway instance's settings and the temporary data dir it owns. */
export interface Ephemeral {
  config: Config
  adminApiKey: string
  /** Removes the data dir; safe to call more than once, and from a process 'exit' handler. */
  remove(): void
}

/**
 * `coffer serve --ephemeral` (contract: Operations): a fresh data dir under TMPDIR, a generated
 * admin key, and webhooks to loopback/private addresses allowed, since the receivers of a CI job
 * run beside it. Everything else (port, host, log level, …) comes from flags and env as usual.
 */
export function prepareEphemeral(env: Record<string, string | undefined>, flags: Record<string, string | undefined>): Ephemeral {
  if (flags['data-dir'] !== undefined) throw new UsageError('--ephemeral makes its own temporary data dir: drop --data-dir')
  const adminApiKey = randomBytes(32).toString('base64url')
  // Validated before the directory exists, so a bad flag leaves nothing behind.
  loadConfig(env, flags)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-ephemeral-'))
  const config = loadConfig(
    // A free S3 port unless one is asked for, so parallel CI jobs never clash on 9000.
    { ...env, COFFER_DATA_DIR: undefined, COFFER_ADMIN_API_KEY: adminApiKey, COFFER_WEBHOOK_ALLOW_PRIVATE: 'true', COFFER_S3_PORT: env.COFFER_S3_PORT || '0' },
    { ...flags, 'data-dir': dir },
  )
  return { config, adminApiKey, remove: () => fs.rmSync(dir, { recursive: true, force: true }) }
}

/**
 * Creates the instance's tenant and prints the one line a CI script waits for. It is written
 * only now, once the server listens and the tenant exists, so whoever reads it can use it at once.
 */
export function announceEphemeral(server: Server, eph: Ephemeral, stdout: NodeJS.WritableStream): void {
  const { tenant, apiKey } = server.core.tenants.create({ name: 'ephemeral', keyKind: 'test' })
  const s3 = server.s3 && server.core.s3Credentials.create(tenant.id)
  const line = {
    url: server.url,
    adminApiKey: eph.adminApiKey,
    tenant: { id: tenant.id, apiKey },
    ...(server.s3 && s3
      ? { s3: { endpoint: server.s3.url, region: server.core.config.s3Region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } }
      : {}),
  }
  println(stdout, JSON.stringify(line))
}
