// @suites: pg-all
import t from 'tap'
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { getSignedUrl } from '@aws-sdk/s3-request-presigner'
import { makeS3 } from './s3-helper'

// GetObject answers through the API's download renderer (http/send-blob.ts). A browser revalidating
// a presigned GET with fetch() sends `Cache-Control: no-cache` and `Pragma: no-cache` beside its
// If-None-Match or If-Modified-Since (Fetch standard, HTTP-network-or-cache fetch; Node's fetch
// does the same), and gets a 304 as from AWS: the origin evaluates conditions whatever the
// request's cache directives (RFC 9110 §13.2.1, #24).

t.test('GetObject: a presigned URL revalidated by fetch() answers 304', async (t) => {
  const { client } = await makeS3(t)
  await client.send(new CreateBucketCommand({ Bucket: 'cond-get' }))
  const put = await client.send(new PutObjectCommand({ Bucket: 'cond-get', Key: 'a.txt', Body: 'hello' }))
  const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: 'cond-get', Key: 'a.txt' }), { expiresIn: 600 })

  const first = await fetch(url)
  t.equal(first.status, 200)
  t.equal(await first.text(), 'hello')
  t.equal(first.headers.get('etag'), put.ETag)
  const byTag = await fetch(url, { headers: { 'if-none-match': put.ETag! } })
  t.equal(byTag.status, 304, 'If-None-Match with the ETag')
  t.equal(await byTag.text(), '')
  const byDate = await fetch(url, { headers: { 'if-modified-since': first.headers.get('last-modified')! } })
  t.equal(byDate.status, 304, 'If-Modified-Since with the Last-Modified')
  const changed = await fetch(url, { headers: { 'if-none-match': '"0123456789abcdef0123456789abcdef"' } })
  t.equal(changed.status, 200, 'another tag still gets the content')
  t.equal(await changed.text(), 'hello')
})
