// @suites: pg-all
// CORS on the S3 listener (#26): Put/Get/DeleteBucketCors, the unsigned preflight answered from
// the bucket's rules, and the Access-Control-* headers on actual responses, errors included.
import t from 'tap'
import {
  CreateBucketCommand,
  DeleteBucketCorsCommand,
  GetBucketCorsCommand,
  PutBucketCorsCommand,
  PutObjectCommand,
  GetObjectCommand,
} from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { createTenantWithS3, makeS3, s3Client, s3Error, sendSigned } from './s3-helper'

const code = (body: string) => /<Code>([^<]*)<\/Code>/.exec(body)?.[1]

async function options(url: string, headers: Record<string, string>) {
  const res = await fetch(url, { method: 'OPTIONS', headers })
  return { status: res.status, headers: res.headers, body: await res.text() }
}

const RULES = [
  {
    ID: 'app',
    AllowedOrigins: ['https://*.app.example'],
    AllowedMethods: ['GET', 'PUT'],
    AllowedHeaders: ['Content-*', 'x-amz-meta-*'],
    ExposeHeaders: ['ETag', 'x-amz-request-id'],
    MaxAgeSeconds: 600,
  },
  { AllowedOrigins: ['*'], AllowedMethods: ['HEAD'] },
]

t.test('Put/Get/DeleteBucketCors round trip with the SDK; no configuration is 404 NoSuchCORSConfiguration', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'web' }))
  t.same(await s3Error(client.send(new GetBucketCorsCommand({ Bucket: 'web' }))), { name: 'NoSuchCORSConfiguration', status: 404 })
  await client.send(new PutBucketCorsCommand({ Bucket: 'web', CORSConfiguration: { CORSRules: RULES } }))
  const got = await client.send(new GetBucketCorsCommand({ Bucket: 'web' }))
  t.same(got.CORSRules, [RULES[0], { AllowedOrigins: ['*'], AllowedMethods: ['HEAD'] }])
  t.equal((await client.send(new DeleteBucketCorsCommand({ Bucket: 'web' }))).$metadata.httpStatusCode, 204)
  t.same(await s3Error(client.send(new GetBucketCorsCommand({ Bucket: 'web' }))), { name: 'NoSuchCORSConfiguration', status: 404 })
  t.same(await s3Error(client.send(new GetBucketCorsCommand({ Bucket: 'missing' }))), { name: 'NoSuchBucket', status: 404 })

  // What AWS refuses: an unknown method, two wildcards in an origin, no rule, over 100 rules.
  const refused = [
    [{ AllowedOrigins: ['*'], AllowedMethods: ['PATCH'] }],
    [{ AllowedOrigins: ['https://*.*.example'], AllowedMethods: ['GET'] }],
    [{ AllowedOrigins: ['*'], AllowedMethods: ['GET'], AllowedHeaders: ['**'] }],
    Array.from({ length: 101 }, () => ({ AllowedOrigins: ['*'], AllowedMethods: ['GET'] })),
  ]
  const answers = []
  for (const rules of refused) answers.push(await s3Error(client.send(new PutBucketCorsCommand({ Bucket: 'web', CORSConfiguration: { CORSRules: rules } }))))
  t.same(answers, [
    { name: 'InvalidRequest', status: 400 },
    { name: 'InvalidRequest', status: 400 },
    { name: 'InvalidRequest', status: 400 },
    { name: 'MalformedXML', status: 400 },
  ])
  t.same(await s3Error(client.send(new GetBucketCorsCommand({ Bucket: 'web' }))), { name: 'NoSuchCORSConfiguration', status: 404 }, 'nothing was stored')
})

