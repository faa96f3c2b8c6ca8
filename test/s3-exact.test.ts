// S3 answers exactly as AWS's where Coffer already claims the operation (#24): odd headers,
// listing encodings, error codes, bucket names, conditional writes, copies that must not pretend,
// and DeleteObjects' required digest.
import { createHash } from 'node:crypto'
import { execFile, spawnSync } from 'node:child_process'
import { promisify } from 'node:util'
import http from 'node:http'
import t from 'tap'
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCopyCommand,
  type S3ServiceException,
} from '@aws-sdk/client-s3'
import { makeS3, signedRequest, type S3Context } from './s3-helper'

async function s3Error(p: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await p
  } catch (err) {
    const e = err as S3ServiceException
    return { name: e.name, status: e.$metadata?.httpStatusCode }
  }
  throw new Error('expected the S3 call to fail')
}

/** A request signed by the SDK's signer, sent on a real socket (Node's HTTP server sees it as clients send it). */
async function send(
  ctx: S3Context,
  req: { method: string; path: string; query?: Record<string, string>; headers?: Record<string, string>; payload?: string | Buffer },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const signed = await signedRequest(ctx, req)
  return new Promise((resolve, reject) => {
    const r = http.request(`${ctx.endpoint}${signed.url as string}`, { method: req.method, headers: signed.headers as http.OutgoingHttpHeaders })
    r.on('response', (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    r.on('error', reject)
    r.end(req.payload)
  })
}

const code = (body: string) => /<Code>([^<]*)<\/Code>/.exec(body)?.[1]
const md5b64 = (b: string | Buffer) => createHash('md5').update(b).digest('base64')

t.test('Expect other than 100-continue is ignored, as AWS and RGW do, not answered 417', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'expect' }))
  for (const expect of ['200-ok', '', 'something-else']) {
    const res = await send(ctx, { method: 'PUT', path: '/expect/obj', headers: { expect, 'content-length': '5' }, payload: 'hello' })
    t.equal(res.status, 200, `Expect: ${JSON.stringify(expect)} stores the object`)
  }
  const get = await ctx.client.send(new GetObjectCommand({ Bucket: 'expect', Key: 'obj' }))
  t.equal(await get.Body!.transformToString(), 'hello')
  // A continue expectation among others is still one (Node's rule): answered with a 100, then stored.
  const listed = await send(ctx, { method: 'PUT', path: '/expect/two', headers: { expect: 'foo, 100-continue', 'content-length': '3' }, payload: 'two' })
  t.equal(listed.status, 200)
})

t.test('PutObject Content-Type: empty is application/octet-stream; garbage and long ones are no 500', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'types' }))
  const cases: [string, string, string][] = [
    ['empty', '', 'application/octet-stream'],
    ['blank', '   ', 'application/octet-stream'],
    ['garbage', 'this is not a media type;;;', 'this is not a media type;;;'],
    ['slashes', '/', '/'],
    ['long', `text/plain; x=${'a'.repeat(300)}`, 'application/octet-stream'],
    ['normal', 'image/png', 'image/png'],
  ]
  for (const [key, type, stored] of cases) {
    const put = await send(ctx, { method: 'PUT', path: `/types/${key}`, headers: { 'content-type': type }, payload: 'body' })
    t.equal(put.status, 200, `${key}: stored`)
    const head = await ctx.client.send(new HeadObjectCommand({ Bucket: 'types', Key: key }))
    t.equal(head.ContentType, stored, `${key} is stored as ${stored}`)
  }
  // The same through the other body-taking operations: no 500 for an empty type.
  const mp = await send(ctx, { method: 'POST', path: '/types/mp', query: { uploads: '' }, headers: { 'content-type': '' } })
  t.equal(mp.status, 200, 'CreateMultipartUpload with an empty Content-Type')
})

const ODD_KEYS = ['a\nb', 'x\u0001y', 'z\u001b[31mw', 'cr\r\nlf', 'sp ace+plus%25', 'plain']

