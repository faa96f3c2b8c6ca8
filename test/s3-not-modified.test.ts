// @suites: pg-all
// A 304 Not Modified from GetObject carries the validators and what RFC 9110 §15.4.5 requires of
// it (ETag, Last-Modified, Cache-Control, Expires), never what describes the bytes it does not
// send: `x-amz-checksum-*`, `x-amz-meta-*`, Content-Encoding, Content-Language. boto3 ≥ 1.36 asks
// for checksums on every GetObject (`x-amz-checksum-mode: ENABLED`) and crashed (TypeError) on a
// 304 with a checksum header instead of raising its 304 error (ceph/s3-tests, #24).
import { execFile, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { promisify } from 'node:util'
import t from 'tap'
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, type S3ServiceException } from '@aws-sdk/client-s3'
import { makeS3, type S3Context, sendSigned } from './s3-helper'

async function get(ctx: S3Context, headers: Record<string, string>) {
  return sendSigned(ctx, { method: 'GET', path: '/not-mod/obj', headers })
}

async function seed(ctx: S3Context) {
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'not-mod' }))
  return ctx.client.send(
    new PutObjectCommand({
      Bucket: 'not-mod',
      Key: 'obj',
      Body: 'hello',
      ChecksumAlgorithm: 'CRC32',
      Metadata: { colour: 'blue' },
      ContentEncoding: 'identity',
      ContentLanguage: 'en',
      CacheControl: 'max-age=60',
      Expires: new Date('2030-01-01T00:00:00Z'),
    }),
  )
}

t.test('a 304 keeps the validators and caching headers, not the checksum, metadata or content headers', async (t) => {
  const ctx = await makeS3(t)
  const put = await seed(ctx)
  const full = await get(ctx, { 'x-amz-checksum-mode': 'ENABLED' })
  t.equal(full.status, 200)
  t.equal(full.headers['x-amz-checksum-crc32'], put.ChecksumCRC32, 'the 200 has the checksum')
  t.equal(full.headers['x-amz-meta-colour'], 'blue')
  t.equal(full.headers['content-language'], 'en')

  const conditionals: Record<string, string>[] = [{ 'if-none-match': put.ETag! }, { 'if-modified-since': full.headers['last-modified']! }]
  for (const conditional of conditionals) {
    const res = await get(ctx, { 'x-amz-checksum-mode': 'ENABLED', ...conditional })
    const what = Object.keys(conditional)[0]!
    t.equal(res.status, 304, what)
    t.equal(res.body, '')
    t.equal(res.headers.etag, put.ETag, `${what}: ETag kept`)
    t.equal(res.headers['last-modified'], full.headers['last-modified'], `${what}: Last-Modified kept`)
    t.equal(res.headers['cache-control'], 'max-age=60', `${what}: Cache-Control kept`)
    t.equal(res.headers.expires, full.headers.expires, `${what}: Expires kept`)
    t.same(
      Object.keys(res.headers).filter((h) => /^(x-amz-checksum-|x-amz-meta-|content-encoding$|content-language$|x-amz-mp-parts-count$)/.test(h)),
      [],
      `${what}: nothing that describes the bytes`,
    )
  }
})

t.test('the JS SDK with ChecksumMode ENABLED gets NotModified', async (t) => {
  const ctx = await makeS3(t)
  const put = await seed(ctx)
  let err: S3ServiceException | undefined
  try {
    await ctx.client.send(new GetObjectCommand({ Bucket: 'not-mod', Key: 'obj', IfNoneMatch: put.ETag, ChecksumMode: 'ENABLED' }))
  } catch (e) {
    err = e as S3ServiceException
  }
  // The SDK names an error without a body 'Unknown' (a 304 has none); what matters is its status
  // and that no checksum was validated against the empty body.
  t.equal(err?.$metadata.httpStatusCode, 304, String(err))
  t.notOk((err?.$response as { headers?: Record<string, string> } | undefined)?.headers?.['x-amz-checksum-crc32'], 'no checksum on the 304')
  const got = await ctx.client.send(new GetObjectCommand({ Bucket: 'not-mod', Key: 'obj', ChecksumMode: 'ENABLED' }))
  t.equal(await got.Body!.transformToString(), 'hello')
  t.equal(got.ChecksumCRC32, put.ChecksumCRC32)
})

// boto3 ≥ 1.36 is what crashed; Debian's older boto3 is used when no newer one is found, with the
// checksum mode asked explicitly (COFFER_TEST_BOTO3_PYTHON names an interpreter to use).
const python = [process.env.COFFER_TEST_BOTO3_PYTHON, '/root/.pyenv/versions/3.11.7/bin/python3', 'python3'].find(
  (p) => p !== undefined && (p === 'python3' || fs.existsSync(p)) && spawnSync(p, ['-c', 'import boto3'], { encoding: 'utf8' }).status === 0,
)

t.test(
  'boto3 get_object with IfNoneMatch raises its 304 ClientError, not a TypeError',
  { skip: python === undefined && 'no python3 with boto3' },
  async (t) => {
    const ctx = await makeS3(t)
    const put = await seed(ctx)
    const script = `
import sys, boto3, botocore
from botocore.config import Config
endpoint, key, secret, etag = sys.argv[1:5]
c = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret, region_name='us-east-1',
                 config=Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))
for cond in ({'IfNoneMatch': etag}, {'IfModifiedSince': c.head_object(Bucket='not-mod', Key='obj')['LastModified']}):
    try:
        c.get_object(Bucket='not-mod', Key='obj', ChecksumMode='ENABLED', **cond)
        print('no error')
    except botocore.exceptions.ClientError as e:
        print(e.response['Error']['Code'], e.response['ResponseMetadata']['HTTPStatusCode'])
print(c.get_object(Bucket='not-mod', Key='obj', ChecksumMode='ENABLED')['Body'].read().decode())
print(boto3.__version__, file=sys.stderr)
`
    const run = await promisify(execFile)(python!, ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey, put.ETag!], {
      encoding: 'utf8',
      timeout: 60_000,
    }).catch((e: { stdout: string; stderr: string }) => e)
    t.equal(run.stdout, '304 304\n304 304\nhello\n', `boto3 ${run.stderr.trim().split('\n').at(-1)}`)
  },
)
