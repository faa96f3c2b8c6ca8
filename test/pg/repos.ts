// What the repository tests on both databases share (#30): test/pg-repos*.test.ts run one
// scenario on SQLite, then on PostgreSQL, and require the same transcript from both.
import t, { type Test } from 'tap'
import path from 'node:path'
import { openConnection, openDatabase } from '../../src/db/database'
import { engineOf, type Engine } from '../../src/db/engine'
import { PgBridge } from '../../src/db/pg/bridge'
import { PgEngine } from '../../src/db/pg/engine'
import { migratePg } from '../../src/db/pg/migrate'
import { TenantsRepo } from '../../src/db/repos/tenants'
import { freshSchema, withPg } from './fixture'
import { tempDir } from '../helper'
import type { FilesRepo } from '../../src/db/repos/files'

export interface Databases {
  engine: Engine
  /** A second connection to the same database: another process, another node. */
  other: Engine
}

export const T1 = '00000000-0000-4000-8000-000000000001'
export const T2 = '00000000-0000-4000-8000-000000000002'
export const W1 = '00000000-0000-4000-8000-0000000000a1'
export const key = (n: number) => Buffer.alloc(32, n)

/** A migrated SQLite database in a temporary data dir, and a second connection to it. */
export async function sqlite(t: Test): Promise<Databases> {
  const dir = tempDir(t)
  const db = openDatabase(path.join(dir, 'coffer.db'), dir)
  const other = openConnection(path.join(dir, 'coffer.db'), dir)
  t.teardown(() => {
    other.close()
    db.close()
  })
  return { engine: engineOf(db), other: engineOf(other) }
}

/** A migrated schema of its own on the PostgreSQL fixture, and two bridge connections to it. */
export async function postgres(t: Test, url: string): Promise<Databases> {
  const schemaUrl = await freshSchema(t, url)
  const a = new PgBridge({ url: schemaUrl })
  const b = new PgBridge({ url: schemaUrl })
  t.teardown(() => {
    a.close()
    b.close()
  })
  migratePg(a)
  return { engine: new PgEngine(a), other: new PgEngine(b) }
}

/** Runs a repository's scenario on SQLite, then on PostgreSQL, whose transcript must be the same. */
export function onBoth(title: string, scenario: (t: Test, dbs: Databases) => unknown[]): void {
  t.test(`${title}: the same answers on SQLite and on PostgreSQL`, async (t) => {
    let onSqlite: unknown[] = []
    await t.test('SQLite', async (t) => {
      onSqlite = scenario(t, await sqlite(t))
    })
    withPg(t, 'PostgreSQL', (url) => {
      void t.test('PostgreSQL', async (t) => {
        t.same(scenario(t, await postgres(t, url)), onSqlite, "PostgreSQL's answers are SQLite's")
      })
    })
  })
}

/** Two tenants, for the repositories whose rows belong to one. */
export function twoTenants(engine: Engine): void {
  const tenants = new TenantsRepo(engine)
  const base = { keyKind: 'live' as const, webhookSecret: 'w', quotaBytes: 1_000_000, allowedFileTypes: [], createdAt: 1 }
  tenants.insert({ ...base, id: T1, name: 'one', keyHash: key(1) })
  tenants.insert({ ...base, id: T2, name: 'two', keyHash: key(2) })
}

/** A pending file's row for FilesRepo.insertPending: tenant T1, no workspace, 10 bytes; `over` changes any field. */
export const pending = (id: string, over: Partial<Parameters<FilesRepo['insertPending']>[0]> = {}): Parameters<FilesRepo['insertPending']>[0] => ({
  id,
  tenantId: T1,
  workspaceId: null,
  originalName: `${id}.bin`,
  fileType: 'application/octet-stream',
  sizeBytes: 10,
  declaredSize: null,
  context: '',
  tags: {},
  webhookUrl: null,
  uploadExpiresAt: 1_000,
  createdAt: 100,
  objectKey: null,
  ...over,
})
