// @suites: pg s3
// S3 server access logging through the AWS SDK v3: Put/GetBucketLogging and their refusals, and the
// delivery of AWS Server Access Log records into the target bucket (their fields, the key formats),
// never for the log writes themselves, per tenant, at a clean shutdown and on RGW's flush. The roll
// time is a second here (COFFER_S3_LOGGING_ROLL_SECONDS) unless a test needs it long.
import t from 'tap'
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketLoggingCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutBucketLoggingCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
  type LoggingEnabled,
  type S3Client,
} from '@aws-sdk/client-s3'
import { createTenantWithS3, makeS3, s3Client, s3Error, sendSigned } from './s3-helper'

const FAST = { COFFER_S3_LOGGING_ROLL_SECONDS: '1' }

const putLogging = (client: S3Client, Bucket: string, LoggingEnabled?: LoggingEnabled) =>
  client.send(new PutBucketLoggingCommand({ Bucket, BucketLoggingStatus: LoggingEnabled ? { LoggingEnabled } : {} }))

const NAMES = [
  'BucketOwner',
  'Bucket',
  'Time',
  'RemoteIP',
  'Requester',
  'RequestID',
  'Operation',
  'Key',
  'RequestURI',
  'HTTPStatus',
  'ErrorCode',
  'BytesSent',
  'ObjectSize',
  'TotalTime',
  'TurnAroundTime',
  'Referrer',
  'UserAgent',
  'VersionId',
  'HostId',
  'SignatureVersion',
  'CipherSuite',
  'AuthenticationType',
  'HostHeader',
  'TLSVersion',
  'AccessPointARN',
  'AclRequired',
] as const
type LogRecord = Record<(typeof NAMES)[number], string>

/** A record's fields: space-separated, a quoted or bracketed field taken whole. */
function parseRecord(line: string): LogRecord {
  const fields = line.match(/"(?:[^"\\]|\\.)*"|\[[^\]]*\]|\S+/g) ?? []
  if (fields.length !== NAMES.length) throw new Error(`a record of ${fields.length} fields: ${line}`)
  return Object.fromEntries(NAMES.map((n, i) => [n, fields[i]!])) as LogRecord
}

async function keysOf(client: S3Client, Bucket: string, Prefix?: string): Promise<string[]> {
  const res = await client.send(new ListObjectsV2Command({ Bucket, ...(Prefix !== undefined ? { Prefix } : {}) }))
  return (res.Contents ?? []).map((o) => o.Key!)
}

/** The log objects under `prefix` once there are at least `count` (polled, bounded). */
async function logObjects(client: S3Client, Bucket: string, prefix: string, count = 1, timeoutMs = 10_000): Promise<string[]> {
  const until = Date.now() + timeoutMs
  for (;;) {
    const keys = await keysOf(client, Bucket, prefix)
    if (keys.length >= count || Date.now() > until) return keys
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function recordsOf(client: S3Client, Bucket: string, keys: string[]): Promise<LogRecord[]> {
  const out: LogRecord[] = []
  for (const Key of keys) {
    const res = await client.send(new GetObjectCommand({ Bucket, Key }))
    const text = await res.Body!.transformToString()
    for (const line of text.split('\n')) if (line !== '') out.push(parseRecord(line))
  }
  return out
}

t.test('Put/GetBucketLogging: off is an empty status; the configuration as put, SimplePrefix by default; an empty status turns it off', async (t) => {
  const ctx = await makeS3(t, FAST)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'src' }))
  await client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  const off = await client.send(new GetBucketLoggingCommand({ Bucket: 'src' }))
  t.equal(off.LoggingEnabled, undefined)
  const raw = await sendSigned(ctx, { method: 'GET', path: '/src', query: { logging: '' } })
  t.equal(raw.status, 200)
  t.match(raw.body, /<BucketLoggingStatus xmlns="http:\/\/s3.amazonaws.com\/doc\/2006-03-01\/"(\/>|><\/BucketLoggingStatus>)$/)

  await putLogging(client, 'src', { TargetBucket: 'logs', TargetPrefix: 'access/' })
  t.same((await client.send(new GetBucketLoggingCommand({ Bucket: 'src' }))).LoggingEnabled, {
    TargetBucket: 'logs',
    TargetPrefix: 'access/',
    TargetObjectKeyFormat: { SimplePrefix: {} },
  })
  const partitioned = { TargetBucket: 'logs', TargetPrefix: '', TargetObjectKeyFormat: { PartitionedPrefix: { PartitionDateSource: 'DeliveryTime' as const } } }
  await putLogging(client, 'src', partitioned)
  t.same((await client.send(new GetBucketLoggingCommand({ Bucket: 'src' }))).LoggingEnabled, partitioned)
  // The same configuration put again keeps its Last-Modified; a change moves it.
  const first = (await sendSigned(ctx, { method: 'GET', path: '/src', query: { logging: '' } })).headers['last-modified']
  t.ok(first)

  await putLogging(client, 'src')
  t.equal((await client.send(new GetBucketLoggingCommand({ Bucket: 'src' }))).LoggingEnabled, undefined)
})

