// @suites: pg-all
// S3 credential pairs: admin API, CLI, sealed storage, revocation effective on the next request.
import fs from 'node:fs'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { ListBucketsCommand } from '@aws-sdk/client-s3'
import { tenantCommand } from '../src/cli/tenant'
import { databaseEnvOf, admin } from './helper'
import { makeS3, s3Client } from './s3-helper'

function io(dataDir: string) {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const read = (s: PassThrough) => (s.read() as Buffer | null)?.toString('utf8') ?? ''
  return { io: { env: { COFFER_DATA_DIR: dataDir, ...databaseEnvOf(dataDir) }, stdout, stderr }, out: () => read(stdout), err: () => read(stderr) }
}

t.test('admin API: create (secret once), list (ids only), revoke; foreign ids and missing key', async (t) => {
  const { app, tenant, credentials, dir } = await makeS3(t)
  t.match(credentials, { accessKeyId: /^CK[A-Z0-9]{18}$/, secretAccessKey: /^[A-Za-z0-9+/]{40}$/ })
  const second = await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials`, headers: admin })
  t.equal(second.statusCode, 201)
  t.match(second.json(), { accessKeyId: /^CK/, secretAccessKey: /.{40}/, createdAt: /^\d{4}-\d\d-\d\dT/ })
  const list = await app.inject({ method: 'GET', url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials`, headers: admin })
  t.equal(list.statusCode, 200)
  t.same(
    list
      .json()
      .credentials.map((c: { accessKeyId: string }) => c.accessKeyId)
      .sort(),
    [credentials.accessKeyId, second.json().accessKeyId].sort(),
  )
  t.notOk(list.body.includes(credentials.secretAccessKey))

  t.equal((await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials` })).statusCode, 401, 'admin key required')
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/v1/admin/tenants/00000000-0000-7000-8000-000000000000/s3-credentials', headers: admin })).statusCode,
    404,
  )
  t.equal((await app.inject({ method: 'GET', url: '/api/v1/admin/tenants/nope/s3-credentials', headers: admin })).statusCode, 404)
  t.equal(
    (await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials/CKNOTAKEY0000000000X`, headers: admin })).statusCode,
    404,
  )

  // Sealed at rest: neither the database nor its WAL holds a secret in the clear.
  for (const f of fs.readdirSync(dir).filter((n) => n.startsWith('coffer.db'))) {
    const raw = fs.readFileSync(path.join(dir, f))
    t.notOk(raw.includes(Buffer.from(credentials.secretAccessKey)), `${f} does not contain the secret`)
  }
})

t.test('CLI: tenant s3-credentials create, list, revoke on the data dir of a running server', async (t) => {
  const { dir, tenant, endpoint, config } = await makeS3(t)
  const c = io(dir)
  t.equal(await tenantCommand(['s3-credentials', 'create', tenant.id, '--json'], c.io), 0)
  const created = JSON.parse(c.out()) as { accessKeyId: string; secretAccessKey: string }
  t.match(created, { accessKeyId: /^CK[A-Z0-9]{18}$/ })
  // The server verifies a pair created by another process on the same data dir.
  const client = s3Client(endpoint, created, config.s3Region)
  t.teardown(() => client.destroy())
  t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [])
  t.equal(await tenantCommand(['s3-credentials', 'list', tenant.id], c.io), 0)
  t.match(c.out(), created.accessKeyId)
  t.equal(await tenantCommand(['s3-credentials', 'revoke', tenant.id, created.accessKeyId], c.io), 0)
  t.match(c.out(), /Revoked/)
  await t.rejects(client.send(new ListBucketsCommand({})), { name: 'InvalidAccessKeyId' }, 'revocation is effective on the next request')
  t.equal(await tenantCommand(['s3-credentials', 'revoke', tenant.id, created.accessKeyId], c.io), 1)
  t.match(c.err(), /No such S3 credential/)
})

t.test('verified pairs are cached, yet a rename, a revocation and a tenant deletion show on the very next request', async (t) => {
  const { app, tenant, credentials, endpoint, config, client } = await makeS3(t)
  const second = (await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials`, headers: admin })).json()
  const other = s3Client(endpoint, second, config.s3Region)
  t.teardown(() => other.destroy())
  // Both pairs verified twice: the second request of each is served from the cache of opened secrets.
  for (let i = 0; i < 2; i++) {
    t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [])
    t.same((await other.send(new ListBucketsCommand({}))).Buckets ?? [], [])
  }
  // A rename is a change of the tenant the cache holds: the next answer names it anew.
  const renamed = await app.inject({ method: 'PATCH', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin, payload: { name: 'renamed-for-s3' } })
  t.equal(renamed.statusCode, 200)
  t.equal((await client.send(new ListBucketsCommand({}))).Owner?.DisplayName, 'renamed-for-s3', 'the owner is the renamed tenant at once')
  const revoked = await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials/${credentials.accessKeyId}`, headers: admin })
  t.equal(revoked.statusCode, 204)
  await t.rejects(client.send(new ListBucketsCommand({})), { name: 'InvalidAccessKeyId' }, 'a revoked pair is refused at once')
  t.same((await other.send(new ListBucketsCommand({}))).Buckets ?? [], [], 'the other pair still works')
  t.equal((await app.inject({ method: 'DELETE', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin })).statusCode, 204)
  await t.rejects(other.send(new ListBucketsCommand({})), { name: 'InvalidAccessKeyId' }, "a deleted tenant's pairs are refused at once")
})

t.test('CLI: a tenant deleted by another process has its cached pairs refused on the next request', async (t) => {
  const { dir, tenant, client } = await makeS3(t)
  t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [])
  t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [], 'verified from the cache')
  const c = io(dir)
  t.equal(await tenantCommand(['delete', tenant.id, '--yes'], c.io), 0, c.err())
  await t.rejects(client.send(new ListBucketsCommand({})), { name: 'InvalidAccessKeyId' })
})