t.test('a preflight is answered from the rules, unsigned; 403 when none allows it, 400 without Origin or method', async (t) => {
  const ctx = await makeS3(t)
  const { client, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'web' }))
  await client.send(new CreateBucketCommand({ Bucket: 'plain' }))
  await client.send(new PutBucketCorsCommand({ Bucket: 'web', CORSConfiguration: { CORSRules: RULES } }))

  const ok = await options(`${endpoint}/web/photo.jpg`, {
    Origin: 'https://www.app.example',
    'Access-Control-Request-Method': 'PUT',
    'Access-Control-Request-Headers': 'content-type, X-Amz-Meta-Owner',
  })
  t.equal(ok.status, 200)
  t.equal(ok.headers.get('access-control-allow-origin'), 'https://www.app.example')
  t.equal(ok.headers.get('access-control-allow-methods'), 'GET, PUT')
  t.equal(ok.headers.get('access-control-allow-headers'), 'content-type, x-amz-meta-owner')
  t.equal(ok.headers.get('access-control-expose-headers'), 'ETag, x-amz-request-id')
  t.equal(ok.headers.get('access-control-max-age'), '600')
  t.equal(ok.headers.get('access-control-allow-credentials'), 'true')
  t.match(ok.headers.get('vary'), /Origin/)

  const star = await options(`${endpoint}/web/x`, { Origin: 'https://anywhere.example', 'Access-Control-Request-Method': 'HEAD' })
  t.equal(star.status, 200)
  t.equal(star.headers.get('access-control-allow-origin'), '*')
  t.equal(star.headers.get('access-control-allow-credentials'), null)

  const refusals: [string, string, Record<string, string>][] = [
    ['an origin no rule allows', `${endpoint}/web/x`, { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'GET' }],
    ['a method no rule allows', `${endpoint}/web/x`, { Origin: 'https://www.app.example', 'Access-Control-Request-Method': 'DELETE' }],
    [
      'a header no rule allows',
      `${endpoint}/web/x`,
      { Origin: 'https://www.app.example', 'Access-Control-Request-Method': 'PUT', 'Access-Control-Request-Headers': 'authorization' },
    ],
    ['a bucket without CORS', `${endpoint}/plain/x`, { Origin: 'https://www.app.example', 'Access-Control-Request-Method': 'GET' }],
    ['a bucket that does not exist', `${endpoint}/nowhere/x`, { Origin: 'https://www.app.example', 'Access-Control-Request-Method': 'GET' }],
  ]
  const bodies = new Set<string>()
  for (const [what, url, headers] of refusals) {
    const res = await options(url, headers)
    t.equal(res.status, 403, what)
    t.equal(code(res.body), 'AccessForbidden', what)
    t.equal(res.headers.get('access-control-allow-origin'), null, what)
    // The same document but for the request's own id, resource and method.
    bodies.add(res.body.replace(/<(RequestId|Resource|Method)>[^<]*<\/\1>/g, ''))
  }
  t.equal(bodies.size, 1, 'a missing bucket, one without CORS and a refusing rule answer alike')
  t.equal((await options(`${endpoint}/web/x`, { 'Access-Control-Request-Method': 'GET' })).status, 400)
  t.equal((await options(`${endpoint}/web/x`, { Origin: 'https://www.app.example' })).status, 400)

  // A presigned URL's preflight carries its query: the access key names the tenant whose bucket it is.
  const other = await createTenantWithS3(ctx.app)
  const otherClient = s3Client(endpoint, other.credentials)
  t.teardown(() => otherClient.destroy())
  await otherClient.send(new CreateBucketCommand({ Bucket: 'web' }))
  const url = await getSignedUrl(otherClient, new PutObjectCommand({ Bucket: 'web', Key: 'k' }), { expiresIn: 600 })
  const viaOther = await options(url, { Origin: 'https://www.app.example', 'Access-Control-Request-Method': 'PUT' })
  t.equal(viaOther.status, 403, "the other tenant's bucket of the same name has no CORS")
  const mine = await getSignedUrl(client, new PutObjectCommand({ Bucket: 'web', Key: 'k' }), { expiresIn: 600 })
  t.equal((await options(mine, { Origin: 'https://www.app.example', 'Access-Control-Request-Method': 'PUT' })).status, 200)
})

t.test('actual responses, errors included, carry the CORS headers when the Origin is allowed', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'web' }))
  await client.send(new PutBucketCorsCommand({ Bucket: 'web', CORSConfiguration: { CORSRules: RULES } }))
  await client.send(new PutObjectCommand({ Bucket: 'web', Key: 'a.txt', Body: 'hello' }))
  const origin = 'https://www.app.example'

  const get = await fetch(await getSignedUrl(client, new GetObjectCommand({ Bucket: 'web', Key: 'a.txt' }), { expiresIn: 600 }), {
    headers: { Origin: origin },
  })
  t.equal(get.status, 200)
  t.equal(await get.text(), 'hello')
  t.equal(get.headers.get('access-control-allow-origin'), origin)
  t.equal(get.headers.get('access-control-expose-headers'), 'ETag, x-amz-request-id')
  t.equal(get.headers.get('access-control-allow-credentials'), 'true')
  t.match(get.headers.get('vary'), /Origin/)

  // Errors a page must read: 404, 412, and a refused signature (403, before any tenant is known).
  const missing = await fetch(await getSignedUrl(client, new GetObjectCommand({ Bucket: 'web', Key: 'none' }), { expiresIn: 600 }), {
    headers: { Origin: origin },
  })
  t.equal(missing.status, 404)
  t.equal(missing.headers.get('access-control-allow-origin'), origin)
  const failed = await sendSigned(ctx, { method: 'GET', path: '/web/a.txt', headers: { origin, 'if-match': '"nope"' } })
  t.equal(failed.status, 412)
  t.equal(failed.headers['access-control-allow-origin'], origin)
  const badUrl = (await getSignedUrl(client, new GetObjectCommand({ Bucket: 'web', Key: 'a.txt' }), { expiresIn: 600 })).replace(
    /X-Amz-Signature=[0-9a-f]+/,
    `X-Amz-Signature=${'0'.repeat(64)}`,
  )
  const forged = await fetch(badUrl, { headers: { Origin: origin } })
  t.equal(forged.status, 403)
  t.equal(forged.headers.get('access-control-allow-origin'), origin)

  // No header for an origin or a method no rule allows, nor without Origin.
  const evil = await fetch(await getSignedUrl(client, new GetObjectCommand({ Bucket: 'web', Key: 'a.txt' }), { expiresIn: 600 }), {
    headers: { Origin: 'https://evil.example' },
  })
  t.equal(evil.headers.get('access-control-allow-origin'), null)
  t.equal(evil.headers.get('vary'), null)
  const del = await sendSigned(ctx, { method: 'DELETE', path: '/web/a.txt', headers: { origin } })
  t.equal(del.status, 204)
  t.equal(del.headers['access-control-allow-origin'], undefined, 'DELETE is no method of the rules')
  const none = await sendSigned(ctx, { method: 'GET', path: '/web/none' })
  t.equal(none.headers['access-control-allow-origin'], undefined)
})
