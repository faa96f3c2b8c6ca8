// @suites: pg-all
// One request lifecycle for both fronts (http/request-lifecycle.ts, #11): what each front's
// clients rely on, over real sockets: request ids on answers and log lines, the shutdown refusal
// in the front's own error shape, requests in flight finishing, metrics, no secret in the log.
import t, { type Test } from 'tap'
import http from 'node:http'
import net from 'node:net'
import { once } from 'node:events'
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { loadConfig } from '../src/config'
import { createLogger } from '../src/lib/logger'
import { startServer } from '../src/server'
import { captureLogs, tempDir, testDatabase } from './helper'
import { makeS3, pattern, s3Client, signedRequest } from './s3-helper'

async function start(t: Test, dir = tempDir(t)) {
  const config = loadConfig({ COFFER_LOG_LEVEL: 'debug' }, { port: '0', 's3-port': '0', 'data-dir': dir })
  const { stream, lines } = captureLogs()
  const database = await testDatabase(t, dir)
  const server = await startServer(config, createLogger(config.logLevel, stream), database ? { database } : {})
  t.teardown(() => server.close())
  return { server, dir, logs: lines }
}

const portOf = (url: string) => Number(new URL(url).port)

/** A connection that has sent half a request: busy, not idle, so a closing server keeps it. */
async function halfRequest(url: string, head: string) {
  const socket = net.connect(portOf(url), '127.0.0.1')
  await once(socket, 'connect')
  socket.write(head)
  let answer = ''
  socket.setEncoding('utf8')
  socket.on('data', (c: string) => (answer += c))
  return {
    /** Sends the end of the headers; resolves with the whole answer once the server closes. */
    finish: async () => {
      socket.write('\r\n')
      await once(socket, 'close')
      return answer
    },
  }
}

async function until(cond: () => boolean, what: string) {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10))
  if (!cond()) throw new Error(`timed out waiting for ${what}`)
}

t.test('during shutdown each front refuses new requests in its own error shape, and an S3 upload in flight completes and is kept', async (t) => {
  const { server, dir } = await start(t)
  const s3 = server.s3!
  const { tenant } = server.core.tenants.create({ name: 'lifecycle' })
  const credentials = server.core.s3Credentials.create(tenant.id)
  const client = s3Client(s3.url, credentials)
  t.teardown(() => client.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'shutdown' }))

  // An S3 PutObject whose body is half sent when the shutdown begins.
  const size = 128 * 1024
  const bytes = pattern(size)
  const signed = await signedRequest(
    { credentials, endpoint: s3.url },
    { method: 'PUT', path: '/shutdown/in-flight.bin', headers: { 'content-length': String(size) } },
  )
  const agent = new http.Agent({ keepAlive: true })
  t.teardown(() => agent.destroy())
  const put = http.request(`${s3.url}/shutdown/in-flight.bin`, { method: 'PUT', agent, headers: signed.headers as http.OutgoingHttpHeaders })
  const putAnswer = new Promise<{ status: number; headers: http.IncomingHttpHeaders } | Error>((resolve) => {
    put.on('response', (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }))
    })
    put.on('error', resolve)
  })
  put.write(bytes.subarray(0, size / 2))
  await until(() => s3.app.inFlightRequests() === 1, 'the S3 upload to be in flight')
  const scrape = await fetch(`${server.url}/metrics`)
  t.match(await scrape.text(), /^coffer_http_requests_in_flight 2$/m, 'the in-flight gauge adds both listeners: the S3 upload and the scrape')

  const lateApi = await halfRequest(server.url, 'GET /health HTTP/1.1\r\nHost: coffer\r\n')
  const lateS3 = await halfRequest(s3.url, 'GET /shutdown HTTP/1.1\r\nHost: coffer\r\n')
  let closed = false
  const closing = server.close().then(() => (closed = true))
  await new Promise((r) => setTimeout(r, 100))
  t.equal(closed, false, 'close waits for the S3 request in flight')
  t.equal(s3.app.inFlightRequests(), 1, 'the S3 listener counts its request in flight')

  const api = await lateApi.finish()
  t.match(api, /^HTTP\/1\.1 503 /)
  t.match(api, /connection: close/i)
  t.match(api, /x-request-id: [0-9a-f-]{36}/i, 'the API answer carries its request id')
  t.match(api, /"code":"NOT_READY"/, 'the API refuses in the contract envelope')

  const refused = await lateS3.finish()
  t.match(refused, /^HTTP\/1\.1 503 /)
  t.match(refused, /connection: close/i)
  t.match(refused, /content-type: application\/xml/i)
  t.match(refused, /<Error><Code>ServiceUnavailable<\/Code><Message>Coffer is shutting down; retry shortly<\/Message>/, 'S3 refuses in S3 XML')
  const requestId = /x-amz-request-id: ([0-9A-F]{16})/i.exec(refused)?.[1]
  t.ok(requestId, 'the S3 answer carries x-amz-request-id')
  t.match(refused, new RegExp(`<RequestId>${requestId}</RequestId>`), 'the same id as in the error document')
  t.match(refused, new RegExp(`x-amz-id-2: ${requestId}`, 'i'))
  t.notMatch(refused, /"code"/, 'no JSON envelope on the S3 listener')

  put.end(bytes.subarray(size / 2))
  const res = await putAnswer
  if (res instanceof Error) throw res
  t.equal(res.status, 200, 'the S3 upload in flight completes')
  t.equal(res.headers.connection, 'close', 'and its connection closes after the response')
  t.ok(res.headers.etag, 'with its ETag')
  await closing

  // Acknowledged means kept: a new server on the same data dir serves the object.
  const again = await start(t, dir)
  const reader = s3Client(again.server.s3!.url, credentials)
  t.teardown(() => reader.destroy())
  const got = await reader.send(new GetObjectCommand({ Bucket: 'shutdown', Key: 'in-flight.bin' }))
  t.same(Buffer.from(await got.Body!.transformToByteArray()), bytes)
})

