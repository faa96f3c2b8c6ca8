import type { Static } from '@sinclair/typebox'
import { AppError } from '../errors'
import { createdTenantView, tenantSummaryView, type TenantSummary } from '../contract/tenants'
import { checkTenantInput, type CreateTenantInput, type UpdateTenantInput } from '../services/tenants'
import { DATA_DIR_OPTION, parse, println, UsageError, withCore, type CliIO } from './io'
import { escapeUnsafe, terminalJson } from '../lib/text'
import { parseSize, quotaText } from '../lib/sizes'
import { SupportedTypes, UNLIMITED_QUOTA } from '../lib/file-types'
import { ConfigError, loadConfig } from '../config'

export const TENANT_HELP = `Usage:
  coffer tenant create --name NAME [--quota-bytes BYTES] [--types TYPE,…] [--file-types TYPE,…] [--json]
  coffer tenant list [--json]
  coffer tenant show TENANT_ID [--json]
  coffer tenant update TENANT_ID [--name NAME] [--quota-bytes BYTES] [--types TYPE,…] [--file-types TYPE,…] [--self-service-s3 on|off] [--json]
  coffer tenant delete TENANT_ID --yes
  coffer tenant regenerate-key TENANT_ID [--json]
  coffer tenant s3-credentials create|list TENANT_ID [--json]
  coffer tenant s3-credentials revoke TENANT_ID ACCESS_KEY_ID

Works offline on an existing data dir (--data-dir or COFFER_DATA_DIR, default ./data), or on the
PostgreSQL database COFFER_DATABASE_URL names, also while servers run; changes count at their next
request. The API key is printed once:
store it. BYTES is an integer, optionally with a unit: 500MiB, 10GiB, 1TB (KiB/MiB/GiB/TiB are
powers of 1024, KB/MB/GB/TB of 1000), or unlimited; without --quota-bytes a new tenant gets
COFFER_DEFAULT_QUOTA_BYTES (default 524288000). A quota below the usage is allowed: uploads are
refused until usage drops. --types are among the server's supported types: the spec's six, and
those COFFER_FILE_TYPES (or --file-types here, as the servers are given it) adds; * allows every
type the server supports. --self-service-s3 off stops the tenant creating, listing and revoking its own
S3 credentials (on by default; the pairs it has keep working). delete is irreversible: the key and every signed URL stop at once, the files
and workspaces are deleted (their content is collected after COFFER_DELETED_RETENTION_SECONDS),
undelivered webhooks are dropped; it needs --yes.`

/** `--quota-bytes` as a number of bytes: digits, optionally a unit, or `unlimited`; anything else is a usage error. */
export function parseBytes(flag: string, text: string): number {
  const bytes = parseSize(text, { unlimited: true })
  if (bytes === undefined) throw new UsageError(`${flag} must be a number of bytes, like 1048576, 500MiB or 10GiB, or unlimited (got ${JSON.stringify(text)})`)
  return bytes
}

/** The file types the data dir's servers accept, as this command's configuration says (COFFER_FILE_TYPES, --file-types). */
function supportedTypes(io: CliIO, fileTypes: string | undefined): SupportedTypes {
  try {
    return new SupportedTypes(loadConfig(io.env, fileTypes === undefined ? {} : { 'file-types': fileTypes }).fileTypes)
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message)
    throw err
  }
}

/** A service's validation error, told in the flag the person typed. */
function asFlagError(err: unknown): never {
  if (err instanceof AppError && err.code === 'VALIDATION_ERROR') {
    const first = (err.details.errors as { path: string; message: string }[] | undefined)?.[0]
    const flag = first && Object.entries(FLAG_OF).find(([p]) => first.path.startsWith(p))?.[1]
    if (first && flag) throw new UsageError(`${flag}: ${first.message}`)
  }
  throw err
}

type TenantView = Static<typeof TenantSummary>

