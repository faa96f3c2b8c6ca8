// @suites: pg s3
// A signature covers what the request is obeyed for: a query parameter or header that appears twice
// is refused, with SigV2 (botocore's HmacV1Auth and HmacV1QueryAuth, the signers AWS CLI v1 runs)
// and SigV4 (the AWS SDK's presigner and signer), so that a parameter appended to a signed URL can
// neither read another version, store a private object as public, write a part into another upload,
// nor change the type an object is served with. The signatures come from those clients, never from
// this implementation.
import { execFile } from 'node:child_process'
import http from 'node:http'
import t, { type Test } from 'tap'
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { SignatureV4 } from '@smithy/signature-v4'
import { makeS3, bodyOf, NodeSha256, type S3Context } from './s3-helper'
import { s3ClientsMissing, tempDir } from './helper'

t.setTimeout(600000)

const missing = s3ClientsMissing('the SigV2 (botocore) tests')

/**
 * botocore (Debian's python3-botocore) signing raw requests as AWS CLI v1 does with
 * `signature_version = s3`: HmacV1QueryAuth (presigned, when `expires` is given) or HmacV1Auth.
 * Reads a list of requests, prints the list of signed ones.
 */
const BOTOCORE = String.raw`
import json, sys
from botocore.auth import HmacV1Auth, HmacV1QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
a = json.load(sys.stdin)
creds = Credentials(a['ak'], a['sk'])
out = []
for q in a['requests']:
    r = AWSRequest(method=q['method'], url=q['url'], headers=q.get('headers', {}), data=b'')
    (HmacV1QueryAuth(creds, expires=q['expires']) if 'expires' in q else HmacV1Auth(creds)).add_auth(r)
    out.append({'url': r.url, 'headers': {k: (v.decode() if isinstance(v, bytes) else v) for k, v in r.headers.items()}})
print(json.dumps(out))
`

interface SignRequest {
  method: string
  url: string
  headers?: Record<string, string>
  expires?: number
}

function botocoreSign(t: Test, ctx: S3Context, requests: SignRequest[]): Promise<{ url: string; headers: Record<string, string> }[]> {
  const dir = tempDir(t, 'coffer-botocore-')
  const input = JSON.stringify({ ak: ctx.credentials.accessKeyId, sk: ctx.credentials.secretAccessKey, requests })
  return new Promise((resolve, reject) => {
    const child = execFile(
      '/usr/bin/python3',
      ['-c', BOTOCORE],
      { env: { PATH: '/usr/bin:/bin', HOME: dir }, cwd: dir, timeout: 120_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`botocore: ${String(stderr)}`)) : resolve(JSON.parse(String(stdout)))),
    )
    child.stdin!.end(input)
  })
}

interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  body: Buffer
}

/** A request on a real socket, headers as given (an array value is sent as that many header lines). */
function send(url: string, method: string, headers: Record<string, string | string[]> = {}, body?: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const r = http.request(url, { method, headers })
    r.on('response', (res) => {
      const chunks: Buffer[] = []
      res.on('data', (d: Buffer) => chunks.push(d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }))
    })
    r.on('error', reject)
    r.end(body)
  })
}

const code = (a: Answer) => /<Code>([^<]*)<\/Code>/.exec(a.body.toString())?.[1]

/** A versioned bucket holding doc.txt twice: an old version (the secret one) and the current one. */
async function versionedDoc(ctx: S3Context, bucket: string) {
  await ctx.client.send(new CreateBucketCommand({ Bucket: bucket }))
  await ctx.client.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }))
  const old = await ctx.client.send(new PutObjectCommand({ Bucket: bucket, Key: 'doc.txt', Body: 'old secret version', ContentType: 'text/plain' }))
  const current = await ctx.client.send(new PutObjectCommand({ Bucket: bucket, Key: 'doc.txt', Body: 'current version', ContentType: 'text/plain' }))
  return { oldId: old.VersionId!, currentId: current.VersionId! }
}

