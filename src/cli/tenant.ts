import { AppError } from '../errors'
import { createdTenantView, tenantSummaryView } from '../contract/tenants'
import { checkTenantInput, type CreateTenantInput } from '../services/tenants'
import { DATA_DIR_OPTION, parse, println, UsageError, withCore, type CliIO } from './io'
import { escapeUnsafe } from '../lib/text'

export const TENANT_HELP = `Usage:
  coffer tenant create --name NAME [--quota-bytes BYTES] [--types TYPE,…] [--json]
  coffer tenant list [--json]
  coffer tenant regenerate-key TENANT_ID [--json]
  coffer tenant s3-credentials create|list TENANT_ID [--json]
  coffer tenant s3-credentials revoke TENANT_ID ACCESS_KEY_ID

Works offline on the data dir (--data-dir or COFFER_DATA_DIR, default ./data), also while the
server runs. The API key is printed once: store it.`

const FLAG_OF: Record<string, string> = { '/name': '--name', '/quotaBytes': '--quota-bytes', '/allowedFileTypes': '--types' }

export async function tenantCommand(args: string[], io: CliIO): Promise<number> {
  const [sub, ...rest] = args
  const opts = { ...DATA_DIR_OPTION, json: { type: 'boolean' } } as const
  if (sub === undefined || sub === '--help' || sub === '-h') {
    println(io.stdout, TENANT_HELP)
    return sub === undefined ? 2 : 0
  }
  if (sub === 'create') {
    const { values } = parse(rest, { ...opts, name: { type: 'string' }, 'quota-bytes': { type: 'string' }, types: { type: 'string' } })
    if (values.help) return (println(io.stdout, TENANT_HELP), 0)
    if (values.name === undefined) throw new UsageError('tenant create needs --name')
    const input: CreateTenantInput = { name: values.name }
    const quota = values['quota-bytes']
    if (quota !== undefined) {
      if (!/^\d{1,16}$/.test(quota)) throw new UsageError('--quota-bytes: must be an integer of at least 0')
      input.quotaBytes = Number(quota)
    }
    if (values.types !== undefined)
      input.allowedFileTypes = values.types
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    // The service's own rules, checked before the data dir is opened, and reported by flag.
    try {
      checkTenantInput(input)
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      const first = (err.details.errors as { path: string; message: string }[])[0]!
      throw new UsageError(`${FLAG_OF[first.path] ?? first.path}: ${first.message}`)
    }
    return withCore(io, values['data-dir'], (core) => {
      const { tenant, apiKey } = core.tenants.create(input)
      const out = createdTenantView(tenant, apiKey)
      if (values.json) return println(io.stdout, JSON.stringify(out))
      println(io.stdout, `Created tenant "${out.name}"`)
      println(io.stdout, `  id:             ${out.id}`)
      println(io.stdout, `  api key:        ${out.apiKey}   (shown only now: store it)`)
      println(io.stdout, `  webhook secret: ${out.webhookSecret}`)
      println(io.stdout, `  quota:          ${out.quotaBytes} bytes`)
      println(io.stdout, `  file types:     ${out.allowedFileTypes.join(', ')}`)
    })
  }
  if (sub === 'list') {
    const { values } = parse(rest, opts)
    if (values.help) return (println(io.stdout, TENANT_HELP), 0)
    return withCore(io, values['data-dir'], (core) => {
      const rows = core.tenants.list().map(tenantSummaryView)
      if (values.json) return println(io.stdout, JSON.stringify(rows))
      if (rows.length === 0) return println(io.stdout, 'No tenants yet. Create one: coffer tenant create --name NAME')
      println(io.stdout, ['ID'.padEnd(36), 'USED/QUOTA (bytes)'.padEnd(26), 'CREATED'.padEnd(24), 'NAME'].join('  '))
      for (const r of rows) {
        println(io.stdout, [r.id, `${r.usedBytes}/${r.quotaBytes}`.padEnd(26), r.createdAt.padEnd(24), escapeUnsafe(r.name)].join('  '))
      }
    })
  }
  if (sub === 'regenerate-key') {
    const { values, positionals } = parse(rest, opts, 1)
    if (values.help) return (println(io.stdout, TENANT_HELP), 0)
    const id = positionals[0]
    if (id === undefined) throw new UsageError('tenant regenerate-key needs a TENANT_ID')
    return withCore(io, values['data-dir'], (core) => {
      const { tenant, apiKey } = core.tenants.regenerateKey(id)
      if (values.json) return println(io.stdout, JSON.stringify({ tenantId: tenant.id, apiKey, webhookSecret: tenant.webhookSecret }))
      println(io.stdout, `New key for tenant "${tenant.name}" (${tenant.id}); the previous key no longer works.`)
      println(io.stdout, `  api key:        ${apiKey}   (shown only now: store it)`)
      println(io.stdout, `  webhook secret: ${tenant.webhookSecret}`)
    })
  }
  if (sub === 's3-credentials') return s3CredentialsCommand(rest, io)
  throw new UsageError(`unknown tenant command: ${sub}`)
}

/** `coffer tenant s3-credentials create|list|revoke`: a tenant's S3 credential pairs (s3.md: Credentials). */
async function s3CredentialsCommand(args: string[], io: CliIO): Promise<number> {
  const [action, ...rest] = args
  const { values, positionals } = parse(rest, { ...DATA_DIR_OPTION, json: { type: 'boolean' } }, 2)
  if (values.help || action === undefined) return (println(io.stdout, TENANT_HELP), action === undefined ? 2 : 0)
  const tenantId = positionals[0]
  if (tenantId === undefined) throw new UsageError(`tenant s3-credentials ${action} needs a TENANT_ID`)
  if (action === 'create') {
    return withCore(io, values['data-dir'], (core) => {
      const c = core.s3Credentials.create(tenantId)
      if (values.json) return println(io.stdout, JSON.stringify(c))
      println(io.stdout, `New S3 credential for tenant ${tenantId}`)
      println(io.stdout, `  access key id:     ${c.accessKeyId}`)
      println(io.stdout, `  secret access key: ${c.secretAccessKey}   (shown only now: store it)`)
    })
  }
  if (action === 'list') {
    return withCore(io, values['data-dir'], (core) => {
      const rows = core.s3Credentials.list(tenantId)
      if (values.json) return println(io.stdout, JSON.stringify(rows))
      if (rows.length === 0) return println(io.stdout, `No S3 credentials. Create one: coffer tenant s3-credentials create ${tenantId}`)
      println(io.stdout, ['ACCESS KEY ID'.padEnd(20), 'CREATED'].join('  '))
      for (const r of rows) println(io.stdout, [r.accessKeyId, r.createdAt].join('  '))
    })
  }
  if (action === 'revoke') {
    const accessKeyId = positionals[1]
    if (accessKeyId === undefined) throw new UsageError('tenant s3-credentials revoke needs TENANT_ID ACCESS_KEY_ID')
    return withCore(io, values['data-dir'], (core) => {
      core.s3Credentials.revoke(tenantId, accessKeyId)
      println(io.stdout, `Revoked S3 credential ${accessKeyId}; requests signed with it are refused from now on.`)
    })
  }
  throw new UsageError(`unknown tenant s3-credentials command: ${action}`)
}