t.test('listings name the real keys: XML-hostile characters as character references, url encoding exactly once', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'odd' }))
  for (const key of ODD_KEYS) await client.send(new PutObjectCommand({ Bucket: 'odd', Key: key, Body: key }))
  const sorted = [...ODD_KEYS].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))

  // Without encoding-type (the JS SDK's default), the keys come back as they are.
  const v2 = await client.send(new ListObjectsV2Command({ Bucket: 'odd' }))
  t.same(
    v2.Contents?.map((c) => c.Key),
    sorted,
    'ListObjectsV2 names every key, control characters and CR included',
  )
  const v1 = await client.send(new ListObjectsCommand({ Bucket: 'odd' }))
  t.same(
    v1.Contents?.map((c) => c.Key),
    sorted,
    'ListObjects names every key',
  )
  const raw = await send(ctx, { method: 'GET', path: '/odd', query: { 'list-type': '2' } })
  t.match(raw.body, '<Key>x&#x1;y</Key>')
  t.match(raw.body, '<Key>cr&#xD;\nlf</Key>')
  for (const key of ODD_KEYS) {
    const got = await client.send(new GetObjectCommand({ Bucket: 'odd', Key: v2.Contents!.find((c) => c.Key === key)!.Key! }))
    t.equal(await got.Body!.transformToString(), key, `the listed key ${JSON.stringify(key)} reads its object`)
  }

  // With encoding-type=url every key-bearing element is encoded once; v1's Prefix is sent as given, as AWS does.
  const v2url = await send(ctx, {
    method: 'GET',
    path: '/odd',
    query: { 'list-type': '2', 'encoding-type': 'url', prefix: 's', delimiter: ' ', 'start-after': 'a b', 'max-keys': '1' },
  })
  t.match(v2url.body, '<Prefix>s</Prefix>')
  t.match(v2url.body, '<StartAfter>a%20b</StartAfter>')
  t.match(v2url.body, '<Delimiter>%20</Delimiter>')
  t.match(v2url.body, '<CommonPrefixes><Prefix>sp%20</Prefix></CommonPrefixes>')
  const v2key = await send(ctx, { method: 'GET', path: '/odd', query: { 'list-type': '2', 'encoding-type': 'url', prefix: 'sp ' } })
  t.match(v2key.body, '<Prefix>sp%20</Prefix>')
  t.match(v2key.body, '<Key>sp%20ace%2Bplus%2525</Key>')
  const v1url = await send(ctx, {
    method: 'GET',
    path: '/odd',
    query: { 'encoding-type': 'url', prefix: '\n', marker: 'a b', delimiter: '\r' },
  })
  t.match(v1url.body, '<Prefix>\n</Prefix>', "ListObjects' Prefix is not encoded (botocore does not decode it)")
  t.match(v1url.body, '<Marker>a%20b</Marker>')
  t.match(v1url.body, '<Delimiter>%0D</Delimiter>')
  const v1next = await send(ctx, { method: 'GET', path: '/odd', query: { 'encoding-type': 'url', delimiter: '\r', 'max-keys': '1' } })
  t.match(v1next.body, '<NextMarker>a%0Ab</NextMarker>')
  const v1plain = await send(ctx, { method: 'GET', path: '/odd', query: { prefix: 'cr', delimiter: '\n' } })
  t.match(v1plain.body, '<CommonPrefixes><Prefix>cr&#xD;\n</Prefix></CommonPrefixes>', 'without encoding-type nothing is url-encoded')

  // An empty continuation-token is no token.
  const empty = await client.send(new ListObjectsV2Command({ Bucket: 'odd', ContinuationToken: '' }))
  t.same(
    empty.Contents?.map((c) => c.Key),
    sorted,
  )
  const emptyRaw = await send(ctx, { method: 'GET', path: '/odd', query: { 'list-type': '2', 'continuation-token': '', 'start-after': 'plain' } })
  t.equal(emptyRaw.status, 200)
  t.notMatch(emptyRaw.body, '<ContinuationToken>')
  t.match(emptyRaw.body, '<KeyCount>3</KeyCount>', 'start-after applies when the token is empty')

  // ListMultipartUploads: Key, Prefix, Delimiter, KeyMarker, NextKeyMarker encoded once with encoding-type=url.
  for (const key of ['up load/1', 'up load/2', 'x\u0001']) await client.send(new CreateMultipartUploadCommand({ Bucket: 'odd', Key: key }))
  const uploads = await send(ctx, { method: 'GET', path: '/odd', query: { uploads: '', 'encoding-type': 'url', 'key-marker': 'a b', 'max-uploads': '1' } })
  t.match(uploads.body, '<KeyMarker>a%20b</KeyMarker>')
  t.match(uploads.body, '<NextKeyMarker>up%20load/1</NextKeyMarker>')
  t.match(uploads.body, '<Key>up%20load/1</Key>')
  const rolled = await send(ctx, { method: 'GET', path: '/odd', query: { uploads: '', 'encoding-type': 'url', prefix: 'up ', delimiter: '/' } })
  t.match(rolled.body, '<Prefix>up%20</Prefix>')
  t.match(rolled.body, '<CommonPrefixes><Prefix>up%20load/</Prefix></CommonPrefixes>')
  const sdkUploads = await client.send(new ListMultipartUploadsCommand({ Bucket: 'odd' }))
  t.same(
    sdkUploads.Uploads?.map((u) => u.Key),
    ['up load/1', 'up load/2', 'x\u0001'],
  )
})