t.test('PutBucketLogging refusals: a missing target, another tenant’s, malformed XML, bad key formats, grants under BucketOwnerEnforced', async (t) => {
  const ctx = await makeS3(t, FAST)
  const { client, app, endpoint } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'src' }))
  await client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  const other = await createTenantWithS3(app)
  const otherClient = s3Client(endpoint, other.credentials)
  t.teardown(() => otherClient.destroy())
  await otherClient.send(new CreateBucketCommand({ Bucket: 'theirs' }))

  const bad = { name: 'InvalidTargetBucketForLogging', status: 400 }
  t.same(await s3Error(putLogging(client, 'src', { TargetBucket: 'nowhere', TargetPrefix: 'x/' })), bad, 'a target that does not exist')
  t.same(await s3Error(putLogging(client, 'src', { TargetBucket: 'theirs', TargetPrefix: 'x/' })), bad, "another tenant's bucket is no target")
  t.same(await s3Error(putLogging(client, 'nosuch', { TargetBucket: 'logs', TargetPrefix: 'x/' })), { name: 'NoSuchBucket', status: 404 })
  // Another tenant may neither set nor read it.
  t.same(await s3Error(putLogging(otherClient, `${ctx.tenant.id}:src`, { TargetBucket: 'theirs', TargetPrefix: '' })), { name: 'AccessDenied', status: 403 })
  t.same(await s3Error(otherClient.send(new GetBucketLoggingCommand({ Bucket: `${ctx.tenant.id}:src` }))), { name: 'AccessDenied', status: 403 })

  const put = (body: string) => sendSigned(ctx, { method: 'PUT', path: '/src', query: { logging: '' }, payload: body })
  for (const body of [
    '<BucketLoggingStatus><LoggingEnabled><TargetBucket>logs</TargetBucket>',
    '<Other/>',
    '<BucketLoggingStatus><LoggingEnabled><TargetPrefix>x/</TargetPrefix></LoggingEnabled></BucketLoggingStatus>',
    '<BucketLoggingStatus><LoggingEnabled><TargetBucket>logs</TargetBucket><TargetPrefix>x/</TargetPrefix><TargetObjectKeyFormat><PartitionedPrefix><PartitionDateSource>kaboom</PartitionDateSource></PartitionedPrefix></TargetObjectKeyFormat></LoggingEnabled></BucketLoggingStatus>',
    '<BucketLoggingStatus><LoggingEnabled><TargetBucket>logs</TargetBucket><TargetPrefix>x/</TargetPrefix><TargetObjectKeyFormat><Other/></TargetObjectKeyFormat></LoggingEnabled></BucketLoggingStatus>',
  ]) {
    const res = await put(body)
    t.equal(res.status, 400, body)
    t.match(res.body, /<Code>MalformedXML<\/Code>/)
  }
  t.equal((await client.send(new GetBucketLoggingCommand({ Bucket: 'src' }))).LoggingEnabled, undefined, 'nothing refused was stored')

  // Target grants: accepted by a target that takes ACLs, refused by one whose ownership is BucketOwnerEnforced.
  const TargetGrants = [{ Grantee: { Type: 'CanonicalUser' as const, ID: ctx.tenant.id }, Permission: 'READ' as const }]
  await putLogging(client, 'src', { TargetBucket: 'logs', TargetPrefix: 'g/', TargetGrants })
  // Not applied to the log objects (the owner's, read through policies), so not answered back.
  t.equal((await client.send(new GetBucketLoggingCommand({ Bucket: 'src' }))).LoggingEnabled?.TargetGrants, undefined)
  await client.send(new CreateBucketCommand({ Bucket: 'enforced', ObjectOwnership: 'BucketOwnerEnforced' }))
  t.same(await s3Error(putLogging(client, 'src', { TargetBucket: 'enforced', TargetPrefix: 'g/', TargetGrants })), bad)
})

