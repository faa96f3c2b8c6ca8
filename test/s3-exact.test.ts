// S3 answers exactly as AWS's where Coffer already claims the operation (#24): odd headers,
// listing encodings, error codes, bucket names, conditional writes, copies that must not pretend,
// and DeleteObjects' required digest.
import { createHash } from 'node:crypto'
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
    t.equal(put.status, 200, `${key}: ${put.body}`)
    const head = await ctx.client.send(new HeadObjectCommand({ Bucket: 'types', Key: key }))
    t.equal(head.ContentType, stored, `${key} is stored as ${stored}`)
  }
  // The same through the other body-taking operations: no 500 for an empty type.
  const mp = await send(ctx, { method: 'POST', path: '/types/mp', query: { uploads: '' }, headers: { 'content-type': '' } })
  t.equal(mp.status, 200, mp.body)
})