t.test('each front logs one line per request with the request id its client saw, its tenant, and no secret; metrics count both', async (t) => {
  const ctx = await makeS3(t)
  const { app, logs, client, tenant, credentials } = ctx

  const listed = await app.inject({ url: '/api/v1/files', headers: { ...tenant.headers, 'x-request-id': 'trace-lifecycle-1' } })
  t.equal(listed.statusCode, 200)
  t.equal(listed.headers['x-request-id'], 'trace-lifecycle-1', 'the API keeps a sane caller request id')
  const apiLine = logs.find((l) => l.reqId === 'trace-lifecycle-1')
  t.match(apiLine, { msg: 'request completed', front: 'api', method: 'GET', url: '/api/v1/files', statusCode: 200, tenantId: tenant.id })

  await client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  const put = await client.send(new PutObjectCommand({ Bucket: 'logs', Key: 'a.txt', Body: 'hello' }))
  const putId = put.$metadata.requestId
  t.match(putId, /^[0-9A-F]{16}$/, 'the SDK reads the S3 request id')
  t.match(
    logs.find((l) => l.reqId === putId),
    {
      msg: 'request completed',
      front: 's3',
      method: 'PUT',
      url: '/logs/a.txt?x-id=PutObject',
      statusCode: 200,
      operation: 'PutObject',
      tenantId: tenant.id,
      payload: String,
    },
  )

  // A presigned GET: its signature is a credential in the URL.
  const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: 'logs', Key: 'a.txt' }), { expiresIn: 300 })
  const signature = new URL(url).searchParams.get('X-Amz-Signature')!
  const got = await fetch(url)
  t.equal(got.status, 200)
  t.equal(await got.text(), 'hello')
  const getLine = logs.find((l) => l.reqId === got.headers.get('x-amz-request-id'))
  t.match(getLine, { front: 's3', method: 'GET', statusCode: 200, tenantId: tenant.id, payload: 'presigned-unsigned' })
  t.match(getLine!.url, /X-Amz-Signature=\[REDACTED\]/)

  // A refused S3 request is logged too, with the id of its XML answer.
  const denied = await fetch(`${ctx.endpoint}/logs/a.txt`)
  t.equal(denied.status, 403)
  const deniedId = denied.headers.get('x-amz-request-id')
  t.match(await denied.text(), `<RequestId>${deniedId}</RequestId>`)
  const deniedLine = logs.find((l) => l.reqId === deniedId)
  t.match(deniedLine, { front: 's3', method: 'GET', statusCode: 403 })
  t.equal(deniedLine!.tenantId, undefined, 'no tenant: the request was not authenticated')

  const all = JSON.stringify(logs)
  t.notOk(all.includes(signature), 'the presigned signature is in no log line')
  t.notOk(all.includes(credentials.secretAccessKey), 'the secret access key is in no log line')
  t.notOk(all.includes(tenant.apiKey), 'the API key is in no log line')

  const metrics = await ctx.core.metrics.registry.metrics()
  // S3 requests are counted by operation (src/s3/operations.ts), also one refused before its signature was accepted.
  t.match(metrics, /coffer_http_requests_total\{method="PUT",route="s3:PutObject",status_code="200"\} 1\n/, 'S3 requests counted by operation')
  t.match(metrics, /coffer_http_requests_total\{method="GET",route="s3:GetObject",status_code="403"\} 1\n/)
  t.match(metrics, /coffer_http_requests_total\{method="PUT",route="s3:CreateBucket",status_code="200"\} 1\n/)
  t.match(metrics, /coffer_http_requests_total\{method="GET",route="\/api\/v1\/files",status_code="200"\} 1\n/, 'API requests by template')
})
