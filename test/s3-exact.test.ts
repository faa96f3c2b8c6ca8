// @suites: pg-all
// S3 answers exactly as AWS's where Coffer already claims the operation (#24): odd headers,
// listing encodings, error codes, bucket names, conditional writes, copies that must not pretend,
// and DeleteObjects' required digest.
import { createHash } from 'node:crypto'
import { execFile, spawnSync } from 'node:child_process'
import { promisify } from 'node:util'
import fs from 'node:fs'
import path from 'node:path'
import { Readable } from 'node:stream'
import t from 'tap'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3'
import { makeS3, s3Error, sendSigned } from './s3-helper'
import { tempDir } from './helper'

const send = sendSigned

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

  // An empty continuation-token is no token (and is echoed empty).
  const empty = await client.send(new ListObjectsV2Command({ Bucket: 'odd', ContinuationToken: '' }))
  t.same(
    empty.Contents?.map((c) => c.Key),
    sorted,
  )
  const emptyRaw = await send(ctx, { method: 'GET', path: '/odd', query: { 'list-type': '2', 'continuation-token': '', 'start-after': 'plain' } })
  t.equal(emptyRaw.status, 200)
  t.match(emptyRaw.body, '<ContinuationToken></ContinuationToken>', 'echoed as sent, as AWS does')
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
t.test(
  'boto3 reads back the real keys and prefixes (it asks for encoding-type=url and decodes)',
  { skip: noBoto3 && 'python3-boto3 is not installed' },
  async (t) => {
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
  },
)

t.test('UploadPartCopy: a malformed range is InvalidArgument, one outside the source InvalidRange', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'ranges' }))
  await client.send(new PutObjectCommand({ Bucket: 'ranges', Key: 'source', Body: 'hello' }))
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'ranges', Key: 'dest' }))
  const copy = (range: string) =>
    s3Error(
      client.send(new UploadPartCopyCommand({ Bucket: 'ranges', Key: 'dest', UploadId, PartNumber: 1, CopySource: 'ranges/source', CopySourceRange: range })),
    )
  t.same(await copy('bytes=0-21'), { name: 'InvalidRange', status: 416 }, 'past the end of a 5-byte source')
  t.same(await copy('bytes=5-5'), { name: 'InvalidRange', status: 416 }, 'starting at the end')
  for (const range of ['0-2', 'bytes=0', 'bytes=hello-world', 'bytes=0-bar', 'bytes=hello-', 'bytes=0-2,3-5', 'bytes=3-1']) {
    t.same(await copy(range), { name: 'InvalidArgument', status: 400 }, `${range} is malformed`)
  }
  const ok = await client.send(
    new UploadPartCopyCommand({ Bucket: 'ranges', Key: 'dest', UploadId, PartNumber: 1, CopySource: 'ranges/source', CopySourceRange: 'bytes=1-4' }),
  )
  t.ok(ok.CopyPartResult?.ETag)
})

t.test('CompleteMultipartUpload: a part number listed twice in a row is its later entry, as RGW takes it', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'resend' }))
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'resend', Key: 'k' }))
  // A part sent twice: the attempt that finished last (B) is the part; the client lists both ETags.
  const a = await client.send(new UploadPartCommand({ Bucket: 'resend', Key: 'k', UploadId, PartNumber: 1, Body: 'AAAAAAAA' }))
  const b = await client.send(new UploadPartCommand({ Bucket: 'resend', Key: 'k', UploadId, PartNumber: 1, Body: 'BBBBBBBB' }))
  const complete = (etags: string[]) =>
    client.send(
      new CompleteMultipartUploadCommand({ Bucket: 'resend', Key: 'k', UploadId, MultipartUpload: { Parts: etags.map((ETag) => ({ ETag, PartNumber: 1 })) } }),
    )
  t.same(await s3Error(complete([b.ETag!, a.ETag!])), { name: 'InvalidPart', status: 400 }, 'the later entry must be the stored part')
  await complete([a.ETag!, b.ETag!])
  const got = await client.send(new GetObjectCommand({ Bucket: 'resend', Key: 'k' }))
  t.equal(await got.Body!.transformToString(), 'BBBBBBBB')
})

