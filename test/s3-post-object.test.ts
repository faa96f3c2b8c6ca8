// @suites: pg-all
// POST Object (#26): a browser's form upload to POST /<bucket>, authenticated by its signed policy
// (SigV4 form fields, or SigV2's when enabled), every field covered by a condition, the file
// streamed into the same write as PutObject and held to the policy's content-length-range.
import { execFile } from 'node:child_process'
import { createHash, createHmac } from 'node:crypto'
import { promisify } from 'node:util'
import t from 'tap'
import { CreateBucketCommand, GetObjectCommand, GetObjectTaggingCommand, HeadObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import { createPresignedPost } from '@aws-sdk/s3-presigned-post'
import { makeS3, sendSigned, type S3Context } from './s3-helper'

const run = promisify(execFile)
const code = (body: string) => /<Code>([^<]*)<\/Code>/.exec(body)?.[1]

/** Posts a form of these fields (in order) and a file named `filename` last, as a browser does. */
async function postForm(
  endpoint: string,
  bucket: string,
  fields: [string, string][],
  file: Buffer | string,
  filename = 'upload.bin',
  after: [string, string][] = [],
) {
  const form = new FormData()
  for (const [k, v] of fields) form.append(k, v)
  form.append('file', new Blob([typeof file === 'string' ? file : new Uint8Array(file)]), filename)
  for (const [k, v] of after) form.append(k, v)
  const res = await fetch(`${endpoint}/${bucket}`, { method: 'POST', body: form, redirect: 'manual' })
  return { status: res.status, headers: res.headers, body: await res.text() }
}

async function presigned(ctx: S3Context, bucket: string, opts: Parameters<typeof createPresignedPost>[1]) {
  const post = await createPresignedPost(ctx.client, opts)
  return { ...post, fields: Object.entries(post.fields) }
}

async function keys(ctx: S3Context, bucket: string) {
  return ((await ctx.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key)
}

t.test('the AWS SDK v3 presigned POST uploads a file with its Content-Type, metadata and the ${filename} key', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'forms' }))
  const post = await presigned(ctx, 'forms', {
    Bucket: 'forms',
    Key: 'user/${filename}',
    Conditions: [
      ['starts-with', '$key', 'user/'],
      ['starts-with', '$Content-Type', 'text/'],
      ['content-length-range', 1, 1024],
      ['starts-with', '$x-amz-meta-who', ''],
    ],
    Fields: { 'Content-Type': 'text/plain' },
    Expires: 600,
  })
  const res = await postForm(ctx.endpoint, 'forms', [...post.fields, ['x-amz-meta-who', 'browser']], 'hello form', 'notes.txt')
  t.equal(res.status, 204, res.body)
  t.ok(res.headers.get('etag'))
  const got = await ctx.client.send(new GetObjectCommand({ Bucket: 'forms', Key: 'user/notes.txt' }))
  t.equal(await got.Body!.transformToString(), 'hello form')
  t.equal(got.ContentType, 'text/plain')
  t.same(got.Metadata, { who: 'browser' })
  t.equal(got.ETag, res.headers.get('etag'))

  // success_action_status 201 answers the PostResponse document; a redirect is 303 with bucket, key, etag.
  const p201 = await presigned(ctx, 'forms', { Bucket: 'forms', Key: 'doc.txt', Fields: { success_action_status: '201' }, Expires: 600 })
  const r201 = await postForm(ctx.endpoint, 'forms', p201.fields, 'x')
  t.equal(r201.status, 201)
  t.match(
    r201.body,
    /<PostResponse><Location>http:\/\/127\.0\.0\.1:\d+\/forms\/doc\.txt<\/Location><Bucket>forms<\/Bucket><Key>doc\.txt<\/Key><ETag>&quot;[0-9a-f]{32}&quot;<\/ETag><\/PostResponse>/,
  )
  const pRedirect = await presigned(ctx, 'forms', {
    Bucket: 'forms',
    Key: 'r.txt',
    Fields: { success_action_redirect: 'https://app.example/done?x=1' },
    Expires: 600,
  })
  const r303 = await postForm(ctx.endpoint, 'forms', pRedirect.fields, 'r')
  t.equal(r303.status, 303)
  const head = await ctx.client.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'r.txt' }))
  t.equal(r303.headers.get('location'), `https://app.example/done?x=1&bucket=forms&key=r.txt&etag=${encodeURIComponent(head.ETag!)}`)

  // A redirect to the bucket's own URL (as ceph/s3-tests' test_post_object_success_redirect_action
  // makes): the browser's GET of it, with bucket, key and etag in its query, lists the bucket as AWS does.
  const own = `${ctx.endpoint}/forms`
  const pOwn = await presigned(ctx, 'forms', { Bucket: 'forms', Key: 'own.txt', Fields: { success_action_redirect: own }, Expires: 600 })
  const rOwn = await postForm(ctx.endpoint, 'forms', pOwn.fields, 'own')
  t.equal(rOwn.status, 303)
  const target = new URL(rOwn.headers.get('location')!)
  t.equal(target.pathname, '/forms')
  const listed = await sendSigned(ctx, { method: 'GET', path: target.pathname, query: Object.fromEntries(target.searchParams) })
  t.equal(listed.status, 200, listed.body)
  t.match(listed.body, /<ListBucketResult[^>]*>.*<Key>own\.txt<\/Key>/s)
})

