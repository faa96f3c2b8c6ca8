// @suites: pg-all
// A tenant's own S3 credentials through the tenant API (#31): create (the secret once), list,
// revoke (refused on the S3 front at the next request), another tenant's pairs out of reach, the
// admin's per-tenant switch (403 SELF_SERVICE_DISABLED), and bad input as 4xx envelopes.
import t from 'tap'
import { ListBucketsCommand, PutObjectCommand, GetObjectCommand, CreateBucketCommand } from '@aws-sdk/client-s3'
import { admin } from './helper'
import { createTenantWithS3, makeS3, s3Client } from './s3-helper'
import { SELF_SERVICE_LIMIT } from '../src/services/s3-credentials'

const URL = '/api/v1/tenant/s3-credentials'

t.test('a tenant creates a pair (secret once), uses it over S3, lists ids only, revokes it: refused on the next request', async (t) => {
  const { app, tenant, credentials, endpoint, config } = await makeS3(t)
  const list0 = await app.inject({ url: URL, headers: tenant.headers })
  t.equal(list0.statusCode, 200)
  t.same(
    list0.json().credentials.map((c: { accessKeyId: string }) => c.accessKeyId),
    [credentials.accessKeyId],
    "the pair the admin made is the tenant's too",
  )

  const res = await app.inject({ method: 'POST', url: URL, headers: tenant.headers })
  t.equal(res.statusCode, 201)
  const created = res.json() as { accessKeyId: string; secretAccessKey: string; createdAt: string }
  t.match(created, { accessKeyId: /^CK[A-Z0-9]{18}$/, secretAccessKey: /^[A-Za-z0-9+/]{40}$/, createdAt: /^\d{4}-\d\d-\d\dT.*Z$/ })

  const list = await app.inject({ url: URL, headers: tenant.headers })
  t.same(
    list
      .json()
      .credentials.map((c: { accessKeyId: string }) => c.accessKeyId)
      .sort(),
    [credentials.accessKeyId, created.accessKeyId].sort(),
  )
  t.notOk(list.body.includes(created.secretAccessKey), 'the list never carries a secret')
  const adminList = await app.inject({ url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials`, headers: admin })
  t.ok(adminList.body.includes(created.accessKeyId), 'the admin sees the pair the tenant made')

  // The new pair works on the S3 front, as the tenant.
  const client = s3Client(endpoint, created, config.s3Region)
  t.teardown(() => client.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'own-keys' }))
  await client.send(new PutObjectCommand({ Bucket: 'own-keys', Key: 'a.txt', Body: 'hello' }))
  t.same(
    ((await client.send(new ListBucketsCommand({}))).Buckets ?? []).map((b) => b.Name),
    ['own-keys'],
  )

  const del = await app.inject({ method: 'DELETE', url: `${URL}/${created.accessKeyId}`, headers: tenant.headers })
  t.equal(del.statusCode, 204)
  t.equal(del.body, '')
  await t.rejects(client.send(new GetObjectCommand({ Bucket: 'own-keys', Key: 'a.txt' })), { name: 'InvalidAccessKeyId' }, 'revoked: refused at once')
  t.same(
    (await app.inject({ url: URL, headers: tenant.headers })).json().credentials.map((c: { accessKeyId: string }) => c.accessKeyId),
    [credentials.accessKeyId],
  )
  const again = await app.inject({ method: 'DELETE', url: `${URL}/${created.accessKeyId}`, headers: tenant.headers })
  t.equal(again.statusCode, 404)
  t.equal(again.json().error.code, 'NOT_FOUND')
})

t.test("tenants never see nor revoke each other's pairs", async (t) => {
  const { app, tenant: alice, credentials: aliceCredentials, client } = await makeS3(t)
  const bob = await createTenantWithS3(app)
  const bobList = (await app.inject({ url: URL, headers: bob.headers })).json()
  t.same(
    bobList.credentials.map((c: { accessKeyId: string }) => c.accessKeyId),
    [bob.credentials.accessKeyId],
  )
  const res = await app.inject({ method: 'DELETE', url: `${URL}/${aliceCredentials.accessKeyId}`, headers: bob.headers })
  t.equal(res.statusCode, 404, "another tenant's pair: not found")
  t.same(res.json().error, { code: 'NOT_FOUND', message: 'No such S3 credential for this tenant', details: {} })
  t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [], "alice's pair still works")
  t.ok((await app.inject({ url: URL, headers: alice.headers })).body.includes(aliceCredentials.accessKeyId))
})

t.test('the admin turns self-service off per tenant: 403 SELF_SERVICE_DISABLED, existing pairs keep working; on again', async (t) => {
  const { app, tenant, credentials, client } = await makeS3(t)
  const other = await createTenantWithS3(app)
  const shown = await app.inject({ url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin })
  t.equal(shown.json().selfServiceS3Credentials, true, 'on by default')

  const off = await app.inject({ method: 'PATCH', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin, payload: { selfServiceS3Credentials: false } })
  t.equal(off.statusCode, 200)
  t.equal(off.json().selfServiceS3Credentials, false)
  const listed = (await app.inject({ url: '/api/v1/admin/tenants', headers: admin })).json().tenants
  t.same(
    listed.map((x: { id: string; selfServiceS3Credentials: boolean }) => [x.id, x.selfServiceS3Credentials]).sort(),
    [
      [tenant.id, false],
      [other.id, true],
    ].sort(),
    'the switch is per tenant',
  )

  for (const [method, url] of [
    ['GET', URL],
    ['POST', URL],
    ['DELETE', `${URL}/${credentials.accessKeyId}`],
  ] as const) {
    const res = await app.inject({ method, url, headers: tenant.headers })
    t.equal(res.statusCode, 403, `${method} ${url}`)
    t.match(res.json(), { error: { code: 'SELF_SERVICE_DISABLED', message: /administrator has turned off/, details: { setting: 'selfServiceS3Credentials' } } })
  }
  t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [], 'the pairs it has keep working: revoking is a separate act')
  t.equal((await app.inject({ method: 'POST', url: URL, headers: other.headers })).statusCode, 201, 'another tenant is unaffected')

  const on = await app.inject({ method: 'PATCH', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin, payload: { selfServiceS3Credentials: true } })
  t.equal(on.json().selfServiceS3Credentials, true)
  t.equal((await app.inject({ url: URL, headers: tenant.headers })).statusCode, 200, 'allowed again at once')

  // Created off from the start.
  const made = await app.inject({
    method: 'POST',
    url: '/api/v1/admin/tenants',
    headers: admin,
    payload: { name: 'no-self-service', selfServiceS3Credentials: false },
  })
  t.equal(made.statusCode, 201)
  const key = { authorization: `Bearer ${made.json().apiKey}` }
  t.equal((await app.inject({ method: 'POST', url: URL, headers: key })).statusCode, 403)
})

t.test('bad input: 4xx envelopes, never a 500', async (t) => {
  const { app, tenant } = await makeS3(t)
  const bad = await app.inject({ method: 'PATCH', url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin, payload: { selfServiceS3Credentials: 'no' } })
  t.equal(bad.statusCode, 400)
  t.match(bad.json().error, { code: 'VALIDATION_ERROR', details: { errors: [{ path: '/selfServiceS3Credentials' }] } })
  t.equal((await app.inject({ url: `/api/v1/admin/tenants/${tenant.id}`, headers: admin })).json().selfServiceS3Credentials, true, 'nothing changed')

  const anonymous = await app.inject({ method: 'POST', url: URL })
  t.equal(anonymous.statusCode, 401)
  t.equal(anonymous.json().error.code, 'UNAUTHORIZED')
  t.equal((await app.inject({ url: URL, headers: admin })).statusCode, 401, 'the admin key is not a tenant key')
  for (const id of ['nope', 'CK' + 'Z'.repeat(18), '%00', 'x'.repeat(999)]) {
    const res = await app.inject({ method: 'DELETE', url: `${URL}/${encodeURIComponent(id)}`, headers: tenant.headers })
    t.equal(res.statusCode, 404, `DELETE ${id.slice(0, 20)}`)
    t.equal(res.json().error.code, 'NOT_FOUND')
  }
  const json = await app.inject({ method: 'POST', url: URL, headers: { ...tenant.headers, 'content-type': 'application/json' }, payload: '{' })
  t.equal(json.statusCode, 400, 'a malformed body: 400')

  // At most SELF_SERVICE_LIMIT pairs by self-service (one made by the admin already).
  for (let i = 1; i < SELF_SERVICE_LIMIT; i++) t.equal((await app.inject({ method: 'POST', url: URL, headers: tenant.headers })).statusCode, 201)
  const over = await app.inject({ method: 'POST', url: URL, headers: tenant.headers })
  t.equal(over.statusCode, 409)
  t.match(over.json().error, { code: 'CONFLICT', message: /revoke one first/, details: { limit: SELF_SERVICE_LIMIT } })
  t.equal((await app.inject({ url: URL, headers: tenant.headers })).json().credentials.length, SELF_SERVICE_LIMIT, 'none made past the limit')
  t.equal(
    (await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${tenant.id}/s3-credentials`, headers: admin })).statusCode,
    201,
    'the admin is not limited',
  )
})