t.test('CreateBucket refuses what AWS refuses: labels ending or starting with a hyphen, reserved prefixes and suffixes', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  // The SDK takes a --x-s3 name for an S3 Express directory bucket and signs for that service.
  const express = await send(ctx, { method: 'PUT', path: '/bucket--x-s3' })
  t.equal(code(express.body), 'InvalidBucketName', 'bucket--x-s3')
  const refused = [
    'foo.-bar',
    'foo-.bar',
    'xn--bucket',
    'sthree-bucket',
    'sthree-configurator',
    'amzn-s3-demo-bucket',
    'bucket-s3alias',
    'bucket--ol-s3',
    'bucket.mrap',
    'bucket--table-s3',
    '192.168.5.4',
    'a..b',
    'ab',
    'Upper',
  ]
  for (const name of refused) t.same(await s3Error(client.send(new CreateBucketCommand({ Bucket: name }))), { name: 'InvalidBucketName', status: 400 }, name)
  for (const name of ['foo.bar', 'foo-bar', 'a--b', 'my.bucket-1', 'xn-a', 'amzn-s3-demo', 's3alias']) {
    await client.send(new CreateBucketCommand({ Bucket: name }))
    t.pass(`${name} is a valid name`)
  }
})

t.test('PutObject conditional writes as AWS answers them', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'cond' }))
  const first = await client.send(new PutObjectCommand({ Bucket: 'cond', Key: 'k', Body: 'one' }))
  const bare = first.ETag!.replace(/"/g, '')
  // If-Match with the ETag unquoted (as GetObject and CopyObject accept it), quoted, weak, or in a list.
  for (const ifMatch of [bare, first.ETag!, `W/${first.ETag!}`, `"nope", ${bare}`]) {
    const put = await send(ctx, { method: 'PUT', path: '/cond/k', headers: { 'if-match': ifMatch }, payload: 'one' })
    t.equal(put.status, 200, `If-Match: ${ifMatch}`)
  }
  const wrong = await send(ctx, { method: 'PUT', path: '/cond/k', headers: { 'if-match': 'abc' }, payload: 'two' })
  t.equal(wrong.status, 412)
  t.match(wrong.body, '<Condition>If-Match</Condition>')
  const missing = await send(ctx, { method: 'PUT', path: '/cond/missing', headers: { 'if-match': bare }, payload: 'x' })
  t.equal(code(missing.body), 'NoSuchKey')
  const sdk = await client.send(new PutObjectCommand({ Bucket: 'cond', Key: 'k', Body: 'one', IfMatch: bare }))
  t.equal(sdk.ETag, first.ETag, 'the SDK with an unquoted IfMatch')

  // If-None-Match: * (AWS), or ETags compared with the current object's, as Ceph RGW and MinIO do
  // (AWS answers 501 there; ceph/s3-tests' test_put_object_ifnonmatch_* expect RGW's answer).
  const star = await send(ctx, { method: 'PUT', path: '/cond/k', headers: { 'if-none-match': '*' }, payload: 'x' })
  t.equal(star.status, 412)
  t.match(star.body, '<Condition>If-None-Match</Condition>')
  for (const value of [first.ETag!, bare, `"other", ${first.ETag!}`]) {
    const res = await send(ctx, { method: 'PUT', path: '/cond/k', headers: { 'if-none-match': value }, payload: 'x' })
    t.equal(res.status, 412, `If-None-Match: ${value} (the current ETag)`)
    t.match(res.body, '<Condition>If-None-Match</Condition>')
  }
  const otherTag = await send(ctx, { method: 'PUT', path: '/cond/k2', headers: { 'if-none-match': '"other"' }, payload: 'k2' })
  t.equal(otherTag.status, 200, 'If-None-Match: another ETag writes')
  const otherOver = await send(ctx, { method: 'PUT', path: '/cond/k2', headers: { 'if-none-match': '"other"' }, payload: 'k2 again' })
  t.equal(otherOver.status, 200, "If-None-Match: another ETag than the current object's replaces it")
  const both = await send(ctx, { method: 'PUT', path: '/cond/new', headers: { 'if-none-match': '*', 'if-match': bare }, payload: 'x' })
  t.equal(both.status, 501)
  t.match(both.body, '<Header>If-Match,If-None-Match</Header>')
  const created = await send(ctx, { method: 'PUT', path: '/cond/new', headers: { 'if-none-match': '*' }, payload: 'x' })
  t.equal(created.status, 200)
  const got = await client.send(new GetObjectCommand({ Bucket: 'cond', Key: 'k' }))
  t.equal(await got.Body!.transformToString(), 'one', 'no refused write replaced the object')

  // CopyObject's destination conditions, as PutObject's.
  const copyTo = (Key: string, cond: { IfMatch?: string; IfNoneMatch?: string }) =>
    client.send(new CopyObjectCommand({ Bucket: 'cond', Key, CopySource: 'cond/new', ...cond }))
  t.same(await s3Error(copyTo('k', { IfNoneMatch: '*' })), { name: 'PreconditionFailed', status: 412 }, 'CopyObject If-None-Match: * onto an object')
  t.same(await s3Error(copyTo('k', { IfMatch: 'abc' })), { name: 'PreconditionFailed', status: 412 }, 'CopyObject If-Match another ETag')
  t.same(await s3Error(copyTo('k', { IfNoneMatch: first.ETag! })), { name: 'PreconditionFailed', status: 412 }, 'CopyObject If-None-Match: its ETag')
  t.same(await s3Error(copyTo('absent', { IfMatch: bare })), { name: 'NoSuchKey', status: 404 })
  await copyTo('fresh', { IfNoneMatch: '*' })
  await copyTo('k', { IfMatch: bare })
  const copied = await client.send(new GetObjectCommand({ Bucket: 'cond', Key: 'k' }))
  t.equal(await copied.Body!.transformToString(), 'x', 'a copy whose If-Match held replaced the object')

  // CompleteMultipartUpload's conditions, as PutObject's (s3-conditional-writes.test.ts has the rest).
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'cond', Key: 'k' }))
  const complete = await send(ctx, {
    method: 'POST',
    path: '/cond/k',
    query: { uploadId: UploadId! },
    headers: { 'if-none-match': '*' },
    payload: '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>',
  })
  t.equal(complete.status, 412)
  t.match(complete.body, '<Code>PreconditionFailed</Code>')
})

