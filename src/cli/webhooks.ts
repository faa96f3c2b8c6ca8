import { DATA_DIR_OPTION, parse, println, UsageError, withCore, type CliIO } from './io'
import type { OutboxStatus } from '../db/repos/outbox'
import { outboxEventView } from '../contract/webhooks'
import { escapeUnsafe, terminalJson } from '../lib/text'

export const WEBHOOKS_HELP = `Usage:
  coffer webhooks list [--status pending|delivered|dead] [--limit N] [--json]
  coffer webhooks retry EVENT_ID [--json]
  coffer webhooks retry --all-dead [--json]

Works on the data dir, also while the server runs: a running server picks re-driven events up
within a second. A retried event gets a fresh set of 3 attempts and keeps its webhook-id.`

const STATUSES = ['pending', 'delivered', 'dead'] as const

export async function webhooksCommand(args: string[], io: CliIO): Promise<number> {
  const [sub, ...rest] = args
  if (sub === undefined || sub === '--help' || sub === '-h') {
    println(io.stdout, WEBHOOKS_HELP)
    return sub === undefined ? 2 : 0
  }
  if (sub === 'list') {
    const { values } = parse(rest, { ...DATA_DIR_OPTION, json: { type: 'boolean' }, status: { type: 'string' }, limit: { type: 'string' } })
    if (values.help) return (println(io.stdout, WEBHOOKS_HELP), 0)
    const status = values.status ?? null
    if (status !== null && !(STATUSES as readonly string[]).includes(status)) throw new UsageError(`--status must be one of: ${STATUSES.join(', ')}`)
    const limit = values.limit === undefined ? 100 : Number(values.limit)
    if (!Number.isInteger(limit) || limit < 1 || limit > 100_000) throw new UsageError('--limit must be an integer from 1 to 100000')
    return withCore(io, values['data-dir'], (core) => {
      const events = core.webhookEvents.list(status as OutboxStatus | null, limit).map(outboxEventView)
      if (values.json) return println(io.stdout, terminalJson(events))
      if (events.length === 0) return println(io.stdout, status ? `No ${status} webhook events.` : 'No webhook events.')
      println(io.stdout, ['ID'.padEnd(36), 'EVENT'.padEnd(13), 'STATUS'.padEnd(9), 'TRIES', 'CREATED'.padEnd(24), 'URL / LAST ERROR'].join('  '))
      for (const e of events) {
        println(
          io.stdout,
          [
            e.id.padEnd(36),
            e.event.padEnd(13),
            e.status.padEnd(9),
            String(e.attempts).padEnd(5),
            e.createdAt.padEnd(24),
            // Stored before #12 (or by another writer), a URL may still hold control characters: shown escaped, never raw.
            escapeUnsafe(`${e.url}${e.lastError ? `  (${e.lastError})` : ''}`),
          ].join('  '),
        )
      }
    })
  }
  if (sub === 'retry') {
    const { values, positionals } = parse(rest, { ...DATA_DIR_OPTION, json: { type: 'boolean' }, 'all-dead': { type: 'boolean' } }, 1)
    if (values.help) return (println(io.stdout, WEBHOOKS_HELP), 0)
    const id = positionals[0]
    if ((id === undefined) === !values['all-dead']) throw new UsageError('webhooks retry needs an EVENT_ID or --all-dead (not both)')
    return withCore(io, values['data-dir'], (core) => {
      if (values['all-dead']) {
        const n = core.webhookEvents.retryAllDead()
        return values.json ? println(io.stdout, JSON.stringify({ retried: n })) : println(io.stdout, `re-queued ${n} dead event(s)`)
      }
      const outcome = core.webhookEvents.retry(id!)
      if (outcome !== 'retried') {
        println(io.stderr, outcome === 'unknown' ? `coffer: no webhook event ${id}` : `coffer: event ${id} is already pending`)
        return 1
      }
      return values.json ? println(io.stdout, JSON.stringify({ retried: 1 })) : println(io.stdout, `re-queued ${id}`)
    })
  }
  throw new UsageError(`unknown webhooks command: ${sub}`)
}
