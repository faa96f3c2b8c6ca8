// @suites: pg-all
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFile, spawnSync } from 'node:child_process'
import { promisify } from 'node:util'
import { createHash, randomBytes } from 'node:crypto'
import { createPresignedPost } from '@aws-sdk/s3-presigned-post'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetBucketEncryptionCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketEncryptionCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { completeCommand, makeS3, pattern, s3Error, sendSigned as send } from './s3-helper'
import { tempDir } from './helper'
import { parseKmsKeys } from '../src/lib/kms-keys'
import { loadConfig } from '../src/config'
import type { Test } from 'tap'

// SSE-KMS with Coffer's key ring (#27), and SSE-C and SSE-KMS through boto3.

const bodyOf = async (p: Promise<{ Body?: { transformToByteArray(): Promise<Uint8Array> } }>) => Buffer.from(await (await p).Body!.transformToByteArray())

function ringEnv(t: Test, withDefault = true): Record<string, string> {
  const file = path.join(tempDir(t, 'coffer-kms-'), 'kms.keys')
  fs.writeFileSync(file, `# test ring\nring-1=${randomBytes(32).toString('hex')}\nring-2 = ${randomBytes(32).toString('base64')}\n`, { mode: 0o600 })
  return { COFFER_KMS_KEYS_FILE: file, ...(withDefault ? { COFFER_KMS_DEFAULT_KEY: 'ring-1' } : {}) }
}

t.test('the key ring file: name=key lines or JSON, refused with a message that names no key', async (t) => {
  const k = randomBytes(32)
  t.same([...parseKmsKeys(`a=${k.toString('hex')}\n\n# c\nb=${k.toString('base64')}`).keys()], ['a', 'b'])
  t.ok(
    parseKmsKeys(JSON.stringify({ j: k.toString('hex') }))
      .get('j')
      ?.key.equals(k),
  )
  t.throws(() => parseKmsKeys('a=short'), /key "a" must be 64 hex digits/)
  t.throws(() => parseKmsKeys(`a=${k.toString('hex')}\na=${k.toString('hex')}`), /given twice/)
  t.throws(() => parseKmsKeys('nonsense'), /line 1 is not name=key/)
  const dir = tempDir(t)
  t.throws(() => loadConfig({ COFFER_KMS_KEYS_FILE: path.join(dir, 'k') }, { 'data-dir': dir }), /must be outside the data dir/)
  t.throws(() => loadConfig({ COFFER_KMS_DEFAULT_KEY: 'x' }, { 'data-dir': dir }), /needs COFFER_KMS_KEYS_FILE/)
})