t.test('CopyObject and the other writes refuse options Coffer does not implement, whatever the directive', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'copy' }))
  await client.send(new PutObjectCommand({ Bucket: 'copy', Key: 'src', Body: 'source' }))
  // SSE-S3 is built whether or not the data dir is encrypted (#27): taken, below.
  const refused: Record<string, string>[] = [
    // A canned ACL for log delivery: its group is not built (#26).
    { 'x-amz-acl': 'log-delivery-write' },
    { 'x-amz-storage-class': 'GLACIER' },
  ]
  // SSE-KMS and SSE-C are built (#27): a key id the key ring does not hold, or a customer key
  // without its key, is the client's error.
  const invalid: Record<string, string>[] = [
    { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': 'k' },
    { 'x-amz-copy-source-server-side-encryption-customer-algorithm': 'AES256' },
  ]
  for (const directive of [undefined, 'COPY', 'REPLACE']) {
    for (const [status, list] of [
      [501, refused],
      [400, invalid],
    ] as const) {
      for (const headers of list) {
        const res = await send(ctx, {
          method: 'PUT',
          path: '/copy/dst',
          headers: { 'x-amz-copy-source': '/copy/src', ...(directive ? { 'x-amz-metadata-directive': directive } : {}), ...headers },
        })
        t.equal(res.status, status, `CopyObject (${directive ?? 'default'}) with ${Object.keys(headers).join(', ')}`)
      }
    }
  }
  t.same(await s3Error(client.send(new HeadObjectCommand({ Bucket: 'copy', Key: 'dst' }))), { name: 'NotFound', status: 404 }, 'nothing was copied')
  const plain = await send(ctx, {
    method: 'PUT',
    path: '/copy/dst',
    headers: { 'x-amz-copy-source': '/copy/src', 'x-amz-acl': 'private', 'x-amz-storage-class': 'STANDARD' },
  })
  t.equal(plain.status, 200, 'the default private ACL and STANDARD class are what every object has')
  const sealed = await send(ctx, { method: 'PUT', path: '/copy/dst', headers: { 'x-amz-copy-source': '/copy/src', 'x-amz-server-side-encryption': 'AES256' } })
  t.equal(sealed.status, 200, 'a copy asking for SSE-S3 is taken')
  t.equal(sealed.headers['x-amz-server-side-encryption'], 'AES256')

  // The same on the other writes.
  t.equal((await send(ctx, { method: 'PUT', path: '/copy/o', headers: { 'x-amz-storage-class': 'STANDARD_IA' }, payload: 'x' })).status, 501)
  // SSE-S3 is taken without an encrypted data dir too (#27: sealed under Coffer's SSE-S3 key), and said so.
  const sse = await send(ctx, { method: 'POST', path: '/copy/o', query: { uploads: '' }, headers: { 'x-amz-server-side-encryption': 'AES256' } })
  t.equal(sse.status, 200)
  t.equal(sse.headers['x-amz-server-side-encryption'], 'AES256')
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: 'copy', Key: 'mp' }))
  const part = await send(ctx, {
    method: 'PUT',
    path: '/copy/mp',
    query: { uploadId: UploadId!, partNumber: '1' },
    headers: { 'x-amz-server-side-encryption-customer-algorithm': 'AES256' },
    payload: 'x',
  })
  t.equal(part.status, 400, 'UploadPart with an SSE-C algorithm but no key')
  const partCopy = await send(ctx, {
    method: 'PUT',
    path: '/copy/mp',
    query: { uploadId: UploadId!, partNumber: '1' },
    headers: { 'x-amz-copy-source': '/copy/src', 'x-amz-copy-source-server-side-encryption-customer-key': 'k' },
  })
  t.equal(partCopy.status, 400, 'UploadPartCopy with an SSE-C source key but no algorithm')
  // A stated bucket owner other than the tenant (the owner ID its listings give) is refused, not ignored.
  const owner = { 'x-amz-expected-bucket-owner': '123456789012' }
  t.equal((await send(ctx, { method: 'PUT', path: '/copy/owned', headers: owner, payload: 'x' })).status, 403)
  t.equal((await send(ctx, { method: 'GET', path: '/copy', headers: owner })).status, 403)
  const sourceOwner = { 'x-amz-copy-source': '/copy/src', 'x-amz-source-expected-bucket-owner': '123456789012' }
  t.equal((await send(ctx, { method: 'PUT', path: '/copy/owned', headers: sourceOwner })).status, 403)
  t.equal((await send(ctx, { method: 'PUT', path: '/copy/owned', headers: { 'x-amz-expected-bucket-owner': ctx.tenant.id }, payload: 'x' })).status, 200)
  t.equal((await client.send(new ListObjectsV2Command({ Bucket: 'copy', ExpectedBucketOwner: ctx.tenant.id }))).KeyCount, 3)
  // Object ownership is stored (#26): all three settings are accepted, nothing else is.
  t.equal((await send(ctx, { method: 'PUT', path: '/newbucket', headers: { 'x-amz-object-ownership': 'Whoever' } })).status, 400)
  t.equal((await send(ctx, { method: 'PUT', path: '/newbucket', headers: { 'x-amz-object-ownership': 'ObjectWriter' } })).status, 200)
  t.equal((await send(ctx, { method: 'PUT', path: '/newbucket2', headers: { 'x-amz-object-ownership': 'BucketOwnerEnforced' } })).status, 200)
})

