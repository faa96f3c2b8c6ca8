/**
 * A tenant, its S3 pair and a bucket made through a build's own CLI and fronts, not the bench's
 * copy of src/: the figures that run another build (an older bundle, whose schema is older) or a
 * core over PostgreSQL (whose bridge thread the bench's bundle does not carry) seed this way.
 * The data dir must exist (a server started on it once).
 */
import { spawnSync } from 'node:child_process'
import { type CofferCommand } from './coffer'
import { request } from './http'
import { encodePath, sha256Hex, signHeaders, type Credentials } from './s3-sign'
import { loadConfig } from '../../src/config'

export interface Tenant {
  tenantId: string
  apiKey: string
  creds: Credentials
}

function cli(cmd: CofferCommand, args: string[], dataDir: string, env: Record<string, string>): unknown {
  const r = spawnSync(cmd.command, [...cmd.args, ...args, '--json', '--data-dir', dataDir], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
  })
  if (r.status !== 0) throw new Error(`coffer ${args.join(' ')}: exit ${r.status}: ${r.stderr.trim().split('\n').slice(-2).join(' | ')}`)
  return JSON.parse(r.stdout)
}

/** `coffer tenant create` (64 GiB of quota) and `coffer tenant s3-credentials create`. */
export function cliTenant(cmd: CofferCommand, dataDir: string, env: Record<string, string> = {}): Tenant {
  const t = cli(cmd, ['tenant', 'create', '--name', 'bench', '--quota-bytes', '64GiB'], dataDir, env) as { id: string; apiKey: string }
  const pair = cli(cmd, ['tenant', 's3-credentials', 'create', t.id], dataDir, env) as { accessKeyId: string; secretAccessKey: string }
  return {
    tenantId: t.id,
    apiKey: t.apiKey,
    creds: { accessKeyId: pair.accessKeyId, secretAccessKey: pair.secretAccessKey, region: loadConfig({}).s3Region },
  }
}

/** A signed S3 request from the bench (path-style); throws unless it answers `expect`. */
export async function s3Request(s3Url: string, creds: Credentials, method: string, p: string, body?: Buffer, expect = 200): Promise<void> {
  const host = s3Url.replace('http://', '')
  const res = await request(`${s3Url}${p}`, { method, headers: signHeaders(creds, method, host, p, sha256Hex(body ?? '')), ...(body ? { body } : {}) })
  if (res.status !== expect) throw new Error(`${method} ${p}: ${res.status} ${res.body.toString().slice(0, 200)}`)
}

/** CreateBucket `name`; returns its path. */
export async function createBucket(s3Url: string, creds: Credentials, name = 'bench'): Promise<string> {
  const p = encodePath(`/${name}`)
  await s3Request(s3Url, creds, 'PUT', p)
  return p
}