t.test('SSE-KMS: named keys, the default key, reported on reads, bucket default, copies, multipart, unknown keys refused', async (t) => {
  const ctx = await makeS3(t, ringEnv(t), { store: 'disk' })
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'kms' }))
  const body = pattern(200_000, 3)
  const put = await client.send(new PutObjectCommand({ Bucket: 'kms', Key: 'a', Body: body, ServerSideEncryption: 'aws:kms', SSEKMSKeyId: 'ring-2' }))
  t.equal(put.ServerSideEncryption, 'aws:kms')
  t.equal(put.SSEKMSKeyId, 'ring-2')
  const got = await client.send(new GetObjectCommand({ Bucket: 'kms', Key: 'a', Range: 'bytes=1000-150000' }))
  t.equal(got.SSEKMSKeyId, 'ring-2', 'GetObject reports the key id')
  t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(body.subarray(1000, 150_001)), 'a ranged GET needs no key from the client')
  t.equal((await client.send(new HeadObjectCommand({ Bucket: 'kms', Key: 'a' }))).ServerSideEncryption, 'aws:kms')
  const def = await client.send(new PutObjectCommand({ Bucket: 'kms', Key: 'd', Body: 'x', ServerSideEncryption: 'aws:kms' }))
  t.equal(def.SSEKMSKeyId, 'ring-1', 'aws:kms without a key id: the default key')
  const stored = ctx.core.db.pluck("SELECT sha256 FROM files WHERE object_key = 'a' AND deleted_at IS NULL").get() as string
  const file = fs.readdirSync(ctx.core.dataDir.blobs, { recursive: true, withFileTypes: true }).find((e) => e.isFile() && e.name === stored)
  t.ok(file, 'stored under the hash of its sealed bytes')
  t.notOk(fs.readFileSync(path.join(file!.parentPath, file!.name)).includes(body.subarray(5000, 5032)), 'no plaintext in the blob')

  const fileId = ctx.core.db.pluck("SELECT id FROM files WHERE object_key = 'a' AND deleted_at IS NULL").get() as string
  const api = await ctx.app.inject({ url: `/api/v1/files/${fileId}/download`, headers: ctx.tenant.headers })
  t.ok(api.rawPayload.equals(body), 'the Storage Brain API downloads an SSE-KMS object in the clear')
  const plainSha = createHash('sha256').update(body).digest('hex')
  t.equal(api.headers.etag, `"${plainSha}"`, "the API's ETag is the plaintext's SHA-256 (what `coffer download` checks), not the sealed blob's")
  const versions = await ctx.app.inject({ url: `/api/v1/files/${fileId}/versions`, headers: ctx.tenant.headers })
  t.equal(versions.json().versions[0].sha256, plainSha, "a file's versions list the plaintext's SHA-256")

  const unknown = await send(ctx, {
    method: 'PUT',
    path: '/kms/u',
    headers: { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': 'nope' },
    payload: 'x',
  })
  t.equal(unknown.status, 400, 'an unknown key id is 400')
  t.match(unknown.body, '<Code>InvalidArgument</Code>')
  const undeclared = await send(ctx, { method: 'PUT', path: '/kms/u', headers: { 'x-amz-server-side-encryption-aws-kms-key-id': 'ring-1' }, payload: 'x' })
  t.equal(undeclared.status, 400, 'a key id without aws:kms is 400')
  const onGet = await send(ctx, { method: 'GET', path: '/kms/a', headers: { 'x-amz-server-side-encryption': 'aws:kms' } })
  t.equal(onGet.status, 400, 'aws:kms on a GET is 400')

  // Copies: KMS → another KMS key, KMS → plain, plain → KMS.
  const c = await client.send(new CopyObjectCommand({ Bucket: 'kms', Key: 'c', CopySource: 'kms/a', ServerSideEncryption: 'aws:kms', SSEKMSKeyId: 'ring-1' }))
  t.equal(c.SSEKMSKeyId, 'ring-1')
  t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'kms', Key: 'c' })))).equals(body))
  await client.send(new CopyObjectCommand({ Bucket: 'kms', Key: 'p', CopySource: 'kms/a' }))
  const plain = await client.send(new GetObjectCommand({ Bucket: 'kms', Key: 'p' }))
  t.equal(plain.ServerSideEncryption, undefined, 'a copy without encryption is plain')
  t.ok(Buffer.from(await plain.Body!.transformToByteArray()).equals(body))

  // The bucket default: aws:kms with a KMSMasterKeyID applies to writes that ask for nothing.
  await client.send(
    new PutBucketEncryptionCommand({
      Bucket: 'kms',
      ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: 'ring-2' } }] },
    }),
  )
  const rule = (await client.send(new GetBucketEncryptionCommand({ Bucket: 'kms' }))).ServerSideEncryptionConfiguration?.Rules?.[0]
  t.same(rule?.ApplyServerSideEncryptionByDefault, { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: 'ring-2' })
  t.equal((await client.send(new PutObjectCommand({ Bucket: 'kms', Key: 'b', Body: 'y' }))).SSEKMSKeyId, 'ring-2', 'the default applies')
  t.equal((await client.send(new CopyObjectCommand({ Bucket: 'kms', Key: 'p2', CopySource: 'kms/p' }))).SSEKMSKeyId, 'ring-2', 'to copies too')
  t.match(
    await s3Error(
      client.send(
        new PutBucketEncryptionCommand({
          Bucket: 'kms',
          ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: 'nope' } }] },
        }),
      ),
    ),
    { name: 'InvalidArgument', status: 400 },
  )
  // Multipart under the default: parts sealed as they arrive, read across them.
  const mp = await client.send(new CreateMultipartUploadCommand({ Bucket: 'kms', Key: 'mp' }))
  t.equal(mp.SSEKMSKeyId, 'ring-2')
  const p1 = pattern(5 * 1024 * 1024, 4)
  const p2 = pattern(1000, 5)
  const u1 = await client.send(new UploadPartCommand({ Bucket: 'kms', Key: 'mp', UploadId: mp.UploadId, PartNumber: 1, Body: p1 }))
  const u2 = await client.send(new UploadPartCommand({ Bucket: 'kms', Key: 'mp', UploadId: mp.UploadId, PartNumber: 2, Body: p2 }))
  const done = await client.send(
    completeCommand('kms', 'mp', mp.UploadId, [
      [1, u1.ETag],
      [2, u2.ETag],
    ]),
  )
  t.equal(done.ServerSideEncryption, 'aws:kms')
  const r = await bodyOf(client.send(new GetObjectCommand({ Bucket: 'kms', Key: 'mp', Range: `bytes=${p1.length - 10}-${p1.length + 9}` })))
  t.ok(r.equals(Buffer.concat([p1, p2]).subarray(p1.length - 10, p1.length + 10)))
})