t.test('DeleteObjects requires Content-MD5 or a checksum of its body, and verifies it', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'del' }))
  for (const key of ['a', 'b', 'c']) await client.send(new PutObjectCommand({ Bucket: 'del', Key: key, Body: key }))
  const body = '<Delete><Object><Key>a</Key></Object></Delete>'
  const bare = await send(ctx, { method: 'POST', path: '/del', query: { delete: '' }, payload: body })
  t.equal(bare.status, 400)
  t.equal(code(bare.body), 'InvalidRequest')
  t.match(bare.body, 'Missing required header for this request: Content-MD5')
  const announcedOnly = await send(ctx, {
    method: 'POST',
    path: '/del',
    query: { delete: '' },
    headers: { 'x-amz-sdk-checksum-algorithm': 'CRC32' },
    payload: body,
  })
  t.equal(code(announcedOnly.body), 'InvalidRequest', 'naming an algorithm is not a checksum')
  const wrongMd5 = await send(ctx, { method: 'POST', path: '/del', query: { delete: '' }, headers: { 'content-md5': md5b64('other') }, payload: body })
  t.equal(code(wrongMd5.body), 'BadDigest')
  const wrongCrc = await send(ctx, { method: 'POST', path: '/del', query: { delete: '' }, headers: { 'x-amz-checksum-crc32': 'AAAAAA==' }, payload: body })
  t.equal(code(wrongCrc.body), 'BadDigest')
  t.ok(await client.send(new HeadObjectCommand({ Bucket: 'del', Key: 'a' })), 'nothing was deleted by a refused request')
  const good = await send(ctx, { method: 'POST', path: '/del', query: { delete: '' }, headers: { 'content-md5': md5b64(body) }, payload: body })
  t.equal(good.status, 200)
  t.match(good.body, '<Deleted><Key>a</Key></Deleted>')
  // The SDK sends a checksum by default.
  const sdk = await client.send(new DeleteObjectsCommand({ Bucket: 'del', Delete: { Objects: [{ Key: 'b' }, { Key: 'c' }] } }))
  t.same(sdk.Deleted?.map((d) => d.Key).sort(), ['b', 'c'])

  // Keys the SDK writes as character references (control characters, CR) are the keys deleted,
  // not others answered Deleted; a CDATA section is literal text.
  const odd = ['x\u0001y', 'cr\r\nlf', 'a&b<c', `q"u'o>te`, '&amp;', '\u{1F600}']
  for (const Key of [...odd, 'cdata&<']) await client.send(new PutObjectCommand({ Bucket: 'del', Key, Body: 'x' }))
  const oddDeleted = await client.send(new DeleteObjectsCommand({ Bucket: 'del', Delete: { Objects: odd.map((Key) => ({ Key })) } }))
  t.same(oddDeleted.Deleted?.map((d) => d.Key).sort(), [...odd].sort())
  const cdata = '<Delete><Object><Key><![CDATA[cdata&<]]></Key></Object></Delete>'
  const cdataRes = await send(ctx, { method: 'POST', path: '/del', query: { delete: '' }, headers: { 'content-md5': md5b64(cdata) }, payload: cdata })
  t.match(cdataRes.body, '<Deleted><Key>cdata&amp;&lt;</Key></Deleted>')
  t.equal((await client.send(new ListObjectsV2Command({ Bucket: 'del' }))).KeyCount, 0, 'every one of them is gone')
})