/** Two multipart uploads of the same key: a part meant for one must not land in the other. */
async function twoUploads(ctx: S3Context, bucket: string) {
  const first = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin' }))
  const second = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'big.bin' }))
  return { first: first.UploadId!, second: second.UploadId! }
}

const partsOf = async (ctx: S3Context, bucket: string, uploadId: string) =>
  ((await ctx.client.send(new ListPartsCommand({ Bucket: bucket, Key: 'big.bin', UploadId: uploadId }))).Parts ?? []).map((p) => p.PartNumber)

const aclOf = async (ctx: S3Context, bucket: string, key: string) =>
  (await ctx.client.send(new GetObjectAclCommand({ Bucket: bucket, Key: key }))).Grants!.map((g) => `${g.Grantee?.URI ?? g.Grantee?.ID}:${g.Permission}`)

const ALL_USERS = /AllUsers/

t.test('SigV2 presigned (HmacV1QueryAuth): a parameter appended twice is refused, and nothing it asked for happens', { skip: missing }, async (t) => {
  const ctx = await makeS3(t)
  const bucket = 'v2-signed-query'
  const { oldId, currentId } = await versionedDoc(ctx, bucket)
  const uploads = await twoUploads(ctx, bucket)
  const base = `${ctx.endpoint}/${bucket}`
  const [get, typed, put, part] = await botocoreSign(t, ctx, [
    { method: 'GET', url: `${base}/doc.txt?versionId=${currentId}`, expires: 300 },
    { method: 'GET', url: `${base}/doc.txt?response-content-type=text%2Fplain`, expires: 300 },
    // botocore moves the x-amz-acl header of a presigned request into its query, where it is signed.
    { method: 'PUT', url: `${base}/private.txt`, headers: { 'x-amz-acl': 'private' }, expires: 300 },
    { method: 'PUT', url: `${base}/big.bin?partNumber=1&uploadId=${uploads.first}`, expires: 300 },
  ])
  t.match(put!.url, /x-amz-acl=private/)

  // Another version: the name appended as is, and spelled with a percent-encoded letter.
  for (const appended of [`versionId=${oldId}`, `version%49d=${oldId}`]) {
    const other = await send(`${get!.url}&${appended}`, 'GET')
    t.equal(other.status, 403, `&${appended}`)
    t.equal(code(other), 'SignatureDoesNotMatch')
    t.notMatch(other.body.toString(), 'old secret', 'the other version was not served')
  }
  const asSigned = await send(get!.url, 'GET')
  t.equal(asSigned.status, 200, 'the URL as signed')
  t.equal(asSigned.body.toString(), 'current version')

  // Another served type.
  const html = await send(`${typed!.url}&response-content-type=text%2Fhtml`, 'GET')
  t.equal(html.status, 403)
  t.equal(code(html), 'SignatureDoesNotMatch')
  t.not(html.headers['content-type'], 'text/html')
  const plain = await send(typed!.url, 'GET')
  t.equal(plain.status, 200)
  t.equal(plain.headers['content-type'], 'text/plain', 'the type as signed')

  // A private PUT made public.
  for (const appended of ['x-amz-acl=public-read', 'X-Amz-Acl=public-read']) {
    const pub = await send(`${put!.url}&${appended}`, 'PUT', {}, Buffer.from('meant to be private'))
    t.equal(pub.status, 403, `&${appended}`)
    t.equal(code(pub), 'SignatureDoesNotMatch')
    t.notOk(await ctx.client.send(new HeadObjectCommand({ Bucket: bucket, Key: 'private.txt' })).catch(() => undefined), 'nothing stored')
  }
  const stored = await send(put!.url, 'PUT', {}, Buffer.from('meant to be private'))
  t.equal(stored.status, 200, 'the URL as signed')
  t.notMatch((await aclOf(ctx, bucket, 'private.txt')).join(' '), ALL_USERS, 'the object is private')
  t.equal((await send(`${base}/private.txt`, 'GET')).status, 403, 'and anonymous reads are refused')

  // A part written into another upload, or as another part number.
  for (const appended of [`uploadId=${uploads.second}`, 'partNumber=2', `partNumber=2&uploadId=${uploads.second}`]) {
    const moved = await send(`${part!.url}&${appended}`, 'PUT', {}, Buffer.from('part bytes'))
    t.equal(moved.status, 403, `&${appended}`)
    t.equal(code(moved), 'SignatureDoesNotMatch')
  }
  t.same(await partsOf(ctx, bucket, uploads.second), [], 'the other upload has no part')
  t.same(await partsOf(ctx, bucket, uploads.first), [], 'nor has the signed one a part 2 (or any)')
  t.equal((await send(part!.url, 'PUT', {}, Buffer.from('part bytes'))).status, 200, 'the URL as signed')
  t.same(await partsOf(ctx, bucket, uploads.first), [1])
  t.same(await partsOf(ctx, bucket, uploads.second), [])
})