t.test('a form is refused as AWS refuses it, and nothing is stored', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'forms' }))
  const post = await presigned(ctx, 'forms', { Bucket: 'forms', Key: 'a.txt', Conditions: [['content-length-range', 2, 10]], Expires: 600 })
  const cases: [string, [string, string][], string, number, string][] = [
    ['over the content-length-range', post.fields, '12345678901', 400, 'EntityTooLarge'],
    ['under it', post.fields, '1', 400, 'EntityTooSmall'],
    ['a field no condition covers', [...post.fields, ['x-amz-meta-extra', 'v']], 'ok', 403, 'AccessDenied'],
    ['another key than the policy allows', post.fields.map(([k, v]) => (k === 'key' ? [k, 'b.txt'] : [k, v])), 'ok', 403, 'AccessDenied'],
    ['a wrong signature', post.fields.map(([k, v]) => (k === 'X-Amz-Signature' ? [k, '0'.repeat(64)] : [k, v])), 'ok', 403, 'SignatureDoesNotMatch'],
    [
      'an unknown access key',
      post.fields.map(([k, v]) => (k === 'X-Amz-Credential' ? [k, v.replace(/^[^/]+/, 'CKNOSUCHKEY000000000')] : [k, v])),
      'ok',
      403,
      'InvalidAccessKeyId',
    ],
    ['no policy (anonymous)', [['key', 'a.txt']], 'ok', 403, 'AccessDenied'],
    ['no key', post.fields.filter(([k]) => k !== 'key'), 'ok', 400, 'InvalidArgument'],
    ['a tagging field (tagging is not built)', [...post.fields, ['tagging', '<Tagging/>']], 'ok', 403, 'AccessDenied'],
  ]
  for (const [what, fields, file, status, name] of cases) {
    const res = await postForm(ctx.endpoint, 'forms', fields, file)
    t.equal(res.status, status, what)
    t.equal(code(res.body), name, what)
  }
  // An expired policy.
  ctx.clock.set(Date.now() + 601_000)
  const expired = await postForm(ctx.endpoint, 'forms', post.fields, 'ok')
  t.equal(expired.status, 403)
  t.match(expired.body, /Policy expired/)
  t.same(await keys(ctx, 'forms'), [], 'nothing was stored')
  // Not a form at all.
  const plain = await fetch(`${ctx.endpoint}/forms`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } })
  t.equal(plain.status, 412)
  t.equal(code(await plain.text()), 'PreconditionFailed')
})

t.test('a checksum field needs no condition and holds the file to its bytes', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'forms' }))
  const post = await presigned(ctx, 'forms', { Bucket: 'forms', Key: 'c.txt', Expires: 600 })
  const sha256 = createHash('sha256').update('checked').digest('base64')
  const bad = await postForm(
    ctx.endpoint,
    'forms',
    [...post.fields, ['x-amz-checksum-sha256', createHash('sha256').update('other').digest('base64')]],
    'checked',
  )
  t.equal(bad.status, 400)
  t.equal(code(bad.body), 'BadDigest')
  t.same(await keys(ctx, 'forms'), [])
  const good = await postForm(ctx.endpoint, 'forms', [...post.fields, ['x-amz-checksum-sha256', sha256]], 'checked')
  t.equal(good.status, 204, good.body)
  const head = await ctx.client.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'c.txt', ChecksumMode: 'ENABLED' }))
  t.equal(head.ChecksumSHA256, sha256)
})

t.test('a tagging field covered by the policy tags the object; a malformed one stores nothing', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'forms' }))
  const tagging = '<Tagging><TagSet><Tag><Key>kind</Key><Value>avatar</Value></Tag></TagSet></Tagging>'
  const post = await presigned(ctx, 'forms', { Bucket: 'forms', Key: 't.txt', Fields: { tagging }, Expires: 600 })
  const res = await postForm(ctx.endpoint, 'forms', post.fields, 'x')
  t.equal(res.status, 204, res.body)
  const got = await ctx.client.send(new GetObjectTaggingCommand({ Bucket: 'forms', Key: 't.txt' }))
  t.same(got.TagSet, [{ Key: 'kind', Value: 'avatar' }], 'the form tagged the object (#26)')
  const bad = await presigned(ctx, 'forms', { Bucket: 'forms', Key: 'u.txt', Fields: { tagging: '<Tagging><TagSet><Tag>' }, Expires: 600 })
  const refused = await postForm(ctx.endpoint, 'forms', bad.fields, 'x')
  t.equal(refused.status, 400)
  t.same(await keys(ctx, 'forms'), ['t.txt'])
})