const clientsMissing = ['aws', 'rclone', 's3cmd'].filter((c) => !fs.existsSync(`/usr/bin/${c}`))
t.test(
  'DeleteObjects through real clients: the AWS CLI, s3cmd and rclone send the digest it requires',
  { skip: clientsMissing.length > 0 && `missing /usr/bin/${clientsMissing.join(', ')} (scripts/s3-clients.sh)` },
  async (t) => {
    const ctx = await makeS3(t)
    const home = tempDir(t, 'coffer-delete-')
    await ctx.client.send(new CreateBucketCommand({ Bucket: 'multi' }))
    const put = (keys: string[]) => Promise.all(keys.map((Key) => ctx.client.send(new PutObjectCommand({ Bucket: 'multi', Key, Body: Key }))))
    const left = async (prefix: string) => (await ctx.client.send(new ListObjectsV2Command({ Bucket: 'multi', Prefix: prefix }))).KeyCount
    const batches = () => ctx.logs.filter((l) => l.msg === 'objects deleted').length
    const run = (cmd: string, args: string[], env: Record<string, string>) =>
      promisify(execFile)(cmd, args, { env: { PATH: '/usr/bin:/bin', HOME: home, ...env }, cwd: home, timeout: 120_000 })

    fs.mkdirSync(path.join(home, '.aws'))
    fs.writeFileSync(path.join(home, '.aws', 'config'), '[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n')
    const awsEnv = {
      AWS_ACCESS_KEY_ID: ctx.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: ctx.credentials.secretAccessKey,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_PAGER: '',
    }
    await put(['cli/1', 'cli/2'])
    let before = batches()
    await run(
      '/usr/bin/aws',
      ['--endpoint-url', ctx.endpoint, 's3api', 'delete-objects', '--bucket', 'multi', '--delete', '{"Objects":[{"Key":"cli/1"},{"Key":"cli/2"}]}'],
      awsEnv,
    )
    t.equal(await left('cli/'), 0, 'aws s3api delete-objects')
    t.equal(batches(), before + 1)

    const host = ctx.endpoint.replace('http://', '')
    const cfg = path.join(home, '.s3cfg')
    const s3cfg = `[default]\naccess_key = ${ctx.credentials.accessKeyId}\nsecret_key = ${ctx.credentials.secretAccessKey}\nhost_base = ${host}\nhost_bucket = ${host}\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\n`
    fs.writeFileSync(cfg, s3cfg)
    await put(['s3cmd/1', 's3cmd/2', 's3cmd/3'])
    before = batches()
    await run('/usr/bin/s3cmd', ['-c', cfg, 'del', '--recursive', 's3://multi/s3cmd/'], {})
    t.equal(await left('s3cmd/'), 0, 's3cmd del --recursive')
    t.equal(batches(), before + 1, 's3cmd deleted them in one DeleteObjects')

    await put(['rclone/1', 'rclone/2'])
    const rcloneEnv = {
      RCLONE_CONFIG: path.join(home, 'rclone.conf'),
      RCLONE_CONFIG_COFFER_TYPE: 's3',
      RCLONE_CONFIG_COFFER_PROVIDER: 'Other',
      RCLONE_CONFIG_COFFER_ACCESS_KEY_ID: ctx.credentials.accessKeyId,
      RCLONE_CONFIG_COFFER_SECRET_ACCESS_KEY: ctx.credentials.secretAccessKey,
      RCLONE_CONFIG_COFFER_ENDPOINT: ctx.endpoint,
      RCLONE_CONFIG_COFFER_REGION: 'us-east-1',
    }
    fs.writeFileSync(rcloneEnv.RCLONE_CONFIG, '')
    await run('/usr/bin/rclone', ['purge', 'coffer:multi/rclone'], rcloneEnv)
    t.equal(await left('rclone/'), 0, 'rclone purge')
  },
)