t.test('aws:kms without a key id and no default key is 400; without a key ring every key id is unknown', async (t) => {
  const ctx = await makeS3(t, {}, { store: 'disk' })
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'nokms' }))
  const res = await send(ctx, { method: 'PUT', path: '/nokms/k', headers: { 'x-amz-server-side-encryption': 'aws:kms' }, payload: 'x' })
  t.equal(res.status, 400)
  t.match(res.body, 'COFFER_KMS_DEFAULT_KEY')
})

// boto3 (the pyenv Python's, else Debian's python3-boto3).
const python = [process.env.COFFER_TEST_BOTO3_PYTHON, '/root/.pyenv/versions/3.11.7/bin/python3', 'python3'].find(
  (p) => p !== undefined && (p === 'python3' || fs.existsSync(p)) && spawnSync(p, ['-c', 'import boto3'], { encoding: 'utf8' }).status === 0,
)

t.test(
  'boto3: SSE-C put, ranged get, wrong key, copy between two keys, multipart; SSE-KMS',
  { skip: python === undefined && 'no python3 with boto3' },
  async (t) => {
    const ctx = await makeS3(t, ringEnv(t), { store: 'disk' })
    const script = `
import sys, os, base64, hashlib, boto3, botocore
from botocore.config import Config
endpoint, key, secret = sys.argv[1:4]
c = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret, region_name='us-east-1',
                 config=Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))
A, B = os.urandom(32), os.urandom(32)
def err(f, **kw):
    try:
        f(**kw)
        return 'no error'
    except botocore.exceptions.ClientError as e:
        return '%s %s' % (e.response['Error']['Code'], e.response['ResponseMetadata']['HTTPStatusCode'])
def ssec(k):
    return {'SSECustomerAlgorithm': 'AES256', 'SSECustomerKey': k}
def csrc(k):
    return {'CopySourceSSECustomerAlgorithm': 'AES256', 'CopySourceSSECustomerKey': k}
data = os.urandom(200000)
c.create_bucket(Bucket='boto')
r = c.put_object(Bucket='boto', Key='a', Body=data, **ssec(A))
print(r['SSECustomerAlgorithm'], r['SSECustomerKeyMD5'] == base64.b64encode(hashlib.md5(A).digest()).decode())
print(c.get_object(Bucket='boto', Key='a', Range='bytes=70000-140000', **ssec(A))['Body'].read() == data[70000:140001])
print(err(c.get_object, Bucket='boto', Key='a', **ssec(B)))
print(err(c.get_object, Bucket='boto', Key='a'))
print(err(c.head_object, Bucket='boto', Key='a'))
c.copy_object(Bucket='boto', Key='b', CopySource={'Bucket': 'boto', 'Key': 'a'}, **csrc(A), **ssec(B))
print(c.get_object(Bucket='boto', Key='b', **ssec(B))['Body'].read() == data, err(c.get_object, Bucket='boto', Key='b', **ssec(A)))
u = c.create_multipart_upload(Bucket='boto', Key='m', **ssec(A))['UploadId']
p1, p2 = os.urandom(5 * 1024 * 1024), os.urandom(12345)
e1 = c.upload_part(Bucket='boto', Key='m', UploadId=u, PartNumber=1, Body=p1, **ssec(A))['ETag']
e2 = c.upload_part(Bucket='boto', Key='m', UploadId=u, PartNumber=2, Body=p2, **ssec(A))['ETag']
print(err(c.upload_part, Bucket='boto', Key='m', UploadId=u, PartNumber=3, Body=b'x', **ssec(B)))
c.complete_multipart_upload(Bucket='boto', Key='m', UploadId=u, MultipartUpload={'Parts': [{'PartNumber': 1, 'ETag': e1}, {'PartNumber': 2, 'ETag': e2}]}, **ssec(A))
print(c.get_object(Bucket='boto', Key='m', **ssec(A))['Body'].read() == p1 + p2, c.list_objects_v2(Bucket='boto', Prefix='m')['Contents'][0]['Size'])
r = c.put_object(Bucket='boto', Key='k', Body=b'kms', ServerSideEncryption='aws:kms', SSEKMSKeyId='ring-2')
g = c.get_object(Bucket='boto', Key='k')
print(r['ServerSideEncryption'], g['SSEKMSKeyId'], g['Body'].read())
print(err(c.put_object, Bucket='boto', Key='k', Body=b'x', ServerSideEncryption='aws:kms', SSEKMSKeyId='missing'))
print(boto3.__version__, file=sys.stderr)
`
    const run = await promisify(execFile)(python!, ['-c', script, ctx.endpoint, ctx.credentials.accessKeyId, ctx.credentials.secretAccessKey], {
      encoding: 'utf8',
      timeout: 120_000,
    }).catch((e: { stdout: string; stderr: string }) => e)
    t.equal(
      run.stdout,
      [
        'AES256 True',
        'True',
        'InvalidArgument 400',
        'InvalidRequest 400',
        '400 400',
        'True InvalidArgument 400',
        'InvalidArgument 400',
        `True ${5 * 1024 * 1024 + 12345}`,
        "aws:kms ring-2 b'kms'",
        'InvalidArgument 400',
        '',
      ].join('\n'),
      `boto3 ${run.stderr.trim().split('\n').at(-1)}`,
    )
  },
)