t.test('both IAM actions are known to bucket policies', async (t) => {
  const { client } = await makeS3(t, FAST)
  await client.send(new CreateBucketCommand({ Bucket: 'pol' }))
  const Policy = JSON.stringify({
    Version: '2012-10-17',
    Statement: [{ Effect: 'Deny', Principal: '*', Action: ['s3:PutBucketLogging', 's3:GetBucketLogging'], Resource: 'arn:aws:s3:::pol' }],
  })
  await client.send(new PutBucketPolicyCommand({ Bucket: 'pol', Policy }))
  t.same(await s3Error(client.send(new GetBucketLoggingCommand({ Bucket: 'pol' }))), { name: 'AccessDenied', status: 403 })
  t.same(await s3Error(putLogging(client, 'pol', { TargetBucket: 'pol', TargetPrefix: '' })), { name: 'AccessDenied', status: 403 })
})

t.test("the target's log delivery policy AWS documents is accepted, and grants no request anything", async (t) => {
  const { client, endpoint } = await makeS3(t, FAST)
  await client.send(new CreateBucketCommand({ Bucket: 'target' }))
  const statement = (Principal: unknown) => ({
    Effect: 'Allow',
    Principal,
    Action: ['s3:PutObject'],
    Resource: 'arn:aws:s3:::target/log/*',
    Condition: { ArnLike: { 'aws:SourceArn': 'arn:aws:s3:::src' }, StringEquals: { 'aws:SourceAccount': '123456789012' } },
  })
  const put = (Principal: unknown) =>
    client.send(new PutBucketPolicyCommand({ Bucket: 'target', Policy: JSON.stringify({ Version: '2012-10-17', Statement: [statement(Principal)] }) }))
  await put({ Service: 'logging.s3.amazonaws.com' })
  const anonymous = await fetch(`${endpoint}/target/log/x`, { method: 'PUT', body: 'x' })
  t.equal(anonymous.status, 403, 'no request is the log delivery service')
  t.same(await s3Error(put({ Service: 'cloudtrail.amazonaws.com' })), { name: 'MalformedPolicy', status: 400 })
  t.same(await s3Error(put({ Service: 'logging.s3.amazonaws.com', AWS: '*' })), { name: 'MalformedPolicy', status: 400 })
})

