// `coffer __pg-bridge`: hidden, not a stable interface, for the tests of the shipped artifacts
// (#30). The PostgreSQL bridge must start its worker thread from dist/coffer.cjs and from the
// single executable, whose main script cannot load files from disk (scripts/build.mjs), and no
// setting selects PostgreSQL yet: COFFER_DATABASE_URL comes once everything `coffer serve` uses
// runs on it. A test cannot require() an executable, so this command is how a test reaches the
// bridge inside one. The URL comes on stdin, with the statements, never in argv (ps shows argv).
import { PgBridge } from '../db/pg/bridge'
import { PgEngine } from '../db/pg/engine'
import { PgError } from '../db/pg/errors'
import { println, UsageError, type CliIO } from './io'

/** One statement with `$n` parameters, or a transaction of steps (nested: a savepoint). */
type Step = { sql: string; params?: unknown[] } | { transaction: Step[] }

/** The output line of a statement or of a transaction that committed. */
type Outcome = { rows: Record<string, unknown>[]; rowCount: number } | { results: Outcome[] }

const MAX_INPUT_BYTES = 1024 * 1024

export const PG_BRIDGE_HELP = `Usage: coffer __pg-bridge < SCRIPT.json

Hidden, for tests (#30): runs statements through the PostgreSQL bridge. SCRIPT is
{"url": "postgres://…", "steps": [STEP…]}, a STEP {"sql": "…", "params": […]} or
{"transaction": [STEP…]}. One JSON line per step: {"rows","rowCount"}, {"results"} once a
transaction committed, or {"error": {"code", "message"}} (rolled back); exit 1 if any failed.`

function isStep(v: unknown): v is Step {
  if (typeof v !== 'object' || v === null) return false
  const o = v as Record<string, unknown>
  if ('transaction' in o) return Array.isArray(o.transaction) && o.transaction.every(isStep)
  return typeof o.sql === 'string' && (o.params === undefined || Array.isArray(o.params))
}

function parseScript(text: string): { url: string; steps: Step[] } {
  let script: unknown
  try {
    script = JSON.parse(text)
  } catch (err) {
    throw new UsageError(`__pg-bridge: stdin is not JSON: ${(err as Error).message}`)
  }
  const s = script as { url?: unknown; steps?: unknown }
  if (typeof s?.url !== 'string' || !/^postgres(ql)?:\/\//.test(s.url)) throw new UsageError('__pg-bridge: "url" must be a postgres:// URL')
  if (!Array.isArray(s.steps) || !s.steps.every(isStep))
    throw new UsageError('__pg-bridge: "steps" must be a list of {"sql", "params"} or {"transaction": [...]}')
  return { url: s.url, steps: s.steps }
}

async function readAll(stdin: AsyncIterable<Buffer | string>): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of stdin) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    size += b.length
    if (size > MAX_INPUT_BYTES) throw new UsageError(`__pg-bridge: the script is over ${MAX_INPUT_BYTES} bytes`)
    chunks.push(b)
  }
  return Buffer.concat(chunks).toString('utf8')
}

function run(engine: PgEngine, step: Step): Outcome {
  if ('transaction' in step) return { results: engine.transaction(() => step.transaction.map((s) => run(engine, s))) }
  const r = engine.bridge.query(step.sql, step.params ?? [])
  return { rows: r.rows, rowCount: r.rowCount }
}

export async function pgBridgeCommand(args: string[], io: CliIO, stdin: AsyncIterable<Buffer | string>): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    println(io.stdout, PG_BRIDGE_HELP)
    return 0
  }
  if (args.length > 0) throw new UsageError(`unexpected argument: ${args[0]}`)
  const { url, steps } = parseScript(await readAll(stdin))
  const engine = new PgEngine(new PgBridge({ url }))
  let failed = false
  try {
    for (const step of steps) {
      try {
        println(io.stdout, JSON.stringify(run(engine, step)))
      } catch (err) {
        if (!(err instanceof PgError)) throw err
        failed = true
        println(io.stdout, JSON.stringify({ error: { code: err.code, message: err.message } }))
      }
    }
  } finally {
    engine.bridge.close()
  }
  return failed ? 1 : 0
}