t.test('SigV2 header-signed (HmacV1Auth): a query parameter or x-amz-* header added twice is refused', { skip: missing }, async (t) => {
  const ctx = await makeS3(t)
  const bucket = 'v2-signed-header'
  const { oldId, currentId } = await versionedDoc(ctx, bucket)
  const base = `${ctx.endpoint}/${bucket}`
  const [get, put] = await botocoreSign(t, ctx, [
    { method: 'GET', url: `${base}/doc.txt?versionId=${currentId}` },
    // Signed as one line, "a,b": what two lines of the header are read as in the string to sign.
    { method: 'PUT', url: `${base}/meta.txt`, headers: { 'x-amz-meta-note': 'signed,added' } },
  ])
  const other = await send(`${get!.url}&versionId=${oldId}`, 'GET', get!.headers)
  t.equal(other.status, 403)
  t.equal(code(other), 'SignatureDoesNotMatch')
  t.notMatch(other.body.toString(), 'old secret')
  const asSigned = await send(get!.url, 'GET', get!.headers)
  t.equal(asSigned.status, 200)
  t.equal(asSigned.body.toString(), 'current version')

  const twice = await send(put!.url, 'PUT', { ...put!.headers, 'x-amz-meta-note': ['signed', 'added'] }, Buffer.from('x'))
  t.equal(twice.status, 400)
  t.equal(code(twice), 'InvalidArgument')
  t.match(twice.body.toString(), '<ArgumentName>x-amz-meta-note</ArgumentName>')
  t.notOk(await ctx.client.send(new HeadObjectCommand({ Bucket: bucket, Key: 'meta.txt' })).catch(() => undefined), 'nothing stored')
  const once = await send(put!.url, 'PUT', put!.headers, Buffer.from('x'))
  t.equal(once.status, 200, 'the same value in one line')
})

/** A client for the SDK's presigner that adds no default checksum (as the SDK advises for presigned uploads). */
function presigner(t: Test, ctx: S3Context): S3Client {
  const client = new S3Client({
    endpoint: ctx.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: ctx.credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
  })
  t.teardown(() => client.destroy())
  return client
}

