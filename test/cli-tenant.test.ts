// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
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
  const dir = servedDir(t)
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
  const dir = servedDir(t)
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
  const dir = servedDir(t)
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

/** A data dir with a database, as `coffer serve` leaves it. */
function servedDir(t: Parameters<typeof tempDir>[0]): string {
  const dir = tempDir(t)
  createCore(loadConfig({}, { 'data-dir': dir })).close()
  return dir
}

t.test('tenant show, update and list report usage; update validates its flags', async (t) => {
  const dir = servedDir(t)
  const c = io(dir)
  t.equal(await tenantCommand(['create', '--name', 'Library', '--json'], c.io), 0)
  const created = JSON.parse(c.out())
  t.equal(await tenantCommand(['show', created.id, '--json'], c.io), 0)
  t.same(JSON.parse(c.out()), {
    id: created.id,
    name: 'Library',
    quotaBytes: 524288000,
    usedBytes: 0,
    fileCount: 0,
    allowedFileTypes: created.allowedFileTypes,
    selfServiceS3Credentials: true,
    createdAt: created.createdAt,
  })
  t.equal(
    await tenantCommand(['update', created.id, '--quota-bytes', '10GiB', '--types', 'image/png, application/pdf', '--name', 'Big Library', '--json'], c.io),
    0,
  )
  t.match(JSON.parse(c.out()), { id: created.id, name: 'Big Library', quotaBytes: 10 * 2 ** 30, allowedFileTypes: ['image/png', 'application/pdf'] })
  // Self-service S3 credentials (#31): off, and a word other than on/off is a usage error.
  t.equal(await tenantCommand(['update', created.id, '--self-service-s3', 'off'], c.io), 0)
  t.match(c.out(), /self-service S3 credentials: off/)
  await t.rejects(tenantCommand(['update', created.id, '--self-service-s3', 'no'], c.io), { message: /--self-service-s3: must be on or off/ })
  t.equal(await tenantCommand(['update', created.id, '--quota-bytes', '2TB'], c.io), 0)
  t.match(c.out(), /used\/quota:\s+0\/2000000000000 bytes \(0\.0%\)/)
  t.equal(await tenantCommand(['show', created.id], c.io), 0)
  t.match(c.out(), /Tenant "Big Library"[\s\S]*files:\s+0[\s\S]*image\/png, application\/pdf/)
  t.equal(await tenantCommand(['list'], c.io), 0)
  t.match(c.out(), /FILES[\s\S]*0\/2000000000000 \(0\.0%\)\s+0\s+\S+\s+Big Library/)
  t.equal(await tenantCommand(['list', '--json'], c.io), 0)
  t.match(JSON.parse(c.out()), [{ id: created.id, usedBytes: 0, fileCount: 0 }])

  await t.rejects(tenantCommand(['update', created.id], c.io), { message: /at least one of/ })
  await t.rejects(tenantCommand(['update', created.id, '--quota-bytes=-1'], c.io), { message: /--quota-bytes must be a number of bytes/ })
  await t.rejects(tenantCommand(['update', created.id, '--quota-bytes', '12 parsecs'], c.io), UsageError)
  await t.rejects(tenantCommand(['update', created.id, '--types', 'text/html'], c.io), { message: /^--types: must be among: .* \(not "text\/html"\)/ })
  await t.rejects(tenantCommand(['update', created.id, '--types', ','], c.io), { message: /^--types: must list at least one file type/ })
  await t.rejects(tenantCommand(['update', created.id, '--name', ''], c.io), { message: /^--name: / })
  await t.rejects(tenantCommand(['show'], c.io), { message: /needs a TENANT_ID/ })
  t.equal(await tenantCommand(['create', '--name', 'Other'], c.io), 0)
  c.out()
  t.equal(await tenantCommand(['update', created.id, '--name', 'other'], c.io), 1, 'a taken name exits 1')
  t.match(c.err(), /already exists/)
  t.equal(await tenantCommand(['show', '01890000-0000-7000-8000-000000000000'], c.io), 1)
  t.match(c.err(), /Tenant not found/)
})

t.test('tenant delete needs --yes, then the key stops and the tenant is gone', async (t) => {
  const dir = servedDir(t)
  const c = io(dir)
  t.equal(await tenantCommand(['create', '--name', 'Gone', '--json'], c.io), 0)
  const created = JSON.parse(c.out())
  t.equal(await tenantCommand(['delete', created.id], c.io), 2, 'without --yes nothing happens')
  t.match(c.err(), /run again with --yes/)
  t.equal(await tenantCommand(['show', created.id, '--json'], c.io), 0, 'still there')
  c.out()
  t.equal(await tenantCommand(['delete', created.id, '--yes'], c.io), 0)
  t.match(c.out(), /Deleted tenant "Gone"/)
  t.equal(await tenantCommand(['show', created.id], c.io), 1)
  t.equal(await tenantCommand(['delete', created.id, '--yes'], c.io), 1)
  t.match(c.err(), /Tenant not found/)
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  t.teardown(() => core.close())
  t.notOk(core.tenants.authenticate(created.apiKey), 'key revoked')
  t.equal(await tenantCommand(['create', '--name', 'Gone'], c.io), 0, 'the name is free again')
})

t.test('tenant commands on a data dir that does not exist fail and create nothing', async (t) => {
  const parent = tempDir(t)
  const missing = `${parent}/nope`
  const c = io(missing)
  for (const args of [['list'], ['create', '--name', 'x'], ['show', '01890000-0000-7000-8000-000000000000']]) {
    await t.rejects(tenantCommand(args, c.io), { name: 'OperatorError', message: /data dir .*nope does not exist/ }, args.join(' '))
  }
  t.notOk(fs.existsSync(missing), 'nothing created')
  const empty = io(parent)
  await t.rejects(tenantCommand(['list'], empty.io), { name: 'OperatorError', message: /holds no Coffer data/ })
  t.same(fs.readdirSync(parent), [], 'an existing directory without coffer.db is left alone')
})
