// @suites: pg-all
import t from 'tap'
import path from 'node:path'
import { admin, makeApp, tempDir } from './helper'
import { openDatabase } from '../src/db/database'
import { MIGRATIONS } from '../src/db/migrations'
import { ensureDataDir } from '../src/lib/data-dir'
import { createCore } from '../src/core'
import { loadConfig } from '../src/config'

// #12 item 12: tenant names are one name under Unicode case folding and NFC normalisation.

const SAME: string[][] = [
  ['Äpfel', 'äPFEL', 'A\u0308pfel', 'a\u0308PFEL'],
  ['ΟΔΟΣ', 'οδος', 'οδοσ', 'Οδος'],
  ['Straße', 'STRASSE', 'strasse'],
  ['Ｃａｆé', 'ｃａｆe\u0301'],
]

t.test('names that differ only in case or normalisation are the same tenant name', async (t) => {
  const { app } = await makeApp(t)
  for (const group of SAME) {
    const [first, ...others] = group
    const created = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: first } })
    t.equal(created.statusCode, 201, first!)
    for (const other of others) {
      const res = await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: other } })
      t.equal(res.statusCode, 409, `${JSON.stringify(other)} is ${JSON.stringify(first)}`)
      t.equal(res.json().error.code, 'CONFLICT')
      t.match(res.json().error.message, first!.normalize('NFC'))
    }
  }
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/v1/admin/tenants', headers: admin, payload: { name: 'Apfel' } })).statusCode,
    201,
    'a different letter is a different name',
  )
})

t.test('the migration keeps existing tenants whose names now collide, and refuses new ones', async (t) => {
  const dir = tempDir(t)
  const dataDir = ensureDataDir(dir)
  const before = openDatabase(
    dataDir.db,
    dataDir.root,
    MIGRATIONS.filter((m) => m.version < 5),
  )
  const insert = before.prepare(
    `INSERT INTO tenants (id, name, key_hash, key_kind, webhook_secret, quota_bytes, allowed_types, created_at) VALUES (?, ?, randomblob(32), 'live', 'whsec_x', 1000, '[]', ?)`,
  )
  insert.run('01890000-0000-7000-8000-000000000001', 'Äpfel', 1)
  insert.run('01890000-0000-7000-8000-000000000002', 'A\u0308PFEL', 2)
  insert.run('01890000-0000-7000-8000-000000000003', 'Birne', 3)
  before.close()
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  t.teardown(() => core.close())
  t.same(
    core.tenants
      .list({ limit: 100 })
      .tenants.map((x) => x.name)
      .reverse(),
    ['Äpfel', 'A\u0308PFEL', 'Birne'],
    'every tenant survives the migration',
  )
  t.throws(() => core.tenants.create({ name: 'ÄPFEL' }), { code: 'CONFLICT', message: /"Äpfel"/ }, 'the oldest owns the name')
  t.throws(() => core.tenants.create({ name: 'birne' }), { code: 'CONFLICT' })
  t.ok(core.tenants.create({ name: 'Kirsche' }).tenant.id)
  t.ok(path.isAbsolute(dataDir.db))
})