t.test('SigV4 presigned (the SDK presigner): a parameter appended twice, or a header added, is refused', async (t) => {
  const ctx = await makeS3(t)
  const bucket = 'v4-signed-query'
  const { oldId, currentId } = await versionedDoc(ctx, bucket)
  const uploads = await twoUploads(ctx, bucket)
  const p = presigner(t, ctx)
  const get = await getSignedUrl(p, new GetObjectCommand({ Bucket: bucket, Key: 'doc.txt', VersionId: currentId, ResponseContentType: 'text/plain' }), {
    expiresIn: 300,
  })
  const put = await getSignedUrl(p, new PutObjectCommand({ Bucket: bucket, Key: 'private.txt', ACL: 'private' }), { expiresIn: 300 })
  const part = await getSignedUrl(p, new UploadPartCommand({ Bucket: bucket, Key: 'big.bin', UploadId: uploads.first, PartNumber: 1 }), { expiresIn: 300 })
  t.match(put, /x-amz-acl=private/, 'the presigner put x-amz-acl in the query')

  for (const appended of [`versionId=${oldId}`, 'response-content-type=text%2Fhtml']) {
    const other = await send(`${get}&${appended}`, 'GET')
    t.equal(other.status, 403, `&${appended}`)
    t.equal(code(other), 'SignatureDoesNotMatch')
    t.notMatch(other.body.toString(), 'old secret')
    t.not(other.headers['content-type'], 'text/html')
  }
  const asSigned = await send(get, 'GET')
  t.equal(asSigned.status, 200)
  t.equal(asSigned.body.toString(), 'current version')
  t.equal(asSigned.headers['content-type'], 'text/plain')

  const pub = await send(`${put}&x-amz-acl=public-read`, 'PUT', {}, Buffer.from('meant to be private'))
  t.equal(pub.status, 403)
  t.equal(code(pub), 'SignatureDoesNotMatch')
  // An x-amz-* header beside the signed query parameter: outside the signature.
  const header = await send(put, 'PUT', { 'x-amz-acl': 'public-read' }, Buffer.from('meant to be private'))
  t.equal(header.status, 403)
  t.equal(code(header), 'AccessDenied')
  t.match(header.body.toString(), '<HeadersNotSigned>x-amz-acl</HeadersNotSigned>')
  const grant = await send(put, 'PUT', { 'x-amz-grant-read': 'uri="http://acs.amazonaws.com/groups/global/AllUsers"' }, Buffer.from('meant to be private'))
  t.equal(grant.status, 403)
  t.match(grant.body.toString(), '<HeadersNotSigned>x-amz-grant-read</HeadersNotSigned>')
  t.notOk(await ctx.client.send(new HeadObjectCommand({ Bucket: bucket, Key: 'private.txt' })).catch(() => undefined), 'nothing stored')
  t.equal((await send(put, 'PUT', {}, Buffer.from('meant to be private'))).status, 200, 'the URL as signed')
  t.notMatch((await aclOf(ctx, bucket, 'private.txt')).join(' '), ALL_USERS, 'the object is private')

  for (const appended of [`uploadId=${uploads.second}`, 'partNumber=2']) {
    const moved = await send(`${part}&${appended}`, 'PUT', {}, Buffer.from('part bytes'))
    t.equal(moved.status, 403, `&${appended}`)
    t.equal(code(moved), 'SignatureDoesNotMatch')
  }
  t.same(await partsOf(ctx, bucket, uploads.second), [])
  t.same(await partsOf(ctx, bucket, uploads.first), [])
})

/** The SDK's SigV4 signer over a query that names a parameter twice (the signer signs both values). */
async function signV4Twice(ctx: S3Context, method: string, path: string, query: Record<string, string | string[]>, presigned: boolean) {
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: ctx.credentials, sha256: NodeSha256, uriEscapePath: false })
  const host = ctx.endpoint.replace('http://', '')
  const request = { method, protocol: 'http:', hostname: '127.0.0.1', path, query, headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } }
  const signed = presigned ? await signer.presign(request, { expiresIn: 300 }) : await signer.sign(request)
  const qs = Object.entries(signed.query ?? {})
    .flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((one) => `${encodeURIComponent(k)}=${encodeURIComponent(one!)}`))
    .join('&')
  return { url: `${ctx.endpoint}${path}?${qs}`, headers: signed.headers }
}

