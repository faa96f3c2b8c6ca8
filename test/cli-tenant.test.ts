import t from 'tap'
import { PassThrough } from 'node:stream'
import { tenantCommand } from '../src/cli/tenant'
import { UsageError } from '../src/cli/io'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { tempDir } from './helper'

function io(dataDir: string) {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const read = (s: PassThrough) => (s.read() as Buffer | null)?.toString('utf8') ?? ''
  return { io: { env: { COFFER_DATA_DIR: dataDir }, stdout, stderr }, out: () => read(stdout), err: () => read(stderr) }
}

t.test('tenant create prints the key once and the key authenticates', async (t) => {
  const dir = tempDir(t)
  const c = io(dir)
  t.equal(await tenantCommand(['create', '--name', 'CLI Co', '--quota-bytes', '1234', '--types', 'image/png,application/pdf'], c.io), 0)
  const text = c.out()
  const key = /api key:\s+(sk_live_\S+)/.exec(text)?.[1]
  t.ok(key, text)
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  t.teardown(() => core.close())
  const tenant = core.tenants.authenticate(key!)
  t.equal(tenant?.name, 'CLI Co')
  t.equal(tenant?.quotaBytes, 1234)
  t.same(tenant?.allowedFileTypes, ['image/png', 'application/pdf'])
})

t.test('tenant create --json, list, regenerate-key', async (t) => {
  const dir = tempDir(t)
  const c = io(dir)
  t.equal(await tenantCommand(['create', '--name', 'A', '--json'], c.io), 0)
  const created = JSON.parse(c.out())
  t.match(created, { name: 'A', quotaBytes: 524288000, apiKey: /^sk_live_/, webhookSecret: /^whsec_/ })
  t.equal(await tenantCommand(['list', '--json'], c.io), 0)
  const list = JSON.parse(c.out())
  t.equal(list.length, 1)
  t.equal(list[0].id, created.id)
  t.notOk('apiKey' in list[0], 'list never shows keys')
  t.equal(await tenantCommand(['list'], c.io), 0)
  t.match(c.out(), new RegExp(`${created.id}.*A`))
  t.equal(await tenantCommand(['regenerate-key', created.id, '--json'], c.io), 0)
  const regen = JSON.parse(c.out())
  t.not(regen.apiKey, created.apiKey)
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  t.teardown(() => core.close())
  t.notOk(core.tenants.authenticate(created.apiKey), 'old key revoked')
  t.equal(core.tenants.authenticate(regen.apiKey)?.id, created.id)
})

t.test('tenant command errors', async (t) => {
  const dir = tempDir(t)
  const c = io(dir)
  await t.rejects(tenantCommand(['create'], c.io), UsageError)
  await t.rejects(tenantCommand(['create', '--name', ''], c.io), { message: /--name/ })
  await t.rejects(tenantCommand(['create', '--name', 'x', '--quota-bytes', '-5'], c.io), { message: /--quota-bytes/ })
  await t.rejects(tenantCommand(['create', '--name', 'x', '--types', 'text/html'], c.io), { message: /--types/ })
  await t.rejects(tenantCommand(['create', '--name', 'x', '--bogus'], c.io), { message: /bogus/ })
  await t.rejects(tenantCommand(['frobnicate'], c.io), { message: /unknown tenant command/ })
  t.equal(await tenantCommand(['create', '--name', 'dup'], c.io), 0)
  c.out()
  t.equal(await tenantCommand(['create', '--name', 'dup'], c.io), 1, 'duplicate name exits 1')
  t.match(c.err(), /already exists/)
  t.equal(await tenantCommand(['regenerate-key', '01890000-0000-7000-8000-000000000000'], c.io), 1)
  t.match(c.err(), /Tenant not found/)
})