t.test('POST Object: SSE-C and SSE-KMS form fields, the bucket default, and an empty starts-with for an absent field', async (t) => {
  const ctx = await makeS3(t, ringEnv(t, false), { store: 'disk' })
  const { client } = ctx
  await client.send(new CreateBucketCommand({ Bucket: 'forms' }))
  const key = randomBytes(32)
  const md5 = createHash('md5').update(key).digest('base64')
  type Conditions = NonNullable<Parameters<typeof createPresignedPost>[1]['Conditions']>
  const post = async (name: string, fields: Record<string, string>, conditions: Conditions = []) => {
    const p = await createPresignedPost(client, {
      Bucket: 'forms',
      Key: name,
      Fields: fields,
      Conditions: [...(Object.entries(fields).map(([k, v]) => ['eq', `$${k}`, v]) as Conditions), ...conditions],
      Expires: 600,
    })
    const form = new FormData()
    for (const [k, v] of Object.entries(p.fields)) form.append(k, v)
    form.append('file', new Blob(['form body']), 'f.txt')
    return fetch(`${ctx.endpoint}/forms`, { method: 'POST', body: form })
  }
  const c = await post('c', {
    'x-amz-server-side-encryption-customer-algorithm': 'AES256',
    'x-amz-server-side-encryption-customer-key': key.toString('base64'),
    'x-amz-server-side-encryption-customer-key-md5': md5,
  })
  t.equal(c.status, 204, await c.text())
  const ssec = { SSECustomerAlgorithm: 'AES256', SSECustomerKey: key.toString('base64'), SSECustomerKeyMD5: md5 }
  t.equal((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'forms', Key: 'c', ...ssec })))).toString(), 'form body', 'an SSE-C form upload')
  t.match(await s3Error(client.send(new GetObjectCommand({ Bucket: 'forms', Key: 'c' }))), { status: 400 }, 'not readable without the key')
  const k = await post('k', { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': 'ring-2' })
  t.equal(k.status, 204, await k.text())
  t.equal((await client.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'k' }))).SSEKMSKeyId, 'ring-2', 'an SSE-KMS form upload')
  const bad = await post('bad', { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': 'nope' })
  t.equal(bad.status, 400, 'an unknown key id in a form is 400')
  await client.send(
    new PutBucketEncryptionCommand({
      Bucket: 'forms',
      ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: 'ring-1' } }] },
    }),
  )
  // ceph/s3-tests' default-encryption form: a starts-with "" condition for a field the form does not send.
  const d = await post('d', {}, [['starts-with', '$x-amz-server-side-encryption', '']])
  t.equal(d.status, 204, await d.text())
  t.equal((await client.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'd' }))).SSEKMSKeyId, 'ring-1', 'the bucket default applies to form uploads')
})