t.test('PUT, GET, HEAD, DELETE and a failed GET are delivered as AWS records into the target, under a SimplePrefix key', async (t) => {
  const ctx = await makeS3(t, FAST)
  const { client, tenant } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'src' }))
  await client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  await putLogging(client, 'src', { TargetBucket: 'logs', TargetPrefix: 'access/' })
  const body = 'x'.repeat(1234)
  const started = Date.now()
  await client.send(new PutObjectCommand({ Bucket: 'src', Key: 'dir/a b.txt', Body: body }))
  await client.send(new HeadObjectCommand({ Bucket: 'src', Key: 'dir/a b.txt' }))
  const get = await sendSigned(ctx, { method: 'GET', path: '/src/dir/a%20b.txt' })
  t.equal(get.status, 200)
  await client.send(new DeleteObjectCommand({ Bucket: 'src', Key: 'dir/a b.txt' }))
  t.same(await s3Error(client.send(new GetObjectCommand({ Bucket: 'src', Key: 'missing' }))), { name: 'NoSuchKey', status: 404 })
  // Nothing is written into the source bucket, and the target has no log object before the roll time.
  t.same(await keysOf(client, 'src'), [])

  const keys = await logObjects(client, 'logs', 'access/')
  t.equal(keys.length, 1)
  t.match(keys[0], /^access\/\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[0-9A-F]{16}$/)
  const stamp = keys[0]!.slice('access/'.length, 'access/'.length + 19)
  const [y, mo, d, h, mi, s] = stamp.split('-').map(Number)
  t.ok(Math.abs(Date.UTC(y!, mo! - 1, d!, h!, mi!, s!) - started) < 30_000, 'named by its delivery time')
  const all = await recordsOf(client, 'logs', keys)
  // The configuration's PUT and the listing of the source are requests to it too.
  t.same(
    all.filter((r) => !r.Operation.endsWith('.OBJECT')).map((r) => r.Operation),
    ['REST.PUT.LOGGING_STATUS', 'REST.GET.BUCKET'],
  )
  const records = all.filter((r) => r.Operation.endsWith('.OBJECT'))
  const byOp = (op: string) => records.filter((r) => r.Operation === op)
  t.equal(records.length, 5, 'one record per request')
  for (const r of records) {
    t.equal(r.BucketOwner, tenant.id)
    t.equal(r.Bucket, 'src')
    t.equal(r.Requester, tenant.id)
    t.equal(r.SignatureVersion, 'SigV4')
    t.equal(r.AuthenticationType, 'AuthHeader')
    t.match(r.Time, /^\[\d{2}\/[A-Z][a-z]{2}\/\d{4}:\d{2}:\d{2}:\d{2} \+0000\]$/)
    t.equal(r.RemoteIP, '127.0.0.1')
    t.match(r.TotalTime, /^\d+$/)
    t.match(r.HostHeader, /^127\.0\.0\.1:\d+$/)
    t.match(r.UserAgent, /^"[^"]+"$|^-$/)
  }
  const [put] = byOp('REST.PUT.OBJECT')
  t.match(put, { Key: 'dir/a%20b.txt', HTTPStatus: '200', ErrorCode: '-', ObjectSize: '1234', BytesSent: '-' })
  t.match(put!.RequestURI, /^"PUT \/src\/dir\/a%20b\.txt(\?\S*)? HTTP\/1\.1"$/)
  const [head] = byOp('REST.HEAD.OBJECT')
  t.match(head, { Key: 'dir/a%20b.txt', HTTPStatus: '200', BytesSent: '-', ObjectSize: '1234' })
  const gets = byOp('REST.GET.OBJECT')
  t.equal(gets.length, 2)
  t.match(gets[0], {
    Key: 'dir/a%20b.txt',
    HTTPStatus: '200',
    ErrorCode: '-',
    BytesSent: '1234',
    ObjectSize: '1234',
    RequestID: get.headers['x-amz-request-id'],
  })
  t.match(gets[1], { Key: 'missing', HTTPStatus: '404', ErrorCode: 'NoSuchKey' })
  const [del] = byOp('REST.DELETE.OBJECT')
  t.match(del, { Key: 'dir/a%20b.txt', HTTPStatus: '204' })

  // Reading the log (and its delivery) logs nothing: the target does not log.
  t.same(await keysOf(client, 'logs'), keys)
})

t.test('a bucket logging into itself: its log writes are never logged', async (t) => {
  const { client } = await makeS3(t, FAST)
  await client.send(new CreateBucketCommand({ Bucket: 'self' }))
  await putLogging(client, 'self', { TargetBucket: 'self', TargetPrefix: 'logs/' })
  await client.send(new PutObjectCommand({ Bucket: 'self', Key: 'one', Body: '1' }))
  const keys = await logObjects(client, 'self', 'logs/')
  t.equal(keys.length, 1)
  // Two more roll times: the delivery's own write made no record, so no second object.
  // Two more roll times: the listings that poll are requests, and logged; the deliveries are not.
  await new Promise((r) => setTimeout(r, 2500))
  const all = await recordsOf(client, 'self', await logObjects(client, 'self', 'logs/', 2))
  t.same(
    all.filter((r) => r.Operation === 'REST.PUT.OBJECT').map((r) => r.Key),
    ['one'],
    'no record of a log object written',
  )
})