t.test('fields after the file are ignored; the file is streamed within the quota', async (t) => {
  const ctx = await makeS3(t, {}, { quotaBytes: 64 * 1024 })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'forms' }))
  const post = await presigned(ctx, 'forms', { Bucket: 'forms', Key: 'late.txt', Expires: 600 })
  const res = await postForm(ctx.endpoint, 'forms', post.fields, 'body', 'f', [['x-amz-meta-late', 'ignored']])
  t.equal(res.status, 204, res.body)
  t.same((await ctx.client.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'late.txt' }))).Metadata, {})
  const big = await presigned(ctx, 'forms', { Bucket: 'forms', Key: 'big.bin', Expires: 600 })
  const over = await postForm(ctx.endpoint, 'forms', big.fields, Buffer.alloc(100 * 1024, 7))
  t.equal(over.status, 403)
  t.equal(code(over.body), 'QuotaExceeded')
  t.same(await keys(ctx, 'forms'), ['late.txt'])
})

t.test('SigV2 forms (AWSAccessKeyId, signature) when COFFER_S3_SIGV2 is on, refused when off', async (t) => {
  for (const sigv2 of ['true', 'false']) {
    const ctx = await makeS3(t, { COFFER_S3_SIGV2: sigv2 })
    await ctx.client.send(new CreateBucketCommand({ Bucket: 'forms' }))
    const policy = Buffer.from(
      JSON.stringify({
        expiration: new Date(Date.now() + 600_000).toISOString(),
        conditions: [
          { bucket: 'forms' },
          ['starts-with', '$key', 'foo'],
          { acl: 'private' },
          ['starts-with', '$Content-Type', 'text/plain'],
          ['content-length-range', 0, 1024],
        ],
      }),
    ).toString('base64')
    const signature = createHmac('sha1', ctx.credentials.secretAccessKey).update(policy).digest('base64')
    const res = await postForm(
      ctx.endpoint,
      'forms',
      [
        ['key', 'foo.txt'],
        ['AWSAccessKeyId', ctx.credentials.accessKeyId],
        ['acl', 'private'],
        ['signature', signature],
        ['policy', policy],
        ['Content-Type', 'text/plain'],
      ],
      'bar',
    )
    if (sigv2 === 'true') {
      t.equal(res.status, 204, res.body)
      t.equal(await (await ctx.client.send(new GetObjectCommand({ Bucket: 'forms', Key: 'foo.txt' }))).Body!.transformToString(), 'bar')
    } else {
      t.equal(res.status, 400)
      t.equal(code(res.body), 'InvalidRequest')
    }
    await ctx.close()
  }
})

t.test("boto3's generate_presigned_post: content-length-range refuses an oversized file, takes a small one", async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'boto' }))
  const script = `
import boto3, json, sys, urllib.request, uuid
s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], region_name='us-east-1',
                  config=boto3.session.Config(s3={'addressing_style': 'path'}))
post = s3.generate_presigned_post('boto', 'upload.bin', Conditions=[['content-length-range', 1, 100]], ExpiresIn=600)
def send(data):
    boundary = uuid.uuid4().hex
    body = b''
    for k, v in post['fields'].items():
        body += ('--%s\\r\\nContent-Disposition: form-data; name="%s"\\r\\n\\r\\n%s\\r\\n' % (boundary, k, v)).encode()
    body += ('--%s\\r\\nContent-Disposition: form-data; name="file"; filename="f"\\r\\n\\r\\n' % boundary).encode() + data + ('\\r\\n--%s--\\r\\n' % boundary).encode()
    req = urllib.request.Request(post['url'], data=body, method='POST', headers={'Content-Type': 'multipart/form-data; boundary=' + boundary})
    try:
        return urllib.request.urlopen(req).status, ''
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
print(json.dumps([send(b'x' * 101), send(b'small')]))
`
  const { stdout } = await run('/usr/bin/python3', ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey])
  const [[bigStatus, bigBody], [smallStatus]] = JSON.parse(stdout) as [[number, string], [number, string]]
  t.equal(bigStatus, 400)
  t.equal(code(bigBody!), 'EntityTooLarge')
  t.equal(smallStatus, 204)
  t.equal(await (await ctx.client.send(new GetObjectCommand({ Bucket: 'boto', Key: 'upload.bin' }))).Body!.transformToString(), 'small')
})