t.test('allow-unordered (RGW extension) is a no-op on ListObjects v1 and v2, and 400 with a delimiter', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'unordered' }))
  for (const key of ['b', 'a/1', 'c', 'a/2']) await client.send(new PutObjectCommand({ Bucket: 'unordered', Key: key, Body: key }))
  const keys = (body: string) => [...body.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => m[1])
  const listTypes: Record<string, string>[] = [{}, { 'list-type': '2' }]
  for (const listType of listTypes) {
    const what = 'list-type' in listType ? 'v2' : 'v1'
    const all = await send(ctx, { method: 'GET', path: '/unordered', query: { ...listType, 'allow-unordered': 'true' } })
    t.equal(all.status, 200, what)
    t.same(keys(all.body), ['a/1', 'a/2', 'b', 'c'], `${what}: every key (in order, a valid unordered order)`)
    const page = await send(ctx, { method: 'GET', path: '/unordered', query: { ...listType, 'allow-unordered': 'true', 'max-keys': '2' } })
    t.same(keys(page.body), ['a/1', 'a/2'], `${what}: max-keys pages`)
    t.match(page.body, '<IsTruncated>true</IsTruncated>')
    const grouped = await send(ctx, { method: 'GET', path: '/unordered', query: { ...listType, 'allow-unordered': 'true', delimiter: '/' } })
    t.equal(grouped.status, 400, `${what}: with a delimiter`)
    t.equal(code(grouped.body), 'InvalidArgument')
    const off = await send(ctx, { method: 'GET', path: '/unordered', query: { ...listType, 'allow-unordered': 'false', delimiter: '/' } })
    t.equal(off.status, 200, `${what}: allow-unordered=false with a delimiter is an ordinary listing`)
    t.match(off.body, '<CommonPrefixes><Prefix>a/</Prefix></CommonPrefixes>')
  }
})

t.test('Content-Encoding is stored as the client spelt it, only aws-chunked removed', async (t) => {
  const ctx = await makeS3(t)
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'encodings' }))
  const cases: [string, string][] = [
    ['deflate, gzip', 'deflate, gzip'],
    ['deflate,gzip', 'deflate,gzip'],
    ['aws-chunked, deflate, gzip', 'deflate, gzip'],
    ['deflate, aws-chunked, gzip', 'deflate, gzip'],
    ['gzip, aws-chunked', 'gzip'],
  ]
  for (const [i, [sent, stored]] of cases.entries()) {
    const put = await send(ctx, { method: 'PUT', path: `/encodings/o${i}`, headers: { 'content-encoding': sent }, payload: 'x' })
    t.equal(put.status, 200, sent)
    t.equal((await client.send(new HeadObjectCommand({ Bucket: 'encodings', Key: `o${i}` }))).ContentEncoding, stored, sent)
  }
  // The SDK's streamed upload adds aws-chunked itself (its body is aws-chunked with a checksum trailer).
  const body = Readable.from([Buffer.from('streamed')])
  await client.send(new PutObjectCommand({ Bucket: 'encodings', Key: 'sdk', Body: body, ContentLength: 8, ContentEncoding: 'deflate, gzip' }))
  t.equal((await client.send(new HeadObjectCommand({ Bucket: 'encodings', Key: 'sdk' }))).ContentEncoding, 'deflate, gzip', 'the SDK, aws-chunked')
})