t.test('PartitionedPrefix keys: [prefix][owner]/[region]/[bucket]/YYYY/MM/DD/…', async (t) => {
  const { client, tenant, config } = await makeS3(t, FAST)
  await client.send(new CreateBucketCommand({ Bucket: 'src' }))
  await client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  await putLogging(client, 'src', {
    TargetBucket: 'logs',
    TargetPrefix: 'p/',
    TargetObjectKeyFormat: { PartitionedPrefix: { PartitionDateSource: 'EventTime' } },
  })
  await client.send(new PutObjectCommand({ Bucket: 'src', Key: 'k', Body: 'v' }))
  const keys = await logObjects(client, 'logs', 'p/')
  t.equal(keys.length, 1)
  const m = /^p\/([^/]+)\/([^/]+)\/([^/]+)\/(\d{4})\/(\d{2})\/(\d{2})\/(\d{4})-(\d{2})-(\d{2})-\d{2}-\d{2}-\d{2}-[0-9A-F]{16}$/.exec(keys[0]!)
  t.ok(m, keys[0]!)
  t.same(m!.slice(1, 4), [tenant.id, config.s3Region, 'src'])
  t.same(m!.slice(4, 7), m!.slice(7, 10))
})

t.test("tenant isolation: another tenant's same-named bucket is not logged into this one's", async (t) => {
  const ctx = await makeS3(t, FAST)
  const { client, app, endpoint, tenant } = ctx
  const other = await createTenantWithS3(app)
  const otherClient = s3Client(endpoint, other.credentials)
  t.teardown(() => otherClient.destroy())
  await client.send(new CreateBucketCommand({ Bucket: 'shared-name' }))
  await client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  await otherClient.send(new CreateBucketCommand({ Bucket: 'shared-name' }))
  await otherClient.send(new CreateBucketCommand({ Bucket: 'logs' }))
  await putLogging(client, 'shared-name', { TargetBucket: 'logs', TargetPrefix: '' })
  await otherClient.send(new PutObjectCommand({ Bucket: 'shared-name', Key: 'theirs', Body: 'b' }))
  await client.send(new PutObjectCommand({ Bucket: 'shared-name', Key: 'mine', Body: 'a' }))
  const records = await recordsOf(client, 'logs', await logObjects(client, 'logs', ''))
  t.same(
    records.filter((r) => r.Operation === 'REST.PUT.OBJECT').map((r) => [r.BucketOwner, r.Requester, r.Key]),
    [[tenant.id, tenant.id, 'mine']],
  )
  await new Promise((r) => setTimeout(r, 1500))
  t.same(await keysOf(otherClient, 'logs'), [], 'the other tenant has logging off: nothing delivered to it')
})

t.test('records still buffered are delivered at a clean shutdown, and found after the restart', async (t) => {
  const first = await makeS3(t, { COFFER_S3_LOGGING_ROLL_SECONDS: '300' })
  await first.client.send(new CreateBucketCommand({ Bucket: 'src' }))
  await first.client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  await putLogging(first.client, 'src', { TargetBucket: 'logs', TargetPrefix: 'shut/' })
  await first.client.send(new PutObjectCommand({ Bucket: 'src', Key: 'before-shutdown', Body: 'v' }))
  await new Promise((r) => setTimeout(r, 300))
  t.same(await keysOf(first.client, 'logs'), [], 'nothing before the roll time')
  await first.close()
  const second = await makeS3(
    t,
    { COFFER_S3_LOGGING_ROLL_SECONDS: '300' },
    { dir: first.dir, storeEnv: first.storeEnv, existing: { ...first.tenant, credentials: first.credentials } },
  )
  const keys = await keysOf(second.client, 'logs', 'shut/')
  t.equal(keys.length, 1)
  const records = await recordsOf(second.client, 'logs', keys)
  t.same(
    records.filter((r) => r.Operation !== 'REST.PUT.LOGGING_STATUS').map((r) => [r.Operation, r.Key, r.HTTPStatus]),
    [['REST.PUT.OBJECT', 'before-shutdown', '200']],
  )
})

