// The PostgreSQL fixture (scripts/pg-fixture.sh) as the tests see it (#30). `start` is idempotent
// and takes a fraction of a second on a running server, so each test file that needs one asks for
// it; CI starts it once in .ci/run (and stops it at the end), a developer's stays up until
// `scripts/pg-fixture.sh stop`. Each test gets a schema of its own (freshSchema), dropped after it,
// so test files running in parallel on one database never see each other's tables.
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import type { Test } from 'tap'
import pg from 'pg'

const SCRIPT = path.resolve(__dirname, '..', '..', 'scripts', 'pg-fixture.sh')

let cached: { url: string } | { unavailable: string } | undefined

/** The fixture's COFFER_DATABASE_URL, or why there is none (COFFER_TEST_PG=off, no PostgreSQL and no root). */
export function pgFixture(): { url: string } | { unavailable: string } {
  if (cached) return cached
  if (process.env.COFFER_TEST_PG === 'off') return (cached = { unavailable: 'COFFER_TEST_PG=off' })
  const r = spawnSync('bash', [SCRIPT, 'start'], { encoding: 'utf8', timeout: 15 * 60_000 })
  const url = /^COFFER_DATABASE_URL=(.+)$/m.exec(r.stdout ?? '')?.[1]
  if (r.status !== 0 || url === undefined) {
    const why = `scripts/pg-fixture.sh start failed (exit ${r.status ?? r.signal}): ${(r.stderr ?? '').trim().split('\n').slice(-3).join(' | ')}`
    return (cached = { unavailable: why })
  }
  return (cached = { url })
}

/**
 * Runs `body` with the fixture's URL, or skips visibly with the reason it is unavailable; under
 * CI=true an unavailable fixture fails instead (CI starts it: its absence is a broken run).
 */
export function withPg(t: Test, name: string, body: (url: string) => void): void {
  const fixture = pgFixture()
  if ('url' in fixture) return body(fixture.url)
  if (process.env.CI === 'true') t.fail(`the PostgreSQL fixture is required in CI: ${fixture.unavailable}`)
  else t.test(name, { skip: `needs the PostgreSQL fixture (scripts/pg-fixture.sh): ${fixture.unavailable}` }, () => {})
}

/**
 * A new empty schema for one test, dropped at its end: the URL it returns puts it first on the
 * search path of every connection made with it (libpq's `options`), so migrations and repositories
 * create and find their tables there.
 */
export async function freshSchema(t: Test, url: string): Promise<string> {
  const schema = `t_${randomBytes(6).toString('hex')}`
  await admin(url, `CREATE SCHEMA ${schema}`)
  t.teardown(() => admin(url, `DROP SCHEMA ${schema} CASCADE`))
  const u = new URL(url)
  u.searchParams.set('options', `-c search_path=${schema}`)
  return u.toString()
}

/** One statement on a connection of its own (async `pg`: the test's side, not the code under test). */
export async function admin(url: string, sql: string, params: unknown[] = []): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return await c.query(sql, params)
  } finally {
    await c.end()
  }
}
