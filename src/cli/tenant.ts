import { Value } from '@sinclair/typebox/value'
import { CreateTenantBody } from '../http/schemas/tenants'
import { createdTenantView } from '../services/tenants'
import { isoTime } from '../lib/clock'
import { escapeUnsafe } from '../lib/text'
import { DATA_DIR_OPTION, parse, println, UsageError, withCore, type CliIO } from './io'

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
    if (values.help) return println(io.stdout, TENANT_HELP), 0
    if (values.name === undefined) throw new UsageError('tenant create needs --name')
    const input: Record<string, unknown> = { name: values.name }
    if (values['quota-bytes'] !== undefined) input.quotaBytes = /^\d+$/.test(values['quota-bytes']) ? Number(values['quota-bytes']) : values['quota-bytes']
    if (values.types !== undefined) input.allowedFileTypes = values.types.split(',').map((s) => s.trim()).filter(Boolean)
    const firstError = Value.Errors(CreateTenantBody, input).First()
    if (firstError) {
      const flag = Object.entries(FLAG_OF).find(([p]) => firstError.path.startsWith(p))?.[1] ?? firstError.path
      throw new UsageError(`${flag}: ${firstError.message.toLowerCase()}`)
    }
    return withCore(io, values['data-dir'], (core) => {
      const { tenant, apiKey } = core.tenants.create(input as CreateTenantBody)
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
    if (values.help) return println(io.stdout, TENANT_HELP), 0
    return withCore(io, values['data-dir'], (core) => {
      const rows = core.tenants.repo.list().map((t) => ({
        id: t.id,
        name: t.name,
        quotaBytes: t.quotaBytes,
        usedBytes: t.usedBytes,
        allowedFileTypes: t.allowedFileTypes,
        createdAt: isoTime(t.createdAt),
      }))
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
    if (values.help) return println(io.stdout, TENANT_HELP), 0
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