t.test("RGW's flush (POST ?logging) and ObjectRollTime: delivered at once, its key answered", async (t) => {
  const ctx = await makeS3(t, { COFFER_S3_LOGGING_ROLL_SECONDS: '300' })
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'src' }))
  await client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  const flush = () => sendSigned(ctx, { method: 'POST', path: '/src', query: { logging: '' } })
  t.equal((await flush()).status, 400, 'not logging: nothing to flush')
  await putLogging(client, 'src', { TargetBucket: 'logs', TargetPrefix: 'f/' })
  await client.send(new PutObjectCommand({ Bucket: 'src', Key: 'k', Body: 'v' }))
  const res = await flush()
  t.equal(res.status, 200)
  const key = /<FlushedLoggingObject>([^<]+)<\/FlushedLoggingObject>/.exec(res.body)?.[1]
  t.match(key, /^f\//)
  t.same(await keysOf(client, 'logs'), [key])

  // A bucket's ObjectRollTime (RGW's extension element) is its own roll time, and is answered back.
  const xml =
    '<BucketLoggingStatus><LoggingEnabled><TargetBucket>logs</TargetBucket><TargetPrefix>r/</TargetPrefix><ObjectRollTime>1</ObjectRollTime></LoggingEnabled></BucketLoggingStatus>'
  t.equal((await sendSigned(ctx, { method: 'PUT', path: '/src', query: { logging: '' }, payload: xml })).status, 200)
  const got = await sendSigned(ctx, { method: 'GET', path: '/src', query: { logging: '' } })
  t.match(got.body, /<ObjectRollTime>1<\/ObjectRollTime><LoggingType>Standard<\/LoggingType>/)
  await client.send(new PutObjectCommand({ Bucket: 'src', Key: 'k2', Body: 'v' }))
  const rolled = await logObjects(client, 'logs', 'r/')
  t.equal(rolled.length, 1, 'delivered after a second, not 300')
  const journal = xml.replace('<ObjectRollTime>1</ObjectRollTime>', '<LoggingType>Journal</LoggingType>')
  t.equal((await sendSigned(ctx, { method: 'PUT', path: '/src', query: { logging: '' }, payload: journal })).status, 501, 'Journal records are not implemented')
})

t.test('a delivery that fails (its target gone) never fails a request nor the server', async (t) => {
  const ctx = await makeS3(t, FAST)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'src' }))
  await client.send(new CreateBucketCommand({ Bucket: 'gone' }))
  await putLogging(client, 'src', { TargetBucket: 'gone', TargetPrefix: '' })
  const { DeleteBucketCommand } = await import('@aws-sdk/client-s3')
  await client.send(new DeleteBucketCommand({ Bucket: 'gone' }))
  await client.send(new PutObjectCommand({ Bucket: 'src', Key: 'k', Body: 'v' }))
  await new Promise((r) => setTimeout(r, 1800))
  t.ok(
    ctx.logs.some((l) => l.msg === 'S3 access log delivery failed; retried later'),
    'the failure is logged and retried',
  )
  // Recreated: the retry delivers.
  await client.send(new CreateBucketCommand({ Bucket: 'gone' }))
  t.equal((await logObjects(client, 'gone', '', 1, 15_000)).length, 1)
  t.equal((await client.send(new GetObjectCommand({ Bucket: 'src', Key: 'k' }))).$metadata.httpStatusCode, 200)
})

t.test('DeleteObjects is one REST.POST.MULTI_OBJECT_DELETE record and a BATCH.DELETE.OBJECT record per key deleted, as AWS logs it', async (t) => {
  const { client } = await makeS3(t, FAST)
  await client.send(new CreateBucketCommand({ Bucket: 'src' }))
  await client.send(new CreateBucketCommand({ Bucket: 'logs' }))
  await client.send(new PutObjectCommand({ Bucket: 'src', Key: 'a', Body: '1' }))
  await client.send(new PutObjectCommand({ Bucket: 'src', Key: 'b/c', Body: '2' }))
  await putLogging(client, 'src', { TargetBucket: 'logs', TargetPrefix: '' })
  await client.send(new DeleteObjectsCommand({ Bucket: 'src', Delete: { Objects: [{ Key: 'a' }, { Key: 'b/c' }] } }))
  const records = await recordsOf(client, 'logs', await logObjects(client, 'logs', ''))
  t.same(
    records.filter((r) => r.Operation !== 'REST.PUT.LOGGING_STATUS').map((r) => [r.Operation, r.Key, r.HTTPStatus]),
    [
      ['REST.POST.MULTI_OBJECT_DELETE', '-', '200'],
      ['BATCH.DELETE.OBJECT', 'a', '204'],
      ['BATCH.DELETE.OBJECT', 'b/c', '204'],
    ],
  )
  t.equal(new Set(records.map((r) => r.RequestID)).size, 2, 'the batch records carry their request’s id')
})