t.test('SigV4 signed over a parameter given twice: refused as AWS refuses it, SignatureDoesNotMatch', async (t) => {
  const ctx = await makeS3(t)
  const bucket = 'v4-twice'
  const { oldId, currentId } = await versionedDoc(ctx, bucket)
  // AWS's canonical query keeps one value of a name, so a signer that signed both fails there; here
  // the handler would otherwise have had two values to choose from.
  for (const presigned of [true, false]) {
    const { url, headers } = await signV4Twice(ctx, 'GET', `/${bucket}/doc.txt`, { versionId: [currentId, oldId] }, presigned)
    const res = await send(url, 'GET', presigned ? {} : headers)
    t.equal(res.status, 403, presigned ? 'presigned' : 'header-signed')
    t.equal(code(res), 'SignatureDoesNotMatch')
    t.notMatch(res.body.toString(), /old secret|current version/)
  }
  // The same signer over one value: served.
  const { url, headers } = await signV4Twice(ctx, 'GET', `/${bucket}/doc.txt`, { versionId: oldId }, false)
  const one = await send(url, 'GET', headers)
  t.equal(one.status, 200)
  t.equal(one.body.toString(), 'old secret version')
  t.equal((await bodyOf(ctx.client.send(new GetObjectCommand({ Bucket: bucket, Key: 'doc.txt' })))).toString(), 'current version')
})

t.test('SigV4 header-signed: an x-amz-* header sent twice is 400 InvalidArgument, nothing stored', async (t) => {
  const ctx = await makeS3(t)
  const bucket = 'v4-header-twice'
  await ctx.client.send(new CreateBucketCommand({ Bucket: bucket }))
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: ctx.credentials, sha256: NodeSha256, uriEscapePath: false })
  const host = ctx.endpoint.replace('http://', '')
  // The canonical value of a header sent twice is its values joined by a comma: signed as such.
  const signed = await signer.sign({
    method: 'PUT',
    protocol: 'http:',
    hostname: '127.0.0.1',
    path: `/${bucket}/twice.txt`,
    query: {},
    headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'x-amz-meta-note': 'one,two' },
  })
  const res = await send(`${ctx.endpoint}/${bucket}/twice.txt`, 'PUT', { ...signed.headers, 'x-amz-meta-note': ['one', 'two'] }, Buffer.from('x'))
  t.equal(res.status, 400)
  t.equal(code(res), 'InvalidArgument')
  t.match(res.body.toString(), '<ArgumentName>x-amz-meta-note</ArgumentName>')
  t.notOk(await ctx.client.send(new HeadObjectCommand({ Bucket: bucket, Key: 'twice.txt' })).catch(() => undefined), 'nothing stored')
  t.equal((await send(`${ctx.endpoint}/${bucket}/twice.txt`, 'PUT', signed.headers, Buffer.from('x'))).status, 200, 'one line: stored')
})

t.test('anonymous: a parameter given twice is 400 InvalidArgument, not a choice between its values', async (t) => {
  const ctx = await makeS3(t)
  const bucket = 'anon-twice'
  await ctx.client.send(new CreateBucketCommand({ Bucket: bucket, ACL: 'public-read' }))
  await ctx.client.send(new PutObjectCommand({ Bucket: bucket, Key: 'a/one.txt', Body: 'a' }))
  await ctx.client.send(new PutObjectCommand({ Bucket: bucket, Key: 'b/two.txt', Body: 'b' }))
  // Anonymous requests name the bucket with its tenant.
  const res = await send(`${ctx.endpoint}/${ctx.tenant.id}:${bucket}?prefix=a%2F&prefix=b%2F`, 'GET')
  t.equal(res.status, 400)
  t.equal(code(res), 'InvalidArgument')
  t.match(res.body.toString(), '<ArgumentName>prefix</ArgumentName>')
  t.notMatch(res.body.toString(), /one\.txt|two\.txt/)
  const one = await send(`${ctx.endpoint}/${ctx.tenant.id}:${bucket}?prefix=b%2F`, 'GET')
  t.equal(one.status, 200)
  t.match(one.body.toString(), '<Key>b/two.txt</Key>')
})