const noBoto3 = spawnSync('python3', ['-c', 'import boto3'], { encoding: 'utf8' }).status !== 0
t.test('boto3 reads back the real keys and prefixes (it asks for encoding-type=url and decodes)', { skip: noBoto3 && 'python3-boto3 is not installed' }, async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'boto' }))
  for (const key of ODD_KEYS) await ctx.client.send(new PutObjectCommand({ Bucket: 'boto', Key: key, Body: key }))
  const script = `
import json, sys, boto3, botocore.config
c = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], region_name='us-east-1',
                 config=botocore.config.Config(s3={'addressing_style': 'path'}))
out = {}
r = c.list_objects(Bucket='boto', Prefix='\\n'); out['v1prefix'] = r['Prefix']
r = c.list_objects_v2(Bucket='boto', Prefix='\\n'); out['v2prefix'] = r['Prefix']
r = c.list_objects(Bucket='boto'); out['v1keys'] = [o['Key'] for o in r['Contents']]
r = c.list_objects_v2(Bucket='boto'); out['v2keys'] = [o['Key'] for o in r['Contents']]
r = c.list_objects(Bucket='boto', Delimiter='\\n', Marker='a'); out['v1'] = [r['Delimiter'], r['Marker'], [p['Prefix'] for p in r['CommonPrefixes']]]
r = c.list_objects_v2(Bucket='boto', Delimiter='\\n', StartAfter='a', ContinuationToken=''); out['v2'] = [r['Delimiter'], r['StartAfter'], [p['Prefix'] for p in r['CommonPrefixes']]]
print(json.dumps(out))
`
  // Asynchronously: the server answering it runs in this process.
  const run = await promisify(execFile)('python3', ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey], {
    encoding: 'utf8',
  })
  const out = JSON.parse(run.stdout) as Record<string, unknown>
  const sorted = [...ODD_KEYS].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
  t.equal(out.v1prefix, '\n', 'ListObjects: the prefix \\n comes back as \\n, not %0A')
  t.equal(out.v2prefix, '\n')
  t.same(out.v1keys, sorted)
  t.same(out.v2keys, sorted)
  t.same(out.v1, ['\n', 'a', ['a\n', 'cr\r\n']])
  t.same(out.v2, ['\n', 'a', ['a\n', 'cr\r\n']])
})