function printTenant(io: CliIO, t: TenantView): void {
  println(io.stdout, `Tenant "${escapeUnsafe(t.name)}"`)
  println(io.stdout, `  id:          ${t.id}`)
  println(io.stdout, `  used/quota:  ${t.usedBytes}/${quotaText(t.quotaBytes)} bytes (${percent(t)})`)
  println(io.stdout, `  files:       ${t.fileCount}`)
  println(io.stdout, `  file types:  ${t.allowedFileTypes.join(', ')}`)
  println(io.stdout, `  self-service S3 credentials: ${t.selfServiceS3Credentials ? 'on' : 'off'}`)
  println(io.stdout, `  created:     ${t.createdAt}`)
}

const percent = (t: TenantView) =>
  t.quotaBytes >= UNLIMITED_QUOTA
    ? 'no limit'
    : t.quotaBytes === 0
      ? t.usedBytes > 0
        ? 'over quota'
        : '0%'
      : `${((t.usedBytes / t.quotaBytes) * 100).toFixed(1)}%`

const FLAG_OF: Record<string, string> = { '/name': '--name', '/quotaBytes': '--quota-bytes', '/allowedFileTypes': '--types' }

export async function tenantCommand(args: string[], io: CliIO): Promise<number> {
  const [sub, ...rest] = args
  const opts = { ...DATA_DIR_OPTION, json: { type: 'boolean' } } as const
  if (sub === undefined || sub === '--help' || sub === '-h') {
    println(io.stdout, TENANT_HELP)
    return sub === undefined ? 2 : 0
  }
  if (sub === 'create') {
    const { values } = parse(rest, {
      ...opts,
      name: { type: 'string' },
      'quota-bytes': { type: 'string' },
      types: { type: 'string' },
      'file-types': { type: 'string' },
    })
    if (values.help) return (println(io.stdout, TENANT_HELP), 0)
    if (values.name === undefined) throw new UsageError('tenant create needs --name')
    const input: CreateTenantInput = { name: values.name }
    const quota = values['quota-bytes']
    if (quota !== undefined) input.quotaBytes = parseBytes('--quota-bytes', quota)
    if (values.types !== undefined)
      input.allowedFileTypes = values.types
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    const fileTypes = values['file-types']
    // The service's own rules, checked before the data dir is opened, and reported by flag.
    try {
      checkTenantInput(input, supportedTypes(io, fileTypes))
    } catch (err) {
      asFlagError(err)
    }
    return withCore(
      io,
      values['data-dir'],
      (core) => {
        const { tenant, apiKey } = core.tenants.create(input)
        const out = createdTenantView(tenant, apiKey)
        if (values.json) return println(io.stdout, JSON.stringify(out))
        println(io.stdout, `Created tenant "${out.name}"`)
        println(io.stdout, `  id:             ${out.id}`)
        println(io.stdout, `  api key:        ${out.apiKey}   (shown only now: store it)`)
        println(io.stdout, `  webhook secret: ${out.webhookSecret}`)
        println(io.stdout, `  quota:          ${out.quotaBytes >= UNLIMITED_QUOTA ? 'unlimited' : `${out.quotaBytes} bytes`}`)
        println(io.stdout, `  file types:     ${out.allowedFileTypes.join(', ')}`)
      },
      { 'file-types': fileTypes },
    )
  }
  if (sub === 'list') {
    const { values } = parse(rest, opts)
    if (values.help) return (println(io.stdout, TENANT_HELP), 0)
    return withCore(io, values['data-dir'], (core) => {
      const rows: TenantView[] = []
      for (let cursor: string | undefined; ;) {
        const page = core.tenants.list({ limit: 100, cursor })
        rows.push(...page.tenants.map(tenantSummaryView))
        if (page.nextCursor === null) break
        cursor = page.nextCursor
      }
      if (values.json) return println(io.stdout, terminalJson(rows))
      if (rows.length === 0) return println(io.stdout, 'No tenants yet. Create one: coffer tenant create --name NAME')
      println(io.stdout, ['ID'.padEnd(36), 'USED/QUOTA (bytes)'.padEnd(30), 'FILES'.padStart(7), 'CREATED'.padEnd(24), 'NAME'].join('  '))
      for (const r of rows) {
        println(
          io.stdout,
          [
            r.id,
            `${r.usedBytes}/${quotaText(r.quotaBytes)} (${percent(r)})`.padEnd(30),
            String(r.fileCount).padStart(7),
            r.createdAt.padEnd(24),
            escapeUnsafe(r.name),
          ].join('  '),
        )
      }
    })
  }
  if (sub === 'show') {
    const { values, positionals } = parse(rest, opts, 1)
    if (values.help) return (println(io.stdout, TENANT_HELP), 0)
    const id = positionals[0]
    if (id === undefined) throw new UsageError('tenant show needs a TENANT_ID (coffer tenant list shows them)')
    return withCore(io, values['data-dir'], (core) => {
      const t = tenantSummaryView(core.tenants.show(id))
      if (values.json) return println(io.stdout, terminalJson(t))
      printTenant(io, t)
    })
  }
  if (sub === 'update') {
    const { values, positionals } = parse(
      rest,
      {
        ...opts,
        name: { type: 'string' },
        'quota-bytes': { type: 'string' },
        types: { type: 'string' },
        'file-types': { type: 'string' },
        'self-service-s3': { type: 'string' },
      },
      1,
    )
    if (values.help) return (println(io.stdout, TENANT_HELP), 0)
    const id = positionals[0]
    if (id === undefined) throw new UsageError('tenant update needs a TENANT_ID (coffer tenant list shows them)')
    const selfService = values['self-service-s3']
    const input: UpdateTenantInput = {}
    if (values.name !== undefined) input.name = values.name
    if (values['quota-bytes'] !== undefined) input.quotaBytes = parseBytes('--quota-bytes', values['quota-bytes'])
    if (values.types !== undefined)
      input.allowedFileTypes = values.types
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
    if (selfService !== undefined) {
      if (selfService !== 'on' && selfService !== 'off') throw new UsageError('--self-service-s3: must be on or off')
      input.selfServiceS3Credentials = selfService === 'on'
    }
    if (Object.keys(input).length === 0) throw new UsageError('tenant update needs at least one of --name, --quota-bytes, --types, --self-service-s3')
    const fileTypes = values['file-types']
    try {
      checkTenantInput(input, supportedTypes(io, fileTypes))
    } catch (err) {
      asFlagError(err)
    }
    return withCore(
      io,
      values['data-dir'],
      (core) => {
        const t = tenantSummaryView(core.tenants.update(id, input))
        if (values.json) return println(io.stdout, terminalJson(t))
        printTenant(io, t)
      },
      { 'file-types': fileTypes },
    )
  }
  if (sub === 'delete') {
    const { values, positionals } = parse(rest, { ...DATA_DIR_OPTION, yes: { type: 'boolean' } }, 1)
    if (values.help) return (println(io.stdout, TENANT_HELP), 0)
    const id = positionals[0]
    if (id === undefined) throw new UsageError('tenant delete needs a TENANT_ID (coffer tenant list shows them)')
    return withCore(io, values['data-dir'], (core) => {
      const t = core.tenants.show(id)
      if (!values.yes) {
        println(
          io.stderr,
          `coffer: deleting tenant "${escapeUnsafe(t.name)}" (${t.id}) deletes its ${t.fileCount} file(s) and its workspaces and stops its key, irreversibly; run again with --yes to do it`,
        )
        return 2
      }
      core.tenants.delete(t.id)
      println(
        io.stdout,
        `Deleted tenant "${escapeUnsafe(t.name)}" (${t.id}): its key and URLs no longer work; its ${t.fileCount} file(s) are deleted and their content is collected after the retention period.`,
      )
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

/** `coffer tenant s3-credentials create|list|revoke`: a tenant's S3 credential pairs (README, S3: credentials). */
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
