import { AppError } from '../errors'
import { createdTenantView, tenantSummaryView } from '../contract/tenants'
import { checkTenantInput, type CreateTenantInput } from '../services/tenants'
import { DATA_DIR_OPTION, parse, println, UsageError, withCore, type CliIO } from './io'
import { escapeUnsafe } from '../lib/text'

export const TENANT_HELP = `Usage:
  coffer tenant create --name NAME [--quota-bytes BYTES] [--types TYPE,…] [--json]
  coffer tenant list [--json]
  coffer tenant regenerate-key TENANT_ID [--json]

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
  throw new UsageError(`unknown tenant command: ${sub}`)
}
