// @suites: sqlite
import t from 'tap'
import { findSecrets } from './log-scan/secrets'
import { newApiKey, newWebhookSecret } from '../src/lib/secrets'
import { redactUrl } from '../src/lib/logger'

t.test('the log scanner recognises every kind of credential and passes clean lines', async (t) => {
  t.same(findSecrets(`{"msg":"x","key":"${newApiKey()}"}`), ['tenant API key'])
  t.same(findSecrets(`{"k":"${newApiKey('test')}"}`), ['tenant API key'])
  t.same(findSecrets(`{"secret":"${newWebhookSecret()}"}`), ['webhook secret'])
  t.same(findSecrets('{"url":"/api/v1/files/x/download?expires=1&token=' + 'ab'.repeat(32) + '"}'), ['signed URL or upload token'])
  t.same(findSecrets('{"h":"Bearer abcdefghijk"}'), ['Authorization header value'])
  t.same(findSecrets('{"k":"test-admin-key-0123456789abcdef"}'), ['admin key used by the tests'])
  t.same(findSecrets('{"url":"/api/v1/upload/x?expires=1&token=[REDACTED]","sha256":"' + 'ab'.repeat(32) + '"}'), [])
  t.same(findSecrets('{"secretAccessKey":"' + 'Ab1+/'.repeat(8) + '"}'), ['S3 secret access key'])
  t.same(findSecrets('{"url":"/b/k?X-Amz-Credential=CK&X-Amz-Signature=' + 'ab'.repeat(32) + '"}'), ['S3 presigned URL signature'])
  t.same(
    findSecrets(
      '{"h":"AWS4-HMAC-SHA256 Credential=CKAAAAAAAAAAAAAAAAAA/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=' + 'ab'.repeat(32) + '"}',
    ),
    ['SigV4 Authorization header'],
  )
  // A fixed access key id of a CI fixture (#28) is no CK… id, and is caught all the same.
  t.same(
    findSecrets('{"h":"AWS4-HMAC-SHA256 Credential=test1234/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=' + 'ab'.repeat(32) + '"}'),
    ['SigV4 Authorization header'],
  )
  t.same(findSecrets('{"url":"/b/k?X-Amz-Signature=[REDACTED]","secretAccessKey":"[REDACTED]"}'), [])
})

t.test('presigned S3 URLs are logged with their signature redacted', async (t) => {
  t.equal(redactUrl('/b/k?X-Amz-Credential=CK%2F1&X-Amz-Signature=abcdef0123&x=1'), '/b/k?X-Amz-Credential=CK%2F1&X-Amz-Signature=[REDACTED]&x=1')
})
