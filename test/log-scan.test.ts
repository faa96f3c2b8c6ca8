import t from 'tap'
import { findSecrets } from './log-scan/secrets'
import { newApiKey, newWebhookSecret } from '../src/lib/secrets'

t.test('the log scanner recognises every kind of credential and passes clean lines', async (t) => {
  t.same(findSecrets(`{"msg":"x","key":"${newApiKey()}"}`), ['tenant API key'])
  t.same(findSecrets(`{"k":"${newApiKey('test')}"}`), ['tenant API key'])
  t.same(findSecrets(`{"secret":"${newWebhookSecret()}"}`), ['webhook secret'])
  t.same(findSecrets('{"url":"/api/v1/files/x/download?expires=1&token=' + 'ab'.repeat(32) + '"}'), ['signed URL or upload token'])
  t.same(findSecrets('{"h":"Bearer abcdefghijk"}'), ['Authorization header value'])
  t.same(findSecrets('{"k":"test-admin-key-0123456789abcdef"}'), ['admin key used by the tests'])
  t.same(findSecrets('{"url":"/api/v1/upload/x?expires=1&token=[REDACTED]","sha256":"' + 'ab'.repeat(32) + '"}'), [])
})
